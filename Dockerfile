# privrl: one image for the server, the run-creating setup step and the simulated users.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    MPLBACKEND=Agg

WORKDIR /app
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY server ./server
COPY client ./client
RUN pip install . \
    && useradd --create-home --uid 1000 privrl \
    && mkdir -p /data /shared \
    && chown privrl:privrl /data /shared

USER privrl
EXPOSE 8000
# the default command is the server; docker-compose.yml sets each service's own command
CMD ["privrl", "serve", "--host", "0.0.0.0", "--port", "8000", "--db", "/data/privrl.db"]
