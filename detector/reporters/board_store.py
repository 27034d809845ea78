"""The ScoreBoard's history in the GCS key-value store, signed so the board restores only
what it wrote itself.

Every accepted report is written through (one key per stored report plus one ``meta`` key
per job, namespace ``pacekeeper``), so a board that restarts reloads its history. Any
driver of the cluster can write that store too, so an unsigned history would let a job
plant reports for another job and have them restored. Each value is therefore stored
with an HMAC-SHA256 over its key and its text, under a key (``store_key``) that whoever
creates the board passes as a creation argument: Ray re-runs ``__init__`` with the same
arguments when it restarts the actor, and its public API does not show them. A value
that does not verify (written by someone else, by an older board, or under another key)
is skipped, counted, logged and deleted; it is never restored. So a board that Ray
restarts (same arguments) reloads its history, while one killed for good and created
anew (a new key) starts empty.

Ray is imported inside functions: ``pacekeeper.detector`` must import without it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from .scoreboard import Entry

logger = logging.getLogger(__name__)

KV_NAMESPACE = "pacekeeper"


class _Kv:
    """The GCS key-value store under pacekeeper's namespace."""

    def __init__(self) -> None:
        from ray.experimental import internal_kv

        self._kv = internal_kv

    def put(self, key: str, value: str) -> None:
        self._kv._internal_kv_put(key, value, overwrite=True, namespace=KV_NAMESPACE)

    def get(self, key: str) -> bytes | None:
        return self._kv._internal_kv_get(key, namespace=KV_NAMESPACE)

    def list(self, prefix: str) -> list[bytes]:
        return self._kv._internal_kv_list(prefix, namespace=KV_NAMESPACE)

    def del_(self, key: str, *, del_by_prefix: bool = False) -> None:
        self._kv._internal_kv_del(key, del_by_prefix=del_by_prefix, namespace=KV_NAMESPACE)


@dataclass
class Loaded:
    """What ``BoardStore.load`` found: per job, its entries and its meta."""

    entries: dict[str, list[Entry]] = field(default_factory=dict)
    metas: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: int = 0
    """Values skipped: unreadable, unsigned or not signed with this board's key."""


class BoardStore:
    """One board's keys: ``<prefix><job>\\x00entry/<counter>`` and ``<prefix><job>\\x00meta``."""

    def __init__(self, prefix: str, key: bytes) -> None:
        self.prefix = prefix
        self._key = key

    def job_prefix(self, job: str) -> str:
        return f"{self.prefix}{job}\x00"  # NUL ends the key: job keys never contain it

    def _mac(self, kv_key: str, text: str) -> str:
        return hmac.new(self._key, f"{kv_key}\x00{text}".encode(), hashlib.sha256).hexdigest()

    def _put(self, kv: _Kv, kv_key: str, text: str) -> None:
        kv.put(kv_key, json.dumps({"mac": self._mac(kv_key, text), "value": text}))

    def _open(self, kv_key: str, raw: bytes) -> str | None:
        try:
            sealed = json.loads(raw)
            text, mac = sealed["value"], sealed["mac"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(text, str) or not isinstance(mac, str):
            return None
        return text if hmac.compare_digest(mac, self._mac(kv_key, text)) else None

    def write(self, entry: Entry, dropped: tuple[Entry, ...], meta: dict[str, Any]) -> None:
        # One key per entry counter: deleting what the bounds pushed out keeps the store
        # exactly as large as the history in memory.
        prefix = self.job_prefix(entry.job)
        kv = _Kv()
        for gone in dropped:
            kv.del_(f"{prefix}entry/{gone.counter}")
        self._put(kv, f"{prefix}entry/{entry.counter}", entry.to_json())
        self._put(kv, f"{prefix}meta", json.dumps(meta))

    def drop(self, job: str, counter: int) -> None:
        _Kv().del_(f"{self.job_prefix(job)}entry/{counter}")

    def evict(self, job: str) -> None:
        _Kv().del_(self.job_prefix(job), del_by_prefix=True)

    def count(self) -> int:
        return len(_Kv().list(self.prefix))

    def load(self) -> Loaded:
        kv = _Kv()
        out = Loaded()
        for raw_key in kv.list(self.prefix):
            key = raw_key.decode(errors="replace")
            job, _, rest = key[len(self.prefix) :].partition("\x00")
            raw = kv.get(key)
            if raw is None:
                continue
            text = self._open(key, raw)
            try:
                if text is None:
                    raise ValueError("not signed by this board")
                if rest == "meta":
                    out.metas[job] = json.loads(text)
                elif rest.startswith("entry/"):
                    entry = Entry.from_json(text)
                    if entry.job != job:
                        raise ValueError(f"entry of {entry.job!r} under {job!r}")
                    out.entries.setdefault(job, []).append(entry)
            except (ValueError, KeyError, TypeError) as e:
                out.refused += 1
                # Deleted, so the store stays what this board wrote (the log keeps the key).
                kv.del_(key)
                logger.warning(
                    "scoreboard dropped stored value", extra={"key": key, "error": str(e)}
                )
        return out
