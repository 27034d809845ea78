"""The Ray-side controller's state, signed with a key only the controller holds.

The runner keeps its ``State`` (budgets used, ladders, marks, breaker) in the GCS
key-value store, which every driver of the cluster can read and write: Ray has no access
control on it. So the value is an envelope with an HMAC-SHA256 over the state's text, a
generation number and the KV key it is stored under. A value that does not verify,
whose generation went back (an old signed value written again), or that vanished while
the runner was running, is tampered: the runner acts on nothing and leaves it in place as
evidence (``KvStateStore`` in ``ray_scoreboard.py``).

HMAC with a local key, not a signature or an external store: the key never leaves the
controller's machine, nothing else needs to verify the state, and no service is added.
The key is 32 random bytes (hex) in a file (``PACEKEEPER_STATE_KEY_FILE``, default
``$XDG_CONFIG_HOME/pacekeeper/ray-controller-state.key``), created with mode 0600 on the
first start. Reading it is the only file access here; the rest is pure.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENVELOPE_FORMAT = "pacekeeper.dev/signed-state/v1"
KEY_BYTES = 32
KEY_FILE_ENV = "PACEKEEPER_STATE_KEY_FILE"


class StateTampered(Exception):
    """The stored state is not one this controller wrote; the message says how."""


@dataclass(frozen=True, slots=True)
class Opened:
    state: dict[str, Any]
    generation: int
    """0 for an unsigned (pre-signing) value."""
    signed: bool


def _mac(key: bytes, kv_key: str, generation: int, body: str) -> str:
    message = f"{ENVELOPE_FORMAT}\n{kv_key}\n{generation}\n{body}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def key_id(key: bytes) -> str:
    """Names the key in the envelope (a hash prefix, not the key): a value signed under
    another key says so instead of just failing to verify."""
    return hashlib.sha256(b"pacekeeper-state-key\n" + key).hexdigest()[:16]


def seal(state: dict[str, Any], *, key: bytes, kv_key: str, generation: int) -> str:
    """The envelope's JSON text."""
    body = json.dumps(state, separators=(",", ":"), sort_keys=True)
    return json.dumps(
        {
            "format": ENVELOPE_FORMAT,
            "keyId": key_id(key),
            "generation": generation,
            "mac": _mac(key, kv_key, generation, body),
            "body": body,
        },
        separators=(",", ":"),
    )


def open_sealed(raw: bytes | str, *, key: bytes, kv_key: str) -> Opened:
    """The state inside a stored value. An object without ``format`` is a state written
    before signing existed (``signed=False``: the caller decides whether to accept it).
    Raises ``StateTampered`` for anything that does not verify."""
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise StateTampered(f"the stored state is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise StateTampered(f"the stored state is a JSON {type(doc).__name__}, not an object")
    if "format" not in doc:
        return Opened(doc, 0, signed=False)
    if doc["format"] != ENVELOPE_FORMAT:
        raise StateTampered(f"unknown state envelope {str(doc['format'])[:80]!r}")
    body, mac, generation = doc.get("body"), doc.get("mac"), doc.get("generation")
    if not isinstance(body, str) or not isinstance(mac, str) or type(generation) is not int:
        raise StateTampered("the state envelope lacks body, mac or generation")
    if doc.get("keyId") != key_id(key):
        raise StateTampered(
            f"the state is signed with key {str(doc.get('keyId'))[:20]!r}, "
            f"this controller holds {key_id(key)!r}"
        )
    if not hmac.compare_digest(mac, _mac(key, kv_key, generation, body)):
        raise StateTampered("the state's signature does not verify: it was changed")
    state = json.loads(body)
    if not isinstance(state, dict):
        raise StateTampered("the signed state is not an object")
    return Opened(state, generation, signed=True)


def default_key_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get(KEY_FILE_ENV):
        return Path(env[KEY_FILE_ENV])
    base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "pacekeeper" / "ray-controller-state.key"


def load_key(path: Path) -> tuple[bytes, bool]:
    """(key, created): the key in ``path``, made (0600, never overwritten) when absent."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = secrets.token_bytes(KEY_BYTES)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another runner made it first: use theirs
            return load_key(path)
        with os.fdopen(fd, "w") as f:
            f.write(key.hex() + "\n")
        return key, True
    try:
        key = bytes.fromhex(text)
    except ValueError as e:
        raise ValueError(f"state key file {path}: not hex ({e})") from e
    if len(key) < KEY_BYTES:
        raise ValueError(f"state key file {path}: {len(key)} bytes, need {KEY_BYTES}")
    return key, False
