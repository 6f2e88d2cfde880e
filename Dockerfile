# privrl: one image for the server, the setup step that creates and compares the runs, and the
# simulated users. Layers are ordered for caching: the dependencies (from pyproject.toml) are
# installed before the source is copied, so editing the code rebuilds only the last layers.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MPLBACKEND=Agg

WORKDIR /app
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && useradd --create-home --uid 1000 privrl \
    && mkdir -p /data /shared \
    && chown privrl:privrl /data /shared

COPY README.md ./
COPY shared ./shared
COPY server ./server
COPY client ./client
RUN pip install --no-deps . && rm -rf build *.egg-info

USER privrl
# compile DP-UCBVI's numba kernels once, into the privrl user's numba cache (~/.cache/numba), so
# no container compiles them on its first run
RUN python -m privrl.accel
EXPOSE 8000
# the default command is the server; docker-compose.yml sets each service's own command
CMD ["python", "-m", "privrl.server", "--host", "0.0.0.0", "--port", "8000", "--db", "/data/privrl.db"]
