"""User credentials of a run: bearer tokens the admin issues, checked by HMAC.

A run created with `?credentials=true` hands out claims only to holders of a credential issued
for it (`POST /v1/runs/{id}/credentials`, `privrl runs credentials RUN --count N`). A credential
is `privrl-cred-v1.<run id>.<credential id>.<tag>`: the credential id is drawn from the OS
CSPRNG (never from the run's seed) and the tag is HMAC-SHA256 of the rest under the server's
credential key (PRIVRL_CREDENTIAL_KEY, or one derived from the admin token when it is unset).
Nothing is stored: the server verifies a credential from the key alone, so one issued for another
run, or under another key, is refused. Rotating the key revokes every credential.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from privrl.protocol import CREDENTIAL_PREFIX as PREFIX
from privrl.server.errors import Refusal
from privrl.server.settings import Settings

MAX_ISSUED = 10_000  # credentials one request may issue


def credential_key(settings: Settings) -> bytes | None:
    """The HMAC key of credentials (None: neither a credential key nor an admin token is set)."""
    if settings.credential_key is not None:
        return settings.credential_key.get_secret_value().encode()
    if settings.admin_token is None:
        return None
    admin = settings.admin_token.get_secret_value().encode()
    return hmac.new(admin, b"privrl user credentials v1", hashlib.sha256).digest()


def _tag(key: bytes, run_id: str, credential_id: str) -> str:
    """The HMAC tag of one credential."""
    mac = hmac.new(key, f"{PREFIX}.{run_id}.{credential_id}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def issue(key: bytes, run_id: str, count: int) -> list[str]:
    """`count` new credentials of `run_id` (fresh random ids)."""
    ids = (secrets.token_hex(8) for _ in range(count))
    return [f"{PREFIX}.{run_id}.{cid}.{_tag(key, run_id, cid)}" for cid in ids]


def verify(key: bytes | None, run_id: str, token: str | None) -> str:
    """The credential id of a valid credential of `run_id`; else 401 (none), 403 (forged, or
    issued for another run) or 503 (this server has no credential key)."""
    if token is None:
        raise Refusal(401, "no_credential", f"run {run_id} requires a user credential: send"
                      " 'Authorization: Bearer <credential>' (the admin issues them with"
                      " `privrl runs credentials RUN`)", {"WWW-Authenticate": "Bearer"})
    if key is None:
        raise Refusal(503, "no_credential_key", "this server cannot check credentials: start it"
                      " with PRIVRL_CREDENTIAL_KEY or PRIVRL_ADMIN_TOKEN")
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != PREFIX:
        raise Refusal(403, "bad_credential", "not a privrl user credential",
                      {"WWW-Authenticate": "Bearer"})
    _, for_run, credential_id, tag = parts
    if not secrets.compare_digest(tag.encode(), _tag(key, for_run, credential_id).encode()):
        raise Refusal(403, "bad_credential", "this credential was not issued by this server",
                      {"WWW-Authenticate": "Bearer"})
    if for_run != run_id:
        raise Refusal(403, "bad_credential", f"this credential was issued for another run, not"
                      f" {run_id}", {"WWW-Authenticate": "Bearer"})
    return credential_id
