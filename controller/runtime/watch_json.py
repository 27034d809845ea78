"""Watch events decoded by pydantic-core's JSON parser instead of the standard library's.

Kopf decodes each line of a watch stream with ``json.loads``. A StragglerReport event
carries the whole report in its status (55-110 kB for 256 ranks, mostly floats), and the
standard library's float parsing made that decode about a seventh of the operator's CPU
against the real kube-apiserver at 30 s reporting (docs/performance.md, issue 16).
pydantic-core's parser (already installed: pydantic is built on it) returns the same
dicts, lists, strings and numbers three times faster. A line it refuses is handed to
``json.loads``, so anything the standard library accepts still decodes as before.

Kopf has no setting for its decoder: this swaps the ``json`` name inside Kopf's client
module for a namespace whose ``loads`` is ours. If a Kopf release moves that code, the
swap is skipped with a warning and Kopf decodes as it always did.
"""

from __future__ import annotations

import json
import logging
import types
from typing import Any

import pydantic_core

logger = logging.getLogger(__name__)


def loads(text: str | bytes | bytearray, **kwargs: Any) -> Any:
    """``json.loads``, through pydantic-core's parser where it accepts the text."""
    if kwargs:  # a caller asking for hooks gets the standard library, hooks and all
        return json.loads(text, **kwargs)
    try:
        return pydantic_core.from_json(text)
    except ValueError:
        return json.loads(text)  # its answer, or its error, as before


def _namespace() -> types.SimpleNamespace:
    public = {name: getattr(json, name) for name in json.__all__}
    return types.SimpleNamespace(**{**public, "loads": loads, "__wrapped__": json})


def install() -> bool:
    """Make Kopf's watch streams decode through ``loads``; False if Kopf's layout is not
    the one this knows (then nothing is changed)."""
    try:
        from kopf._cogs.clients import api
    except ImportError:
        logger.warning("kopf's client module moved: watch events decoded by the json module")
        return False
    current = getattr(api, "json", None)
    if isinstance(current, types.SimpleNamespace) and current.loads is loads:
        return True
    if current is not json:
        logger.warning("kopf's client module moved: watch events decoded by the json module")
        return False
    api.json = _namespace()  # type: ignore[assignment,attr-defined]
    return True
