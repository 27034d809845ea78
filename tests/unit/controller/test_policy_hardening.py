"""Policy loading, hardened: duplicate keys, encodings, strict types, the clock-skew bound
and the enforce-mode risks that need ``acknowledgeUnsafe`` are each refused with one line
naming the file, the field and the value; every command exits 2 for such a document."""

from __future__ import annotations

import importlib
import inspect
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine_records import IMPURE
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.core.policy import (
    PolicyDocument,
    PolicyError,
    load_policy_document,
    load_policy_file,
    parse_policy_document,
    policy_json_schema,
)
from pacekeeper.controller.core.policy_yaml import read_policy_yaml

SRC = "fuzz.yaml"
DOCS = Path(__file__).parents[3] / "docs" / "policy.md"
RISKS = ("unlimitedBudgets", "fullClusterBudget", "breakerNeverOpens")
DISRUPTIVE = {"restartRank", "taintNode", "drainNode", "cordonNode"}
NODE_STEPS = {"taintNode", "drainNode", "cordonNode"}


def refusal(text: str | bytes, source: str = SRC) -> str:
    with pytest.raises(PolicyError) as e:
        load_policy_document(text, source)
    message = str(e.value)
    assert message.startswith(f"{source}: ") and "\n" not in message, message
    return message


def gpu_doc(policy: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {"defaultPolicy": "gpu", "policies": {"gpu": policy or {}}, **top}


# A YAML key that reads back as the same string (not a boolean, null or number).
keys = st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True).filter(lambda k: yaml.safe_load(k) == k)


# --- duplicate keys ---------------------------------------------------------------------


def test_a_repeated_mode_is_refused_not_silently_enforced() -> None:
    message = refusal("mode: observe\nmode: enforce\n")
    assert message == f"{SRC}: duplicate key 'mode' at line 2 (first at line 1)"


def test_a_repeated_policy_name_is_refused_not_silently_dropped() -> None:
    text = "defaultPolicy: gpu\npolicies:\n  gpu:\n    mode: observe\n  gpu: {}\n"
    message = refusal(text)
    assert message == f"{SRC}: duplicate key 'gpu' in policies at line 5 (first at line 3)"


def test_a_repeated_key_inside_a_list_names_its_path() -> None:
    text = "optOuts:\n  nodeSelectors:\n    - matchLabels: {a: x, b: y, a: z}\n"
    message = refusal(text)
    assert message == (
        f"{SRC}: duplicate key 'a' in optOuts.nodeSelectors[0].matchLabels at line 3 "
        "(first at line 3)"
    )


@pytest.mark.parametrize(("first", "second"), [("1", "1.0"), ("true", "yes"), ("null", "~")])
def test_keys_written_differently_but_equal_are_duplicates(first: str, second: str) -> None:
    message = refusal(f"policies:\n  {first}: {{}}\n  {second}: {{}}\n")
    assert f"duplicate key {second!r} in policies at line 3 (first at line 2)" in message


def test_merge_keys_may_still_be_overridden() -> None:
    text = (
        "defaultPolicy: gpu\n"
        "policies:\n"
        "  base: &base {thresholds: {act: 0.6, recover: 0.8}, mode: observe}\n"
        "  gpu:\n"
        "    <<: *base\n"
        "    mode: dry-run\n"
    )
    doc = load_policy_document(text, SRC)
    assert doc.policies["gpu"].mode is not None and doc.policies["gpu"].mode.value == "dry-run"
    assert doc.policies["gpu"].thresholds.act == 0.6


@settings(max_examples=80, deadline=None)
@given(
    path=st.lists(keys, max_size=4),
    siblings=st.lists(keys, min_size=1, max_size=5, unique=True),
    data=st.data(),
)
def test_a_duplicate_key_at_any_depth_names_file_line_key_and_path(
    path: list[str], siblings: list[str], data: st.DataObject
) -> None:
    dup = siblings[0]
    rest = siblings[1:]
    at = data.draw(st.integers(0, len(rest)), label="second occurrence after this many")
    keys_here = [dup, *rest[:at], dup, *rest[at:]]
    lines = [f"{'  ' * depth}{k}:" for depth, k in enumerate(path)]
    lines += [f"{'  ' * len(path)}{k}: 1" for k in keys_here]
    first, second = len(path) + 1, len(path) + at + 2
    where = f" in {'.'.join(path)}" if path else ""
    message = refusal("\n".join(lines) + "\n")
    assert (
        message == f"{SRC}: duplicate key {dup!r}{where} at line {second} (first at line {first})"
    )


# Strings PyYAML reads as strings but JSON, YAML 1.2 and this reader as floats (``1e3``).
EXPONENT_FLOAT = re.compile(r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+")
# BMP only: PyYAML itself writes astral characters as surrogate pairs it cannot read back.
texts = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"]), max_size=8).filter(
    lambda t: not EXPONENT_FLOAT.fullmatch(t)
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(value=st.dictionaries(texts, json_values, max_size=4))
def test_documents_without_duplicates_read_as_pyyaml_reads_them(value: dict[str, Any]) -> None:
    text = yaml.safe_dump(value)
    assert read_policy_yaml(text, SRC) == yaml.safe_load(text) == value
    assert read_policy_yaml(json.dumps(value), SRC) == value


@pytest.mark.parametrize(
    ("written", "value"), [("1e3", 1000.0), ("1.5e-3", 0.0015), ("1e-05", 1e-05), ("2E+2", 200.0)]
)
def test_exponent_floats_are_numbers_as_in_json_and_helm(written: str, value: float) -> None:
    assert read_policy_yaml(f"holdS: {written}", SRC) == {"holdS": value}
    text = f'{{"policies": {{"default": {{"recovery": {{"holdS": {written}}}}}}}}}'
    assert load_policy_document(text, SRC).policies["default"].recovery.hold_s == value


# --- encodings --------------------------------------------------------------------------

ascii_docs = st.dictionaries(keys, st.integers(0, 9) | keys, min_size=1, max_size=4).map(
    yaml.safe_dump
)


# The byte-order mark each encoding writes (Python's "utf-16"/"utf-32" write one in the
# machine's order; the -le/-be codecs write one only when the text starts with U+FEFF).
MARKS = {
    "utf-16-le": "FF FE",
    "utf-16-be": "FE FF",
    "utf-32-le": "FF FE 00 00",
    "utf-32-be": "00 00 FE FF",
}
NATIVE = "le" if sys.byteorder == "little" else "be"


@settings(max_examples=60, deadline=None)
@given(
    text=ascii_docs,
    encoding=st.sampled_from(list(MARKS)),
    bom=st.sampled_from(["none", "explicit", "native codec"]),
)
def test_utf16_and_utf32_are_refused_in_one_line(text: str, encoding: str, bom: str) -> None:
    family = encoding[:6].upper()
    if bom == "native codec":
        encoding = f"{encoding[:6]}-{NATIVE}"
        body = text.encode(encoding[:6])
    else:
        body = (("\ufeff" if bom == "explicit" else "") + text).encode(encoding)
    message = refusal(body)
    if bom == "none":
        line = body[: body.index(b"\x00")].count(b"\n") + 1
        assert message.startswith(f"{SRC}: not UTF-8 text: NUL byte at line {line} ")
    else:
        assert message == (
            f"{SRC}: is {family} (byte-order mark {MARKS[encoding]}), not UTF-8; save it as UTF-8"
        )


@settings(max_examples=80, deadline=None)
@given(
    before=st.text(alphabet="abc: \n", max_size=20),
    legacy=st.sampled_from("éüßøÆ°±"),
    after=st.text(alphabet="abc: \n", max_size=5),
)
def test_legacy_encodings_are_refused_naming_the_byte_and_line(
    before: str, legacy: str, after: str
) -> None:
    # A Latin-1 byte above 0x7F followed by ASCII (or nothing) is never UTF-8.
    body = (before + legacy + after).encode("latin-1")
    message = refusal(body)
    line = before.count("\n") + 1
    assert message == (
        f"{SRC}: not UTF-8: byte 0x{ord(legacy):02x} at line {line} does not decode "
        "(Latin-1 or another legacy encoding?); save it as UTF-8"
    )


@settings(max_examples=60, deadline=None)
@given(text=ascii_docs)
def test_a_utf8_byte_order_mark_is_accepted(text: str) -> None:
    plain = read_policy_yaml(text.encode(), SRC)
    assert read_policy_yaml(b"\xef\xbb\xbf" + text.encode(), SRC) == plain
    assert read_policy_yaml("\ufeff" + text, SRC) == plain


@settings(max_examples=150, deadline=None)
@given(body=st.binary(max_size=60))
def test_arbitrary_bytes_are_a_policy_error_naming_the_file_or_a_document(body: bytes) -> None:
    try:
        doc = load_policy_document(body, SRC)
    except PolicyError as e:
        assert str(e).startswith(f"{SRC}: ")
    else:
        assert isinstance(doc, PolicyDocument)


def test_a_utf16_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "windows.yaml"
    path.write_text("mode: observe\n", encoding="utf-16")
    with pytest.raises(PolicyError) as e:
        load_policy_file(path)
    assert str(e.value) == f"{path}: is UTF-16 (byte-order mark FF FE), not UTF-8; save it as UTF-8"


# --- strict types -----------------------------------------------------------------------

# (where, path inside the document, valid values for the field, kind)
INT_FIELDS = [
    ("persistence", "consecutiveReports", st.integers(1, 50)),
    ("persistence", "minSamples", st.integers(0, 10_000)),
    ("recovery", "consecutiveReports", st.integers(1, 50)),
    ("ladder.restartRank", "maxAttempts", st.integers(1, 10)),
    ("budgets", "actionsPerHour", st.integers(0, 100)),
    ("budgets.nodes", "maxNodes", st.integers(0, 100)),
    ("attribution", "structuralMinNodes", st.integers(2, 100)),
    ("attribution", "imbalanceHistory", st.integers(3, 64)),
    ("cluster", "actionsPerHour", st.integers(0, 100)),
    ("cluster.nodes", "maxNodes", st.integers(0, 100)),
    ("cluster.breaker", "maxActions", st.integers(1, 4999)),
]
FLOAT_FIELDS = [
    ("thresholds", "act", st.floats(0, 0.8)),
    ("persistence", "belowForS", st.floats(0.5, 1e6)),
    ("persistence", "maxClockSkewS", st.floats(0, 300)),
    ("warmup", "afterJobStartS", st.floats(0, 1e6)),
    ("recovery", "holdS", st.floats(0, 1e6)),
    ("ladder.notify", "timeoutS", st.floats(0.5, 1e6)),
    ("budgets", "betweenActionsS", st.floats(0, 1e6)),
    ("budgets.nodes", "maxPercent", st.floats(0, 100)),
    ("cooldowns", "nodeAfterUndoS", st.floats(0, 1e6)),
    ("cluster.breaker", "windowS", st.floats(0.5, 1e6)),
]
BOOL_FIELDS = [("ladder.notify", "enabled"), ("ladder.restartRank", "enabled")]


def nest(dotted: str, key: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {key: value}
    for part in reversed(dotted.split(".")):
        out = {part: out}
    return out


def document_with(where: str, key: str, yaml_value: str) -> tuple[str, str]:
    """YAML text setting ``where.key`` (a policy field unless under cluster), and the
    message prefix its error must start with."""
    body = json.dumps(nest(where, key, "@@"))
    if where.startswith("cluster"):
        text = json.dumps(gpu_doc()).removesuffix("}") + ", " + body.removeprefix("{")
        prefix = f"{where}.{key}="
    else:
        text = json.dumps(gpu_doc()).replace('"gpu": {}', '"gpu": ' + body)
        prefix = f"policy 'gpu': {where}.{key}="
    return text.replace('"@@"', yaml_value), prefix


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_numbers_written_as_strings_are_refused_naming_path_and_value(data: st.DataObject) -> None:
    where, key, values = data.draw(st.sampled_from(INT_FIELDS + FLOAT_FIELDS), label="field")
    number = data.draw(values, label="value")
    as_string = str(number)
    text, prefix = document_with(where, key, json.dumps(as_string))
    expected = "an integer" if (where, key, values) in INT_FIELDS else "a number"
    assert f"{SRC}: {prefix}{as_string!r} must be {expected}, not a string" in refusal(text)
    # Unquoted, the same number is accepted (an int where a float belongs included).
    text, _ = document_with(where, key, json.dumps(number))
    load_policy_document(text, SRC)


@settings(max_examples=60, deadline=None)
@given(
    field=st.sampled_from(BOOL_FIELDS),
    word=st.sampled_from(["yes", "no", "true", "false", "on", "off", "1", "0", "y", "n"]),
)
def test_booleans_written_as_strings_are_refused(field: tuple[str, str], word: str) -> None:
    where, key = field
    text, prefix = document_with(where, key, json.dumps(word))
    assert f"{SRC}: {prefix}{word!r} must be true or false, not a string" in refusal(text)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_floats_and_booleans_are_refused_where_a_count_belongs(data: st.DataObject) -> None:
    where, key, values = data.draw(st.sampled_from(INT_FIELDS), label="field")
    number = data.draw(values, label="value")
    text, prefix = document_with(where, key, f"{number}.0")
    assert f"{SRC}: {prefix}{float(number)} must be an integer, not a float" in refusal(text)
    text, prefix = document_with(where, key, "true")
    assert f"{SRC}: {prefix}true must be an integer, not a boolean" in refusal(text)


def test_unquoted_yaml_booleans_are_booleans() -> None:
    text = "policies: {default: {ladder: {restartRank: {enabled: yes}}}}"
    assert load_policy_document(text, SRC).policies["default"].ladder.restart_rank.enabled


# --- maxClockSkewS ----------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(skew=st.floats() | st.integers(-1000, 1000))
def test_clock_skew_tolerance_is_bounded_to_five_minutes(skew: float) -> None:
    data = gpu_doc({"persistence": {"maxClockSkewS": skew}})
    if 0 <= skew <= 300:
        assert parse_policy_document(data, SRC).policies["gpu"].persistence.max_clock_skew_s == skew
        return
    with pytest.raises(PolicyError) as e:
        parse_policy_document(data, SRC)
    shown = str(skew) if not isinstance(skew, float) or not math.isnan(skew) else "nan"
    assert str(e.value) == (
        f"{SRC}: policy 'gpu': persistence.maxClockSkewS={shown} is outside [0, 300] seconds"
    )


def test_clock_skew_bound_is_in_the_json_schema() -> None:
    skew = policy_json_schema()["$defs"]["Persistence"]["properties"]["maxClockSkewS"]
    assert (skew["minimum"], skew["maximum"]) == (0, 300)


# --- enforce-mode risks and acknowledgeUnsafe ---------------------------------------------


@st.composite
def node_budgets(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "maxNodes": draw(st.none() | st.integers(1, 50)),
        "maxPercent": draw(st.none() | st.just(100.0) | st.floats(0.5, 100)),
    }


@st.composite
def ladders(draw: st.DrawFn) -> dict[str, Any]:
    notify = draw(st.booleans())
    taint = notify and draw(st.booleans())
    steps = {
        "notify": notify,
        "restartRank": notify and draw(st.booleans()),
        "taintNode": taint,
        "drainNode": taint and draw(st.booleans()),
        "cordonNode": taint and draw(st.booleans()),
    }
    return {name: {"enabled": on} for name, on in steps.items()}


@st.composite
def risky_documents(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(keys, min_size=1, max_size=3, unique=True))
    policies = {
        name: {
            "mode": draw(st.none() | st.sampled_from(["observe", "dry-run", "enforce"])),
            "ladder": draw(ladders()),
            "budgets": {
                "actionsPerHour": draw(st.none() | st.integers(1, 20)),
                "nodes": draw(node_budgets()),
            },
        }
        for name in names
    }
    return {
        "mode": draw(st.sampled_from(["observe", "dry-run", "enforce"])),
        "defaultPolicy": names[0],
        "policies": policies,
        "cluster": {
            "actionsPerHour": draw(st.none() | st.integers(1, 20)),
            "nodes": draw(node_budgets()),
            "breaker": {
                "maxActions": draw(
                    st.integers(1, 100) | st.integers(4990, 5010) | st.integers(5000, 10**6)
                )
            },
        },
        "acknowledgeUnsafe": draw(st.lists(st.sampled_from(RISKS), unique=True)),
    }


def expected_risks(doc: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The risks by the rules in docs/policy.md, written out plainly: (risk, policy)."""
    level = {"observe": 0, "dry-run": 1, "enforce": 2}
    found: list[tuple[str, str | None]] = []
    acting, node_acting = False, False
    cluster = doc["cluster"]
    for name, p in doc["policies"].items():
        if p["mode"] is not None and level[p["mode"]] < level[doc["mode"]]:
            continue
        if doc["mode"] != "enforce":
            continue
        steps = {s for s, v in p["ladder"].items() if v["enabled"]}
        if not steps:
            found.append(("emptyLadder", name))
        if not steps & DISRUPTIVE:
            continue
        acting = True
        unlimited = [p["budgets"]["actionsPerHour"] is None, cluster["actionsPerHour"] is None]
        if steps & NODE_STEPS:
            node_acting = True
            for budget in (p["budgets"]["nodes"], cluster["nodes"]):
                unlimited.append(budget["maxNodes"] is None and budget["maxPercent"] is None)
        if all(unlimited):
            found.append(("unlimitedBudgets", name))
    nodes = cluster["nodes"]
    if node_acting and nodes["maxNodes"] is None and nodes["maxPercent"] in (None, 100.0):
        found.append(("fullClusterBudget", None))
    if acting and cluster["breaker"]["maxActions"] >= 5000:
        found.append(("breakerNeverOpens", None))
    return found


@settings(max_examples=300, deadline=None)
@given(doc=risky_documents())
def test_risky_enforce_settings_need_an_acknowledgement_and_then_warn(
    doc: dict[str, Any],
) -> None:
    risks = expected_risks(doc)
    acked = set(doc["acknowledgeUnsafe"])
    missing = {risk for risk, _ in risks if risk not in acked}
    if missing:
        with pytest.raises(PolicyError) as e:
            parse_policy_document(doc, SRC)
        message = str(e.value)
        # One problem a line, each naming the file.
        assert all(line.startswith(f"{SRC}: ") for line in message.splitlines()), message
        for risk in RISKS:
            assert (f"acknowledgeUnsafe: [{risk}]" in message) is (risk in missing), message
        for risk, policy in risks:
            if risk == "unlimitedBudgets" and risk in missing:
                assert f"policy '{policy}': " in message
        return
    warnings = parse_policy_document(doc, SRC).warnings()
    accepted = [w for w in warnings if "; accepted by acknowledgeUnsafe: " in w]
    assert sorted(w.rsplit(": ", 1)[1] for w in accepted) == sorted(r for r, _ in risks)
    stale = sorted(acked - {r for r, _ in risks})
    assert [w for w in warnings if w not in accepted] == [
        f"acknowledgeUnsafe lists {risk} but nothing in this document needs it; remove it "
        "so that a later change is not accepted unseen"
        for risk in doc["acknowledgeUnsafe"]
        if risk in stale
    ]


UNLIMITED = {
    "mode": "enforce",
    "defaultPolicy": "gpu",
    "policies": {
        "gpu": {"ladder": {"restartRank": {"enabled": True}}, "budgets": {"actionsPerHour": None}}
    },
    "cluster": {"actionsPerHour": None},
}
FULL_CLUSTER = {
    "mode": "enforce",
    "defaultPolicy": "gpu",
    "policies": {"gpu": {"ladder": {"taintNode": {"enabled": True}}}},
    "cluster": {"nodes": {"maxNodes": None, "maxPercent": 100}},
}
BREAKER = {
    "mode": "enforce",
    "defaultPolicy": "gpu",
    "policies": {"gpu": {"ladder": {"taintNode": {"enabled": True}}}},
    "cluster": {"breaker": {"maxActions": 10000}},
}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            UNLIMITED,
            "policy 'gpu': budgets.actionsPerHour and cluster.actionsPerHour are both null in "
            "enforce mode: no budget limits its disruptive actions (set one of them, or accept "
            "the risk with acknowledgeUnsafe: [unlimitedBudgets])",
        ),
        (
            FULL_CLUSTER,
            "cluster.nodes with maxNodes=null and maxPercent=100 lets policy 'gpu' mark every "
            "node of the cluster at once in enforce mode (lower maxPercent or set maxNodes, or "
            "accept the risk with acknowledgeUnsafe: [fullClusterBudget])",
        ),
        (
            BREAKER,
            "cluster.breaker.maxActions=10000 can never trip: a Kubernetes cluster has at most "
            "5000 nodes, so nothing stops a storm of actions by policy 'gpu' in enforce mode "
            "(lower it below 5000, or accept the risk with acknowledgeUnsafe: "
            "[breakerNeverOpens])",
        ),
    ],
)
def test_each_risk_is_refused_with_its_documented_message(
    doc: dict[str, Any], message: str
) -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy_document(doc, "p.yaml")
    assert str(e.value) == f"p.yaml: {message}"
    assert f"`{message}`" in DOCS.read_text(), "docs/policy.md should show this message"
    # The same document in dry-run needs no acknowledgement and warns of nothing.
    assert parse_policy_document({**doc, "mode": "dry-run"}).warnings() == []


# --- the CLI: one line, exit 2 ----------------------------------------------------------

INVALID_FILES: dict[str, tuple[bytes, str]] = {
    "duplicate-key": (b"mode: observe\nmode: enforce\n", "duplicate key 'mode' at line 2"),
    "utf-16": ("mode: observe\n".encode("utf-16"), "is UTF-16 (byte-order mark FF FE)"),
    "latin-1": ("optOuts: {nodes: [nœud]}\n".encode("cp1252"), "not UTF-8: byte 0x9c at line 1"),
    "string-number": (
        b'policies: {default: {persistence: {consecutiveReports: "3"}}}\n',
        "policy 'default': persistence.consecutiveReports='3' must be an integer, not a string",
    ),
    "clock-skew": (
        b"policies: {default: {persistence: {maxClockSkewS: 3600}}}\n",
        "policy 'default': persistence.maxClockSkewS=3600 is outside [0, 300] seconds",
    ),
    "unacknowledged-risk": (
        yaml.safe_dump(BREAKER).encode(),
        "cluster.breaker.maxActions=10000 can never trip",
    ),
}


def _write(tmp_path: Path, case: str) -> tuple[Path, str]:
    body, message = INVALID_FILES[case]
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(body)
    return path, message


@pytest.mark.parametrize("case", sorted(INVALID_FILES))
def test_validate_prints_one_line_and_exits_2(tmp_path: Path, case: str) -> None:
    path, message = _write(tmp_path, case)
    result = CliRunner().invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if str(path) in line]
    assert len(lines) == 1 and lines[0].startswith(f"invalid {path}: "), result.output
    assert message in lines[0]


@pytest.mark.parametrize("case", sorted(INVALID_FILES))
def test_simulate_and_replay_exit_2_for_the_same_files(tmp_path: Path, case: str) -> None:
    path, _ = _write(tmp_path, case)
    simulate = CliRunner().invoke(app, ["simulate", "--policy", str(path), "--ranks", "2"])
    assert simulate.exit_code == 2, simulate.output
    trace = tmp_path / "trace.jsonl"
    replay = CliRunner().invoke(app, ["replay", "--policy", str(path), "--trace", str(trace)])
    assert replay.exit_code == 2, replay.output


def test_validate_prints_the_warnings_of_an_acknowledged_risk(tmp_path: Path) -> None:
    path = tmp_path / "accepted.yaml"
    path.write_text(
        "# Our fleet rate-limits restarts elsewhere.\n"
        + yaml.safe_dump({**UNLIMITED, "acknowledgeUnsafe": ["unlimitedBudgets"]})
    )
    result = CliRunner().invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert (
        f"warning {path}: policy 'gpu': budgets.actionsPerHour and cluster.actionsPerHour are "
        "both null in enforce mode: no budget limits its disruptive actions; accepted by "
        "acknowledgeUnsafe: unlimitedBudgets"
    ) in result.output
    assert "valid " in result.output


def test_the_hardened_loader_modules_stay_pure() -> None:
    for name in ("policy_types", "policy_safety", "policy_errors", "policy_yaml"):
        module = importlib.import_module(f"pacekeeper.controller.core.{name}")
        found = [word for word in IMPURE if word in inspect.getsource(module)]
        assert found == [], f"{name} uses {found}"
