"""Read YAML the way Helm and kubectl do, to compare with how PyYAML reads it.

Every Go tool that creates our objects (helm, kubectl, Argo CD, Flux) goes through
sigs.k8s.io/yaml, which resolves plain scalars by YAML 1.1: `n`, `y`, `no`, `off` are
booleans there and strings to PyYAML. A manifest that means one thing to our Python tests
and another to the API server's clients passes every test and fails for every user, so the
chart tests parse what we ship with both and require the same object.

helm-python-sdk's `values_from_yaml` is Helm's own values reader (sigs.k8s.io/yaml through
JSON), so it sees exactly what `helm install -f` and the manifest decoders see. It reads
one document; streams are split here.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from typing import Any

import helm_python as helm
import yaml

_DOCUMENT_START = re.compile(r"^---[ \t]*(?:#.*)?$", re.M)
# Plain scalars YAML 1.1 reads as booleans, other than true/false: the parsers disagree on
# some (PyYAML keeps y and n as strings) and YAML 1.2 readers take all of them as strings.
_YAML11_BOOLEAN = re.compile(r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$")


def documents(text: str) -> Iterator[str]:
    """The documents of a YAML stream, each as its own text (`---` lines split them)."""
    for part in _DOCUMENT_START.split(text):
        if yaml.safe_load(part) is not None:
            yield part


def go_load(document: str) -> Any:
    """One document as Helm reads it (JSON types: keys are strings, numbers floats or ints)."""
    if isinstance(yaml.safe_load(document), dict):
        return helm.values_from_yaml(document)
    # Helm's values reader takes only a mapping: hang any other root under one key
    # (indenting every line keeps block scalars and flow collections as they were).
    nested = "root:\n" + "".join(f"  {line}" for line in document.splitlines(keepends=True))
    return helm.values_from_yaml(nested)["root"]


def canonical(value: Any) -> Any:
    """A form where equal means equal to both parsers: bool, number and string stay apart
    (Python's True == 1 would hide `on` read as true), 1 and 1.0 are one number (JSON has
    one number type), and a YAML timestamp is the string Go keeps it as."""
    if isinstance(value, dict):
        return ("map", tuple(sorted((repr(canonical(k)), canonical(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("seq", tuple(canonical(v) for v in value))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("num", float(value))
    if isinstance(value, datetime.date):
        return ("str", value.isoformat())
    if value is None:
        return ("null", None)
    return ("str", str(value))


def differences(go: Any, py: Any, path: str = "") -> list[str]:
    """Where the two readings part, as `path: go=... pyyaml=...` lines."""
    if canonical(go) == canonical(py):
        return []
    if isinstance(go, dict) and isinstance(py, dict):
        go_keys = {str(k): k for k in go}
        py_keys = {str(k) if not isinstance(k, bool) else repr(k): k for k in py}
        out = []
        for key in sorted(set(go_keys) | set(py_keys)):
            if key not in go_keys or key not in py_keys:
                where = "go" if key in go_keys else "pyyaml"
                out.append(f"{path}/{key}: only {where} has this key")
                continue
            out += differences(go[go_keys[key]], py[py_keys[key]], f"{path}/{key}")
        return out or [f"{path}: go={go!r} pyyaml={py!r}"]
    if isinstance(go, list) and isinstance(py, list) and len(go) == len(py):
        return [
            d
            for i, (g, p) in enumerate(zip(go, py, strict=True))
            for d in differences(g, p, f"{path}[{i}]")
        ]
    return [f"{path or '/'}: go={go!r} pyyaml={py!r}"]


def stream_differences(text: str) -> list[str]:
    """Every place a document of `text` reads differently to Helm and to PyYAML."""
    out: list[str] = []
    for i, document in enumerate(documents(text)):
        py = yaml.safe_load(document)
        out += [f"document {i}{d}" for d in differences(go_load(document), py)]
    return out


def ambiguous_booleans(text: str) -> list[str]:
    """`line N: word` for each unquoted y/n/yes/no/on/off, key or value."""
    return [
        f"line {token.start_mark.line + 1}: {token.value}"
        for token in yaml.scan(text)
        if isinstance(token, yaml.ScalarToken)
        and token.plain
        and _YAML11_BOOLEAN.match(token.value)
    ]


def problems(text: str) -> list[str]:
    """Differences between the readings, then words that read as booleans only by YAML 1.1."""
    return stream_differences(text) + ambiguous_booleans(text)
