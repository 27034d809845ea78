"""Server processes of a test cluster: free loopback ports, start, bounded waits, stop by PID.

Separate from cluster.py because none of it knows Kubernetes: it is how a test suite owns
a child process (log to a file, fail with that log's tail, never wait unbounded, stop only
the PID it started).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

_POLL_S = 0.1
_LOG_TAIL_CHARS = 4000
_STOP_GRACE_S = 10.0
_SETPRIV = shutil.which("setpriv")


def _dying_with_parent(argv: Sequence[str]) -> list[str]:
    """`argv` run so that the kernel kills it if pytest dies outright (SIGKILL, os._exit).

    util-linux's setpriv sets the parent-death signal and execs; a preexec_fn doing the
    same would be unsafe in a process with threads. SIGKILL, not SIGTERM: kube-apiserver
    waits on its graceful shutdown forever once etcd is gone too.
    """
    if _SETPRIV is None:
        return list(argv)
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv]


def free_loopback_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 now.

    All sockets stay open until every port is picked, so the ports differ; another
    process may still take one before the server binds it (the start fails, loudly).
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class ProcessExited(RuntimeError):
    """A server process ended while something waited on it."""


class ServerProcess:
    """One child process whose stdout and stderr go to `log_path`."""

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str]
    ) -> None:
        self.name = name
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        try:
            # Its own session: a Ctrl-C in the terminal reaches pytest, which then stops
            # the servers in order, rather than every process at once.
            self._popen = subprocess.Popen(
                _dying_with_parent(argv),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=dict(env),
                start_new_session=True,
            )
        except BaseException:
            self._log.close()
            raise

    @property
    def pid(self) -> int:
        return self._popen.pid

    def running(self) -> bool:
        return self._popen.poll() is None

    def log_tail(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as error:
            return f"<log unreadable: {error}>"
        return text[-_LOG_TAIL_CHARS:]

    def check_running(self) -> None:
        code = self._popen.poll()
        if code is not None:
            raise ProcessExited(
                f"{self.name} exited with code {code}; last log lines:\n{self.log_tail()}"
            )

    def kill(self, timeout_s: float = _STOP_GRACE_S) -> int:
        """SIGKILL this PID (no goodbye: what a crash or an OOM kill leaves) and reap it;
        its exit code. The log stays open for a `stop` to close."""
        if self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._popen.pid, signal.SIGKILL)
        return self._popen.wait(timeout=timeout_s)

    def stop(self, grace_s: float = _STOP_GRACE_S) -> None:
        """SIGTERM this PID, SIGKILL it after `grace_s`, and reap it."""
        if self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._popen.pid, signal.SIGTERM)
            try:
                self._popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._popen.pid, signal.SIGKILL)
                self._popen.wait(timeout=grace_s)
        self._log.close()


def wait_until(
    probe: Callable[[], bool],
    *,
    timeout_s: float,
    what: str,
    watched: Sequence[ServerProcess] = (),
) -> None:
    """Poll `probe` until it is true; fail after `timeout_s` or when a watched process ends.

    A probe that raises counts as "not yet": servers refuse connections while starting.
    """
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while True:
        for process in watched:
            process.check_running()
        try:
            if probe():
                return
        except Exception as error:
            last_error = error
        if time.monotonic() >= deadline:
            logs = "".join(
                f"\n--- {process.name} log tail ---\n{process.log_tail()}" for process in watched
            )
            raise TimeoutError(
                f"{what}: not true after {timeout_s:.0f} s (last error: {last_error!r}){logs}"
            )
        time.sleep(_POLL_S)
