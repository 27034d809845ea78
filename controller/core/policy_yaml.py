"""From the bytes of a policy file to the plain mapping the models validate, refusing what
PyYAML would otherwise let through silently or answer with a traceback:

- a key given twice in one mapping, at any depth (PyYAML keeps the last one, so
  ``mode: observe`` then ``mode: enforce`` would enforce, and a policy name given twice
  would drop one policy without a word);
- a document over ``MAX_POLICY_BYTES`` (1 MiB, a ConfigMap's limit): PyYAML's pure-Python
  parser takes about a second per megabyte, and a minute for 50 MB;
- bytes that are not UTF-8: UTF-16 or UTF-32 (PyYAML would quietly decode them) and
  anything else that does not decode. A UTF-8 byte-order mark is accepted and dropped:
  it is unambiguous, and some editors still write it.

Pure: text or bytes in, data or ``PolicyError`` out; reading the file is the caller's.
Booleans are YAML 1.1's, as PyYAML and Helm read them (``yes``/``no``/``on``/``off``
unquoted are booleans; quoted they are strings, which the strict models refuse). Floats
also take the exponent forms of JSON and YAML 1.2 (``1e3``, ``1e-05``), which PyYAML alone
would read as strings.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

import yaml

from .policy_errors import PolicyError

_WIDE = (
    # UTF-32's marks first: FF FE 00 00 begins with UTF-16-LE's FF FE.
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
_MERGE_TAG = "tag:yaml.org,2002:merge"
MAX_POLICY_BYTES = 1024 * 1024
"""The most a policy document may hold: what a ConfigMap (where the chart puts it) can."""
# Exponent floats without a dot or without an exponent sign (``1e3``, ``1.5e-3``, JSON's
# ``1e-05``): numbers in JSON, YAML 1.2 and Helm, strings to PyYAML's YAML 1.1, which the
# strict models would then refuse.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


def read_policy_yaml(data: str | bytes, source: str) -> Any:
    """The YAML document in ``data`` as plain data (None for an empty one), or
    ``PolicyError`` naming ``source``: too large, not UTF-8, not valid YAML, or a
    duplicate key."""
    size = len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data)
    if size > MAX_POLICY_BYTES:
        raise PolicyError(
            f"{source}: is {size} bytes, over the {MAX_POLICY_BYTES} bytes (1 MiB) a policy "
            "document may have (a ConfigMap holds no more)"
        )
    text = decode_policy_text(data, source)
    loader: _UniqueKeyLoader | None = None
    try:
        loader = _UniqueKeyLoader(text, source)  # the reader refuses control characters here
        return loader.get_single_data()
    except yaml.MarkedYAMLError as e:
        raise PolicyError(f"{source}: not valid YAML{_where(e)}") from e
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        raise PolicyError(
            f"{source}: not valid YAML at line {line}: character U+{e.character:04X} is not "
            "allowed in YAML (not printable)"
        ) from e
    except yaml.YAMLError as e:
        raise PolicyError(f"{source}: not valid YAML: {_one_line(str(e))}") from e
    finally:
        if loader is not None:
            loader.dispose()


def decode_policy_text(data: str | bytes, source: str) -> str:
    """UTF-8 bytes (with or without a byte-order mark) as text; anything else refused."""
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    for bom, encoding in _WIDE:
        if data.startswith(bom):
            raise PolicyError(
                f"{source}: is {encoding} (byte-order mark {bom.hex(' ').upper()}), "
                "not UTF-8; save it as UTF-8"
            )
    nul = data.find(b"\x00")
    if nul >= 0:
        raise PolicyError(
            f"{source}: not UTF-8 text: NUL byte at line {_line(data, nul)} (UTF-16 or "
            "UTF-32 without a byte-order mark, or not a text file); save it as UTF-8"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PolicyError(
            f"{source}: not UTF-8: byte 0x{data[e.start]:02x} at line {_line(data, e.start)} "
            "does not decode (Latin-1 or another legacy encoding?); save it as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


class _UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no stubs here
    """SafeLoader that refuses a key given twice in one mapping (merge keys ``<<`` may
    still be overridden by the mapping's own keys: that is what they are for)."""

    # Floats as JSON and YAML 1.2 write them (see _EXPONENT_FLOAT).
    yaml_implicit_resolvers = {
        first: [*resolvers, ("tag:yaml.org,2002:float", _EXPONENT_FLOAT)]
        if first in "-+0123456789."
        else resolvers
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self.source = source
        self.root: yaml.Node | None = None

    def construct_document(self, node: yaml.Node) -> Any:
        self.root = node
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            self._refuse_duplicates(node)
        return super().construct_mapping(node, deep=deep)

    def _refuse_duplicates(self, node: yaml.MappingNode) -> None:
        first: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node)
            try:
                seen = first.setdefault(key, key_node)
            except TypeError:  # unhashable: PyYAML's own error says so
                continue
            if seen is key_node:
                continue
            where = _path_to(self.root, node)
            raise PolicyError(
                f"{self.source}: duplicate key {key_node.value!r}"
                + (f" in {where}" if where else "")
                + f" at line {key_node.start_mark.line + 1}"
                f" (first at line {seen.start_mark.line + 1})"
            )


def _path_to(root: yaml.Node | None, target: yaml.Node) -> str:
    """The dotted path of ``target`` in the document (only built for an error)."""
    stack: list[tuple[Any, str]] = [(root, "")]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else "?"
                stack.append((v, f"{path}.{key}" if path else str(key)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node.value))
    return ""


def _where(e: yaml.MarkedYAMLError) -> str:
    mark = e.problem_mark or e.context_mark
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = _one_line(e.problem or str(e))
    if not e.context:
        return f"{at}: {problem}"
    context = _one_line(e.context)
    if e.context_mark is not None:
        context += f" at line {e.context_mark.line + 1}"
    # PyYAML splits some sentences in two: "expected a single document" + "but found ...".
    if problem.startswith("but "):
        return f"{at}: {context}, {problem}"
    return f"{at}: {problem} ({context})"


def _line(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _one_line(text: str) -> str:
    return " ".join(text.split())
