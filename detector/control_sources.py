"""Where the reporting rank reads runtime control from, without waiting on it at a report.

A ``ControlSource`` answers ``latest()`` at once: the newest ``Control`` it knows, or
None when there is no document (the run then follows ``initialize``'s values). The
transports' reads (a Kubernetes GET, a Ray actor call) run on a ``ControlWatcher``
thread every ``PACEKEEPER_CONTROL_POLL_S`` seconds, so a slow API server costs the
training loop nothing; a failed read keeps the last good answer. A document that does
not check (``Control.from_wire``) is refused whole, logged once per message, and the
last good one stays in force. ``FileControl`` reads a JSON file (bare-metal and Slurm
jobs, tests); ``StaticControl`` is set from code.

Which runs get control at all is ``control_mode``: every rank must come to the same
answer, because the answer adds one broadcast to every report (``control_cycle``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from . import env
from .control import Control

logger = logging.getLogger(__name__)

AUTO = "auto"
OFF = ("none", "off", "false", "0")
FILE_PREFIX = "file:"


@runtime_checkable
class ControlSource(Protocol):
    def latest(self) -> Control | None:
        """The newest control document known (None: none); never blocks on I/O."""
        ...


class _Newest:
    """The last good document, and the refusal of bad ones (logged once per message)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._control: Control | None = None
        self._refused: set[str] = set()

    def offer(self, raw: Any) -> None:
        try:
            control = None if raw is None else Control.from_wire(raw)
        except ValueError as e:
            if str(e) not in self._refused and len(self._refused) < 64:
                self._refused.add(str(e))
                logger.warning(
                    "runtime control refused; the last good one stays in force",
                    extra={"source": self.name, "error": str(e)},
                )
            return
        with self._lock:
            self._control = control

    def latest(self) -> Control | None:
        with self._lock:
            return self._control


class StaticControl(_Newest):
    """A source set from code: ``set(Control(...))``, a wire mapping, or None."""

    def __init__(self, control: Control | Mapping[str, Any] | None = None) -> None:
        super().__init__("static")
        self.set(control)

    def set(self, control: Control | Mapping[str, Any] | None) -> None:
        """Raises ValueError for a mapping that does not check (code, not a document)."""
        if isinstance(control, Control) or control is None:
            with self._lock:
                self._control = control
            return
        parsed = Control.from_wire(control)
        with self._lock:
            self._control = parsed


class FileControl(_Newest):
    """``latest()`` reads the JSON file ``path`` when it changed (size or mtime); a file
    that is missing means no document, one that is half-written or bad keeps the last."""

    def __init__(self, path: str) -> None:
        super().__init__(f"file:{path}")
        self.path = path
        self._stamp: tuple[int, int] | None = None

    def latest(self) -> Control | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._stamp is not None:
                self._stamp = None
                self.offer(None)
            return super().latest()
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            try:
                with open(self.path, encoding="utf-8") as f:
                    text = f.read()
                raw = json.loads(text) if text.strip() else None
            except (OSError, ValueError) as e:
                logger.debug(
                    "runtime control file unreadable", extra={"path": self.path, "error": e}
                )
            else:
                self._stamp = stamp
                self.offer(raw)
        return super().latest()


class ControlWatcher(_Newest):
    """Calls ``read()`` (the wire form, or None) every ``poll_s`` seconds on a daemon
    thread; ``latest()`` is what the last successful read returned."""

    def __init__(self, read: Callable[[], Any], *, poll_s: float, name: str) -> None:
        super().__init__(name)
        self._read = read
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._failed: set[str] = set()
        self._thread = threading.Thread(
            target=self._run, name=f"pacekeeper-control-{name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                raw = self._read()
            except Exception as e:
                cause = type(e).__name__
                if cause not in self._failed:
                    self._failed.add(cause)
                    logger.warning(
                        "runtime control read failed; the last good one stays in force",
                        extra={"source": self.name, "error": repr(e)},
                    )
            else:
                self.offer(raw)
            self._stop.wait(self._poll_s)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)


def control_mode(control: Any, reporter: Any, environ: Mapping[str, str] | None = None) -> bool:
    """Will this run exchange control at each report? The same on every rank: it reads
    only ``initialize``'s arguments and the job's environment. ``control=None`` means
    ``$PACEKEEPER_CONTROL``, else ``auto``: on when a reporter is configured."""
    spec = env.control_spec(environ) if control is None else control
    if isinstance(spec, bool):
        return spec
    if spec is None:
        spec = AUTO
    if isinstance(spec, str):
        word = spec.strip().lower()
        if word in OFF:
            return False
        if word == AUTO:
            kind = reporter if reporter is not None else env.reporter_kind(environ)
            if isinstance(kind, str):
                return kind.strip().lower() not in OFF
            return kind is not None
        if spec.startswith(FILE_PREFIX) and spec[len(FILE_PREFIX) :]:
            return True
        raise ValueError(f"control={spec!r}: use 'auto', 'none', 'file:PATH' or a ControlSource")
    if isinstance(spec, ControlSource):
        return True
    raise ValueError(
        f"control={spec!r}: use 'auto', 'none', 'file:PATH' or an object with latest()"
    )


def make_source(
    control: Any, publisher: Any, environ: Mapping[str, str] | None = None
) -> ControlSource | None:
    """The reporting rank's source (None: nobody to read from; the run follows
    ``initialize``'s values). ``auto`` reads through the publisher's transport when it
    can (Kubernetes ``spec.control``, the ScoreBoard's ``control(job)``)."""
    spec = env.control_spec(environ) if control is None else control
    if isinstance(spec, ControlSource):
        return spec
    if isinstance(spec, str) and spec.startswith(FILE_PREFIX):
        return FileControl(spec[len(FILE_PREFIX) :])
    sink = getattr(publisher, "sink", None)
    read = getattr(sink, "read_control", None)
    if read is None:
        return None
    name = str(getattr(sink, "name", "reporter"))
    return ControlWatcher(read, poll_s=env.control_poll_s(environ), name=name)


def close_source(source: ControlSource | None) -> None:
    close = getattr(source, "close", None)
    if close is not None:
        try:
            close()
        except Exception:
            logger.debug("control source close failed", exc_info=True)
