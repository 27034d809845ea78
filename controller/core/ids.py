"""The identifiers every core module shares: one module below all of them, so that
observations and decisions can both name a job or a node without importing each other."""

from __future__ import annotations

from typing import NewType

JobKey = NewType("JobKey", str)
"""``namespace/name`` on Kubernetes, ``ray:<job id>`` on Ray."""
NodeName = NewType("NodeName", str)
Rank = NewType("Rank", int)
