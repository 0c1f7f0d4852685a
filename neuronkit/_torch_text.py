"""Everything neuronkit knows about the wording of torch's messages, in one place.

torch rewords guard failures, source names and warnings between releases; when it does, this
module and its test file (tests/test_torch_text.py) are what change. Names are given to users
without Dynamo's source wrappers: ``L['x']`` -> ``x``, ``kwargs['cache'].layers[0].keys`` ->
``cache.layers[0].keys`` (logs written before that rule keep loading: views clean names again).
"""
from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["CACHE_NAME", "LIMIT_WARNING", "changed_dim", "failure_reason", "first_guard",
           "input_name", "limit_note", "limit_value_in", "parse_device", "parse_reasons",
           "scalar_guard", "short_reason", "size_mismatches"]

# "tensor 'L['x']' size mismatch at index 1. expected 3, actual 5"
_SIZE_MISMATCH = re.compile(r"tensor '(?P<name>.+?)' size mismatch at index (?P<dim>\d+)\. "
                            r"expected (?P<expected>-?\d+), actual (?P<actual>-?\d+)")
# Dynamo's source wrappers around an input name
_SOURCE = re.compile(r"\b(?:L|G|kwargs|args)\[['\"]([^'\"]+)['\"]\]")
# "device(type='cuda', index=1)"
_DEVICE = re.compile(r"type='(?P<type>\w+)'(?:, index=(?P<index>\d+))?")
# the recompile-limit warning: "torch._dynamo hit config.%s (%s)\n function: %s ..."
LIMIT_WARNING = "torch._dynamo hit config."
_FUNC_INFO = re.compile(r"^'(?P<name>.*)' \((?P<location>.*)\)$")
_LIMIT_VALUE = re.compile(r"recompile_limit\W*\(?(\d+)|currently set to (\d+)")
# a failed guard "0/3: kwargs['cache'].layers[0].cumulative_length_int == 17    # comment"
_GUARD_PREFIX = re.compile(r"^-?\s*\d+/\d+:\s*")
_SCALAR_GUARD = re.compile(r"^(?P<name>[\w.\[\]'\"]+) == (?P<value>-?\d+)\b")
_DIM = re.compile(r"dim (\d+)|at index (\d+)")
# transformers' names for KV-cache tensors, as Dynamo sources print them
CACHE_NAME = re.compile(r"past_key_values|key_cache|value_cache|layers\[\d+\]\.(keys|values)")


def input_name(source: str) -> str:
    """Dynamo's source text -> the user-facing input name (every wrapper removed):
    ``L['input_ids']`` -> ``input_ids``, ``L['kwargs']['cache'].layers[0].keys`` ->
    ``cache.layers[0].keys``."""
    text, previous = source.strip(), None
    while text != previous:
        previous, text = text, _SOURCE.sub(r"\1", text)
    return text


def size_mismatches(reason: str) -> list[tuple[str, int, int, int]]:
    """``(input name, dim, expected, actual)`` for each size mismatch a reason names."""
    return [(input_name(m["name"]), int(m["dim"]), int(m["expected"]), int(m["actual"]))
            for m in _SIZE_MISMATCH.finditer(reason)]


def first_guard(reason: str) -> str:
    """The first failed guard of a reason, without torch's prefix (``0/3:``) or comment."""
    text = re.sub(r"^.*guard failure\(s\):\s*", "", reason.strip(), flags=re.S)
    line = _GUARD_PREFIX.sub("", text.splitlines()[0] if text else "")
    return line.split("  #")[0].strip()


def short_reason(reason: str, width: int = 48) -> str:
    """A guard-failure reason in one short line: ``input_ids dim 1: 17 -> 33``."""
    text = first_guard(reason)
    found = size_mismatches(text)
    if found:
        name, dim, old, new = found[0]
        text = f"{name} dim {dim}: {old} -> {new}"
    return text if len(text) <= width else text[: width - 1] + "…"


def scalar_guard(reason: str) -> tuple[str, int] | None:
    """``(name, value)`` when the first failed guard is ``name == <int>`` (a Python int)."""
    m = _SCALAR_GUARD.match(first_guard(reason))
    return (input_name(m["name"]), int(m["value"])) if m else None


def changed_dim(text: str) -> int | None:
    """The dimension a ``changed`` text or a size-mismatch reason names (``dim 1``)."""
    m = _DIM.search(text)
    return int(next(g for g in m.groups() if g is not None)) if m else None


def parse_device(text: Any) -> str | None:
    """torch's device text -> a device string: ``"device(type='cuda', index=1)"`` -> ``"cuda:1"``."""
    match = _DEVICE.search(str(text or ""))
    if match is None:
        return None
    return f"{match['type']}:{match['index']}" if match["index"] else match["type"]


def parse_reasons(payload: Any) -> list[str]:
    """The ``recompile_reasons`` payload (one string, or a JSON list) -> a list of reasons."""
    if payload is None:
        return []
    if isinstance(payload, str) and payload.startswith("["):
        try:
            payload = json.loads(payload)
        except ValueError:
            return [payload]
    return [str(r) for r in payload] if isinstance(payload, list) else [str(payload)]


def failure_reason(text: str, width: int = 160) -> str:
    """torch's failure message in one line: the whole text when short, else its first line
    (the graph-break type: ``Attempted to call function marked as skipped``)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    whole = " ".join(lines)
    if len(whole) <= width or not lines:
        return whole
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:  # "backend='x' raised:" says nothing alone
        first = f"{first} {lines[1]}"
    return first


def limit_note(msg: str, args: Any) -> dict[str, Any] | None:
    """The recompile-limit warning's facts (limit name and value, function, location), or None
    when the log record is another message. Raises when torch changed the message's arguments."""
    if not str(msg).startswith(LIMIT_WARNING):
        return None
    limit_type, limit, func = args[0], args[1], args[2]
    match = _FUNC_INFO.match(str(func))
    function, location = (match["name"], match["location"]) if match else ("", "")
    return dict(limit_type=str(limit_type), limit=limit, function=function, location=location)


def limit_value_in(text: str) -> int | None:
    """The recompile limit a message quotes (``recompile_limit (8)``, ``currently set to 8``)."""
    m = _LIMIT_VALUE.search(text)
    return int(m[1] or m[2]) if m else None
