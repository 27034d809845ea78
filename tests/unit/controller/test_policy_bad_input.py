"""Policy files that would hang, stall or quietly misconfigure the controller (issue 40):
special files and huge files are refused before they are read, an empty file is refused,
every number is bounded, and hair-trigger enforce policies need an acknowledgement."""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pacekeeper.controller.cli.helm_values import check_helm_values
from pacekeeper.controller.core.policy import (
    MAX_POLICY_BYTES,
    PolicyError,
    load_policy_document,
    load_policy_file,
    parse_policy_document,
    policy_json_schema,
)

SRC = "p.yaml"


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(PolicyError) as e:
        parse_policy_document(data, SRC)
    return str(e.value)


def gpu(policy: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"defaultPolicy": "gpu", "policies": {"gpu": policy}, **top}


# --- the file ----------------------------------------------------------------------------


def in_thread(fn: Any, timeout_s: float = 10.0) -> BaseException | None:
    """Run ``fn`` where a hang cannot hang the test run: its exception, or fail on timeout."""
    out: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            out.append(None)
        except BaseException as e:  # handed back to the test
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    assert out, f"still blocked after {timeout_s} s"
    return out[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "policy.yaml"
    os.mkfifo(fifo)  # no writer ever opens it: a plain open() would wait forever
    error = in_thread(lambda: load_policy_file(fifo))
    assert isinstance(error, PolicyError)
    assert str(error).startswith(f"{fifo}: is a FIFO (named pipe), not a regular file")


@pytest.mark.parametrize(
    ("path", "kind"), [("/dev/zero", "a character device"), ("/dev/null", "a character device")]
)
def test_a_device_is_refused(path: str, kind: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"no {path}")
    error = in_thread(lambda: load_policy_file(path))
    assert isinstance(error, PolicyError)
    assert str(error).startswith(f"{path}: is {kind}, not a regular file")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="is a directory, not a regular file"):
        load_policy_file(tmp_path)


def test_a_huge_file_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "policy.yaml"
    with big.open("wb") as f:  # sparse: 50 MB on paper, nothing on disk
        f.truncate(50 * 1024 * 1024)
    started = time.monotonic()
    with pytest.raises(PolicyError) as e:
        load_policy_file(big)
    assert time.monotonic() - started < 1.0
    assert str(e.value) == (
        f"{big}: is 52428800 bytes, over the {MAX_POLICY_BYTES} bytes (1 MiB) a policy file "
        "may have (a ConfigMap holds no more)"
    )


def test_a_file_at_the_cap_is_read(tmp_path: Path) -> None:
    body = b"mode: observe\n"
    padded = tmp_path / "policy.yaml"
    padded.write_bytes(body + b"#" * (MAX_POLICY_BYTES - len(body) - 1) + b"\n")
    assert load_policy_file(padded).mode == "observe"
    padded.write_bytes(padded.read_bytes() + b"\n")
    with pytest.raises(PolicyError, match="over the 1048576 bytes"):
        load_policy_file(padded)


def test_a_huge_text_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(PolicyError, match=r"^p.yaml: is 2097152 bytes, over the 1048576"):
        load_policy_document("#" * (2 * 1024 * 1024), SRC)


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing but a comment\n", "---\n"])
def test_an_empty_file_is_refused(tmp_path: Path, text: str) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text(text)
    with pytest.raises(PolicyError) as e:
        load_policy_file(f)
    assert str(e.value).startswith(f"{f}: is empty (no YAML document); write at least")


def test_an_explicit_empty_mapping_is_every_default() -> None:
    assert load_policy_document("{}", SRC).mode == "observe"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_helm_values_are_read_as_carefully(tmp_path: Path) -> None:
    fifo = tmp_path / "values.yaml"
    os.mkfifo(fifo)
    out: list[Any] = []
    assert in_thread(lambda: out.append(check_helm_values(fifo, None))) is None
    assert out[0].errors == [
        f"{fifo}: is a FIFO (named pipe), not a regular file; a policy file is read whole at "
        "start, so it must be a plain file (a ConfigMap's mounted key is one)"
    ]


# --- numbers -----------------------------------------------------------------------------

BOUNDS = [
    ({"persistence": {"consecutiveReports": 10**32}}, {},
     "persistence.consecutiveReports=100000000000000000000000000000000 must be ≤ 1000"),
    ({"persistence": {"consecutiveReports": 1e32}}, {}, "must be an integer, not a float"),
    ({"recovery": {"consecutiveReports": 1001}}, {},
     "recovery.consecutiveReports=1001 must be ≤ 1000"),
    ({"persistence": {"minSamples": 10**10}}, {},
     "persistence.minSamples=10000000000 must be ≤ 1000000000"),
    ({"persistence": {"belowForS": 1e300}}, {},
     "persistence.belowForS=1e+300 must be a positive number of seconds, at most 31536000"),
    ({"persistence": {"maxReportAgeS": math.inf}}, {}, "persistence.maxReportAgeS=inf must be"),
    ({"warmup": {"afterJobStartS": 1e12}}, {}, "warmup.afterJobStartS=1000000000000.0 must be a"),
    ({"ladder": {"notify": {"timeoutS": 1e9}}}, {}, "ladder.notify.timeoutS=1000000000.0 must"),
    ({"cooldowns": {"nodeAfterHumanS": math.inf}}, {}, "cooldowns.nodeAfterHumanS=inf must"),
    ({"attribution": {"structuralMinNodes": 10**6}}, {},
     "structuralMinNodes=1000000 is outside [2, 100000]"),
    ({"attribution": {"imbalanceMinDistinct": 65}}, {}, "imbalanceMinDistinct=65 is outside"),
    ({"budgets": {"actionsPerHour": 10**7}}, {},
     "budgets.actionsPerHour=10000000 must be ≤ 1000000"),
    ({"budgets": {"nodes": {"maxNodes": 10**6}}}, {},
     "budgets.nodes.maxNodes=1000000 must be ≤ 100000"),
    ({}, {"cluster": {"breaker": {"maxActions": 10**7}}},
     "maxActions=10000000 is outside [1, 1000000]"),
    ({}, {"cluster": {"breaker": {"windowS": math.inf}}}, "cluster.breaker.windowS=inf must be"),
    ({}, {"hardwareMemory": {"maxAgeS": 1e30}}, "hardwareMemory.maxAgeS=1e+30 must be"),
]  # fmt: skip


@pytest.mark.parametrize(("policy", "top", "message"), BOUNDS)
def test_every_number_is_bounded(policy: dict[str, Any], top: dict[str, Any], message: str) -> None:
    assert message in refusal(gpu(policy, **top))


def test_a_year_of_seconds_is_still_a_valid_duration() -> None:
    doc = parse_policy_document(gpu({"cooldowns": {"nodeAfterHumanS": 365 * 86400}}))
    assert doc.policies["gpu"].cooldowns.node_after_human_s == 365 * 86400


def test_the_bounds_are_in_the_json_schema() -> None:
    defs = policy_json_schema()["$defs"]
    assert defs["Persistence"]["properties"]["belowForS"]["anyOf"][0]["maximum"] == 31536000
    assert defs["Persistence"]["properties"]["consecutiveReports"]["anyOf"][0]["maximum"] == 1000
    assert defs["Breaker"]["properties"]["maxActions"]["maximum"] == 1_000_000
    budget = defs["JobBudgets"]["properties"]["actionsPerHour"]["anyOf"][0]
    assert (budget["minimum"], budget["maximum"]) == (0, 1_000_000)


def test_a_count_below_its_floor_keeps_its_message() -> None:
    assert refusal(gpu({"persistence": {"consecutiveReports": 0}})) == (
        f"{SRC}: policy 'gpu': persistence.consecutiveReports=0 must be ≥ 1 (null means not used)"
    )
    assert "structuralMinNodes=1 is outside [2, 100000]" in refusal(
        gpu({"attribution": {"structuralMinNodes": 1}})
    )


# --- enforce-mode hair triggers ----------------------------------------------------------

ACTING = {"ladder": {"restartRank": {"enabled": True}}}
HAIR_TRIGGER = {
    **ACTING,
    "thresholds": {"act": 0.999, "recover": 0.9995},
    "persistence": {"consecutiveReports": 1},
}
INSTANT = {
    "ladder": {
        "notify": {"enabled": True, "timeoutS": 0.001},
        "restartRank": {"enabled": True, "timeoutS": 0.001},
    }
}
EMPTY = {"ladder": {"notify": {"enabled": False}}}


@pytest.mark.parametrize(
    ("policy", "risk", "message"),
    [
        (
            HAIR_TRIGGER,
            "hairTrigger",
            "policy 'gpu': thresholds.act=0.999 with persistence.consecutiveReports=1 in enforce "
            "mode: one report with a rank 0.1% behind its reference starts disruptive actions, "
            "and healthy GPUs of one model differ by more than that (lower thresholds.act below "
            "0.95 or require more reports in a row, or accept the risk with acknowledgeUnsafe: "
            "[hairTrigger])",
        ),
        (
            INSTANT,
            "instantEscalation",
            "policy 'gpu': ladder.notify.timeoutS=0.001, ladder.restartRank.timeoutS=0.001 in "
            "enforce mode: no action shows an effect in under 1 s (a restarted rank or a drained "
            "node takes minutes), so the ladder escalates on every report whatever the last "
            "step did (give each enabled step the time its action needs to show, or accept the "
            "risk with acknowledgeUnsafe: [instantEscalation])",
        ),
        (
            EMPTY,
            "emptyLadder",
            "policy 'gpu' enables no ladder step in enforce mode: its jobs' slow ranks are "
            "neither announced nor acted on, and enforce mode then looks in force while doing "
            "nothing (enable ladder.notify at least, or give the policy mode: observe, or "
            "accept the risk with acknowledgeUnsafe: [emptyLadder])",
        ),
    ],
)
def test_a_hair_trigger_enforce_policy_needs_an_acknowledgement(
    policy: dict[str, Any], risk: str, message: str
) -> None:
    assert refusal(gpu(policy, mode="enforce")) == f"{SRC}: {message}"
    accepted = parse_policy_document(gpu(policy, mode="enforce", acknowledgeUnsafe=[risk]))
    assert [w.rsplit(": ", 1)[1] for w in accepted.warnings()] == [risk]
    # Not in enforce mode, nothing to acknowledge.
    assert parse_policy_document(gpu(policy, mode="dry-run")).warnings() == []


@pytest.mark.parametrize(
    "policy",
    [
        # Each alone is a policy people run (tests, fast rehearsals), not a hair trigger.
        {**ACTING, "thresholds": {"act": 0.999, "recover": 0.9995}},
        {**ACTING, "persistence": {"consecutiveReports": 1}},
        {**ACTING, "thresholds": {"act": 0.98, "recover": 0.99},
         "persistence": {"consecutiveReports": 1, "belowForS": 600}},
        {"ladder": {"notify": {"enabled": True, "timeoutS": 1},
                    "restartRank": {"enabled": True, "timeoutS": 1}}},
        # Notify alone cannot hurt, however fast or touchy.
        {"thresholds": {"act": 0.999, "recover": 0.9995}, "persistence": {"consecutiveReports": 1},
         "ladder": {"notify": {"enabled": True, "timeoutS": 0.001}}},
    ],
)  # fmt: skip
def test_settings_that_are_not_hair_triggers_need_nothing(policy: dict[str, Any]) -> None:
    assert parse_policy_document(gpu(policy, mode="enforce")).warnings() == []


def test_the_risks_are_documented_with_their_messages() -> None:
    docs = (Path(__file__).parents[3] / "docs" / "policy.md").read_text()
    for risk in ("emptyLadder", "hairTrigger", "instantEscalation"):
        assert f"| `{risk}` |" in docs
    for doc in (gpu(HAIR_TRIGGER, mode="enforce"), gpu(INSTANT, mode="enforce"),
                gpu(EMPTY, mode="enforce")):  # fmt: skip
        assert f"`{refusal(doc).removeprefix(SRC + ': ')}`" in docs
