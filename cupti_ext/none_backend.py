"""The backend for CPU-only jobs: measures nothing, so GPU scores are absent, not NaN."""

from __future__ import annotations

from .backend import KernelWindow


class NoneBackend:
    name = "none"

    def start(self, section: str) -> None:
        pass

    def stop(self, section: str) -> None:
        pass

    def collect(self) -> KernelWindow:
        return KernelWindow()

    def shutdown(self) -> None:
        pass
