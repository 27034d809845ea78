"""The user's commands, read from the docs as written, and run with the tools users run.

`blocks(doc, heading)` returns the fenced code blocks under a heading of a Markdown file;
`commands(block, env)` splits a shell block into argv lists the way a shell would
(`\\` continuations, `#` comments, `$VAR` from `env`); `Tools.run(argv)` runs one:

- `kubectl ...` runs the kubectl on PATH (Debian's) with the journey's kubeconfig;
- `helm ...` runs through Helm's Go SDK (helm-python-sdk): there is no helm binary here,
  but its install, upgrade and uninstall are the same Go code the helm CLI calls, hooks,
  CRDs, schema and kubeVersion checks included. The CLI's flags are mapped one by one;
  a flag not mapped fails the test, so the docs cannot drift past what was proven.
- `pacekeeper ...` runs this checkout's CLI.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
_HEADING = re.compile(r"^(#+)\s+(.*?)\s*$", re.M)
_FENCED = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.M | re.S)


def blocks(doc: Path, heading: str, language: str | None = None) -> list[str]:
    """The fenced blocks (of `language`, if given) between `heading` (exact text) and the
    next heading of the same or a higher level."""
    text = doc.read_text()
    # Headings inside fences (a `# comment` in a shell block) are not headings.
    fences = [m.span() for m in _FENCED.finditer(text)]
    headings = [
        m for m in _HEADING.finditer(text)
        if not any(a <= m.start() < b for a, b in fences)
    ]  # fmt: skip
    start = next((m for m in headings if m.group(2) == heading), None)
    if start is None:
        raise AssertionError(f"{doc.name}: no heading {heading!r}")
    level = len(start.group(1))
    end = next(
        (m.start() for m in headings if m.start() > start.end() and len(m.group(1)) <= level),
        len(text),
    )
    return [
        m.group(2) for m in _FENCED.finditer(text, start.end(), end)
        if language is None or m.group(1) == language
    ]  # fmt: skip


def commands(block: str, env: Mapping[str, str]) -> list[list[str]]:
    """Each command line of a shell block as argv (variables expanded from `env`)."""
    joined = re.sub(r"\\\n", " ", block)
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        expanded = []
        for word in words:
            for name in re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", word):
                if name not in env:
                    raise AssertionError(f"the docs use ${name}: the journey must set it")
            expanded.append(re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: env[m.group(1)], word))
        out.append(expanded)
    return out


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value
    return base


@dataclass
class HelmCall:
    """One helm CLI command line, parsed as helm's own flags define it."""

    verb: str
    positional: list[str]
    namespace: str = "default"
    create_namespace: bool = False
    value_files: list[Path] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    reuse_values: bool = False

    @classmethod
    def parse(cls, argv: Sequence[str], cwd: Path) -> HelmCall:
        if argv[:1] != ["helm"] or len(argv) < 2:
            raise AssertionError(f"not a helm command: {argv}")
        call = cls(argv[1], [])
        words = list(argv[2:])
        while words:
            word = words.pop(0)
            if "=" in word and word.startswith("--"):
                word, value = word.split("=", 1)
                words.insert(0, value)
            if word in ("-n", "--namespace"):
                call.namespace = words.pop(0)
            elif word == "--create-namespace":
                call.create_namespace = True
            elif word in ("-f", "--values"):
                call.value_files.append(cwd / words.pop(0))
            elif word == "--set":
                call.sets.append(words.pop(0))
            elif word == "--reuse-values":
                call.reuse_values = True
            elif word.startswith("-"):
                raise AssertionError(f"helm flag {word} is not mapped onto the Go SDK here")
            else:
                call.positional.append(word)
        return call

    def values(self) -> dict[str, Any]:
        """-f files in order, then every --set over them (helm's order)."""
        import helm_python

        merged: dict[str, Any] = {}
        for path in self.value_files:
            _deep_merge(merged, yaml.safe_load(path.read_text()) or {})
        if self.sets:
            # Several --set flags parse into one map in order: as one comma-joined string.
            _deep_merge(merged, helm_python.parse_set_string(",".join(self.sets)))
        return merged


@dataclass
class Tools:
    """The journey's tools: kubectl, helm (Go SDK), pacekeeper; all with one kubeconfig."""

    kubeconfig: Path
    cwd: Path
    env: dict[str, str]
    transcript: list[str] = field(default_factory=list)

    def run(self, argv: Sequence[str], *, check: bool = True) -> str:
        self.transcript.append("$ " + shlex.join(argv))
        if argv[0] == "helm":
            return self.helm(argv)
        if argv[0] == "kubectl":
            program = ["kubectl"]
        elif argv[0] == "pacekeeper":
            program = [str(Path(sys.executable).with_name("pacekeeper"))]
        else:
            raise AssertionError(f"the journey runs kubectl, helm and pacekeeper, not {argv[0]}")
        env = {**os.environ, **self.env, "KUBECONFIG": str(self.kubeconfig), "COLUMNS": "200"}
        done = subprocess.run(
            [*program, *argv[1:]], cwd=self.cwd, env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        output = done.stdout + done.stderr
        self.transcript.append(output)
        if check and done.returncode != 0:
            raise AssertionError(f"{shlex.join(argv)} exited {done.returncode}:\n{output}")
        return output

    def helm(self, argv: Sequence[str]) -> str:
        import helm_python

        call = HelmCall.parse(argv, self.cwd)
        config = helm_python.Config(kubeconfig_path=self.kubeconfig, namespace=call.namespace)
        try:
            if call.verb == "install":
                name, chart = call.positional
                release = config.install(
                    str(self.cwd / chart), name, call.values(), namespace=call.namespace,
                    create_namespace=call.create_namespace, timeout=240,
                )  # fmt: skip
            elif call.verb == "upgrade":
                name, chart = call.positional
                release = config.upgrade(
                    str(self.cwd / chart), name, call.values(), namespace=call.namespace,
                    reuse_values=call.reuse_values, timeout=240,
                )  # fmt: skip
            elif call.verb == "uninstall":
                (name,) = call.positional
                release = config.uninstall(name, timeout=120)
            else:
                raise AssertionError(f"helm {call.verb} is not mapped onto the Go SDK here")
        finally:
            config.close()
        summary = f"helm {call.verb} {call.positional[0]}: {release.get('info', 'ok')}"
        self.transcript.append(summary)
        return summary
