"""Where the Ray-side runner keeps its ``State``: one signed value in the GCS key-value store.

Apart from the runner because it is the part that must not trust its own storage: any
driver can write the GCS store, so every value is sealed (``signed_state.py``) and
checked on every load. ``load`` raises ``StateTampered`` instead of guessing; it never
writes over what it refused, so the evidence stays for a human to read.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pacekeeper.controller.core.state import State
from pacekeeper.controller.sources.signed_state import (
    StateTampered,
    default_key_path,
    load_key,
    open_sealed,
    seal,
)

logger = logging.getLogger(__name__)

STATE_KEY = "controller/state"
KV_NAMESPACE = "pacekeeper"


class KvStateStore:
    """The runner's ``State`` under ``key`` (namespace ``pacekeeper``), sealed with
    ``signing_key``. ``accept_unsigned`` lets one unsigned value (written by a
    pacekeeper before signing) in, once, and seals it at once: pass it only when the key
    is new, which is what ``from_key_file`` does."""

    def __init__(
        self, key: str = STATE_KEY, *, signing_key: bytes, accept_unsigned: bool = False
    ) -> None:
        if len(signing_key) < 16:
            raise ValueError("KvStateStore signing_key must be at least 16 bytes")
        self.key = key
        self._signing_key = signing_key
        self._accept_unsigned = accept_unsigned
        self._generation = 0
        """The newest generation this store loaded or wrote: a lower one is a replay."""

    @classmethod
    def from_key_file(cls, path: Path | None = None, key: str = STATE_KEY) -> KvStateStore:
        """The store with the key in ``path`` (default: ``signed_state.default_key_path``),
        created when absent; only a key created now accepts a pre-signing state."""
        signing_key, created = load_key(path or default_key_path())
        return cls(key, signing_key=signing_key, accept_unsigned=created)

    def load(self) -> State:
        from ray.experimental import internal_kv

        raw = internal_kv._internal_kv_get(self.key, namespace=KV_NAMESPACE)
        if raw is None:
            if self._generation > 0:
                raise StateTampered(f"the stored state (generation {self._generation}) disappeared")
            return State()
        opened = open_sealed(raw, key=self._signing_key, kv_key=self.key)
        if not opened.signed:
            if not self._accept_unsigned:
                raise StateTampered(
                    "the stored state is not signed (only a controller starting with a new "
                    "key accepts one unsigned state, once)"
                )
            self._accept_unsigned = False
            state = self._parse(opened.state)
            logger.warning("unsigned controller state accepted once and signed", extra={
                "key": self.key})  # fmt: skip
            self.save(state)
            return state
        if opened.generation < self._generation:
            raise StateTampered(
                f"the stored state went back from generation {self._generation} to "
                f"{opened.generation} (an old signed state written again)"
            )
        self._generation = opened.generation
        self._accept_unsigned = False
        return self._parse(opened.state)

    @staticmethod
    def _parse(data: dict[str, object]) -> State:
        try:
            return State.from_dict(data)
        except (ValueError, TypeError, KeyError) as e:
            raise StateTampered(f"the stored state does not parse: {e}") from e

    def save(self, state: State) -> None:
        from ray.experimental import internal_kv

        generation = self._generation + 1
        text = seal(state.to_dict(), key=self._signing_key, kv_key=self.key, generation=generation)
        internal_kv._internal_kv_put(self.key, text, overwrite=True, namespace=KV_NAMESPACE)
        self._generation = generation
        self._accept_unsigned = False


def stored_text(key: str = STATE_KEY) -> str | None:
    """The raw stored value (for humans and tests: what a refused state looks like)."""
    from ray.experimental import internal_kv

    raw = internal_kv._internal_kv_get(key, namespace=KV_NAMESPACE)
    return None if raw is None else bytes(raw).decode(errors="replace")
