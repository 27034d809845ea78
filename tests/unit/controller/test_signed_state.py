"""The Ray-side controller's sealed state: what verifies, what is tampered, the key file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from pacekeeper.controller.sources.signed_state import (
    StateTampered,
    default_key_path,
    load_key,
    open_sealed,
    seal,
)

KEY = bytes(range(32))
STATE = {"jobs": {"ray:01000000": {"firstSeenAt": "2026-11-30T12:00:00+00:00"}}, "cluster": {}}


def test_a_sealed_state_opens_to_the_same_state_and_generation() -> None:
    opened = open_sealed(seal(STATE, key=KEY, kv_key="controller/state", generation=7),
                         key=KEY, kv_key="controller/state")  # fmt: skip
    assert opened.state == STATE and opened.generation == 7 and opened.signed


def _edit(text: str, **changes: object) -> str:
    doc = json.loads(text)
    doc.update(changes)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda t: _edit(t, body=json.loads(t)["body"].replace("2026", "2025")), "does not verify"),
        (lambda t: _edit(t, generation=99), "does not verify"),
        (lambda t: _edit(t, keyId="0" * 16), "signed with key"),
        (lambda t: _edit(t, mac=None), "lacks body, mac"),
        (lambda t: _edit(t, format="other/v9"), "unknown state envelope"),
        (lambda t: "[1, 2]", "not an object"),
        (lambda t: "{not json", "not JSON"),
    ],
    ids=["body", "generation", "key-id", "no-mac", "format", "array", "garbage"],
)
def test_any_change_to_a_sealed_state_is_tampering(tamper: object, message: str) -> None:
    text = seal(STATE, key=KEY, kv_key="controller/state", generation=3)
    assert callable(tamper)
    with pytest.raises(StateTampered, match=message):
        open_sealed(tamper(text), key=KEY, kv_key="controller/state")


def test_a_state_sealed_under_another_key_name_does_not_verify() -> None:
    text = seal(STATE, key=KEY, kv_key="test/state/x", generation=1)
    with pytest.raises(StateTampered, match="does not verify"):
        open_sealed(text, key=KEY, kv_key="controller/state")


def test_another_key_cannot_forge_a_state() -> None:
    forged = seal(STATE, key=b"\xff" * 32, kv_key="controller/state", generation=1)
    with pytest.raises(StateTampered, match="signed with key"):
        open_sealed(forged, key=KEY, kv_key="controller/state")


def test_a_state_without_envelope_opens_as_unsigned_for_the_caller_to_judge() -> None:
    opened = open_sealed(json.dumps(STATE), key=KEY, kv_key="controller/state")
    assert not opened.signed and opened.generation == 0 and opened.state == STATE


def test_the_key_file_is_created_private_once_and_then_read_back(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "state.key"
    key, created = load_key(path)
    assert created and len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(path) == (key, False)


def test_a_bad_key_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "state.key"
    path.write_text("abcd\n")
    with pytest.raises(ValueError, match=r"state\.key: 2 bytes, need 32"):
        load_key(path)
    path.write_text("not hex\n")
    with pytest.raises(ValueError, match="not hex"):
        load_key(path)


def test_the_key_file_path_comes_from_the_environment() -> None:
    assert default_key_path({"PACEKEEPER_STATE_KEY_FILE": "/run/secrets/k"}) == Path(
        "/run/secrets/k"
    )
    assert default_key_path({"XDG_CONFIG_HOME": "/cfg"}) == Path(
        "/cfg/pacekeeper/ray-controller-state.key"
    )
