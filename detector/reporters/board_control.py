"""Runtime control on the ScoreBoard: who may write a job's control, and where it is kept.

Ray does not tell an actor who calls it, and every driver can call the board, so a
control write must prove it comes from the operator: it carries a *control key*, a
secret whose SHA-256 the board was created with (``get_scoreboard(control_key=...)``,
normally by the Ray-side controller, before any job runs). The board keeps only the
digest, so the key is not among its creation arguments either. A board created without
one (by a reporter, say) refuses every control write. Reads (``control(job)``) are open:
a control document says how a job is measured, nothing secret.

Controls are kept per job (bounded like the jobs of the history) and written through to
the GCS store under their own prefix, signed like the history (``board_store``), so a
board that Ray restarts still hands out the controls it was given.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections import OrderedDict
from typing import Any

from ..control import Control
from .board_store import BoardStore, _Kv
from .publish_tokens import PublishRefused

logger = logging.getLogger(__name__)


def control_key_digest(key: str) -> str:
    """What a board is created with for ``key`` (hex SHA-256)."""
    return hashlib.sha256(key.encode()).hexdigest()


class ControlTable:
    """Each job's control document (wire form), bounded; optionally persisted."""

    def __init__(
        self,
        *,
        key_digest: str | None,
        max_jobs: int,
        store: BoardStore | None = None,
    ) -> None:
        self._digest = key_digest
        self._max_jobs = max_jobs
        self._store = store
        self._controls: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.refused = 0

    def set(self, job: str, control: Any, key: Any) -> dict[str, Any]:
        """Store ``control`` (wire form, or None to remove it) for ``job``. Raises
        ``PublishRefused`` without the board's control key, ValueError for a bad document."""
        if self._digest is None:
            self.refused += 1
            raise PublishRefused(
                "this ScoreBoard accepts no control writes: it was created without a "
                "control key (get_scoreboard(control_key=...), docs/security.md)"
            )
        given = control_key_digest(key) if isinstance(key, str) else ""
        if not hmac.compare_digest(given, self._digest):
            self.refused += 1
            raise PublishRefused(f"control write for {job!r} refused: wrong control key")
        if control is None:
            self._controls.pop(job, None)
            self._persist(job, None)
            return {"job": job, "control": None}
        wire = Control.from_wire(control).to_wire()
        self._controls[job] = wire
        self._controls.move_to_end(job)
        while len(self._controls) > self._max_jobs:
            gone, _ = self._controls.popitem(last=False)
            self._persist(gone, None)
        self._persist(job, wire)
        logger.info("runtime control set", extra={"job": job, "control": wire})
        return {"job": job, "control": wire}

    def get(self, job: str) -> dict[str, Any] | None:
        wire = self._controls.get(job)
        return None if wire is None else dict(wire)

    def _persist(self, job: str, wire: dict[str, Any] | None) -> None:
        if self._store is None:
            return
        kv_key = self._store.job_prefix(job) + "control"
        if wire is None:
            _Kv().del_(kv_key)
        else:
            self._store._put(_Kv(), kv_key, json.dumps(wire))

    def restore(self) -> int:
        """Reload what this board signed (after Ray restarted it); drops the rest."""
        if self._store is None:
            return 0
        kv = _Kv()
        prefix = self._store.prefix
        restored = 0
        for raw_key in kv.list(prefix):
            kv_key = raw_key.decode(errors="replace")
            job, _, rest = kv_key[len(prefix) :].partition("\x00")
            raw = kv.get(kv_key)
            text = None if raw is None or rest != "control" else self._store._open(kv_key, raw)
            try:
                if text is None:
                    raise ValueError("not signed by this board")
                self._controls[job] = Control.from_wire(json.loads(text)).to_wire()
                restored += 1
            except ValueError as e:
                kv.del_(kv_key)
                logger.warning(
                    "scoreboard dropped stored control", extra={"key": kv_key, "error": str(e)}
                )
        return restored
