"""What each cache key of a log is made of, kept once per key.

An event names its cache lookups (``CompileEvent.cache_key``: cache, key, state); what a key is
made of (its parts: name -> digest, and each digest's text) is written once per distinct key, in a
line of its own::

    {"key_parts": {"cache": "fx_graph", "key": "frjf...", "parts": {"gm": "5wwr...", ...},
                   "values": {"5wwr...": "def forward(self, arg0_1): ...", ...}}}

``values`` holds only the digests this log has not written before: inductor's FX graph key has
~635 parts, nearly all the same from one key to the next, so a second key adds a few texts. A
merged log (ranks, runs) merges the stores. A log is untrusted input: a line is checked
(:func:`key_parts_problem`) before it is kept, and texts are cut at :data:`TEXT_CHARS`.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["KeyParts", "TEXT_CHARS", "key_parts_problem"]

TEXT_CHARS = 2_000  # a part's text is kept up to this many characters (a graph's code is long)
MAX_PARTS = 4_096  # parts of one key (inductor's FX key has ~635)
MAX_NAME = 512  # characters of a part's name, a key, a digest or a cache name
_CUT = " [... cut]"


def cut_text(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + _CUT


class KeyParts:
    """The parts of every key a log names: ``parts(key)`` (name -> digest), ``value(digest)``
    (its text), ``described(key)`` (name -> text, None where the text is not in the log)."""

    def __init__(self) -> None:
        self._keys: dict[str, tuple[str, dict[str, str]]] = {}  # key -> (cache, parts)
        self._values: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def keys(self) -> list[str]:
        return list(self._keys)

    def cache_of(self, key: str) -> str | None:
        entry = self._keys.get(key)
        return entry[0] if entry else None

    def parts(self, key: str) -> dict[str, str] | None:
        entry = self._keys.get(key)
        return dict(entry[1]) if entry else None

    def value(self, digest: str) -> str | None:
        return self._values.get(digest)

    def described(self, key: str) -> dict[str, str | None] | None:
        entry = self._keys.get(key)
        if entry is None:
            return None
        return {name: self._values.get(digest) for name, digest in entry[1].items()}

    def add(self, cache: str, key: str, parts: Mapping[str, tuple[str, str]]) -> dict[str, Any] | None:
        """Keep ``key``'s parts (name -> (digest, text)); returns the line's value to write (only
        texts not kept before), or None when the key is known already."""
        if key in self._keys:
            return None
        names = {str(name)[:MAX_NAME]: str(digest) for name, (digest, _) in parts.items()}
        new = {str(d): cut_text(str(text)) for d, text in parts.values() if str(d) not in self._values}
        self._keys[key] = (cache, names)
        self._values.update(new)
        return {"cache": cache, "key": key, "parts": names, "values": new}

    def take_line(self, value: Mapping[str, Any]) -> None:
        """Keep a checked ``key_parts`` line (:func:`key_parts_problem` said nothing)."""
        self._keys.setdefault(value["key"], (value["cache"], dict(value["parts"])))
        for digest, text in value["values"].items():
            self._values.setdefault(digest, cut_text(text))

    def lines(self) -> list[dict[str, Any]]:
        """Every key as the lines that write it whole (each text once, with its first key)."""
        written: set[str] = set()
        out = []
        for key, (cache, names) in self._keys.items():
            new = {d: self._values[d] for d in names.values() if d in self._values and d not in written}
            written.update(new)
            out.append({"cache": cache, "key": key, "parts": dict(names), "values": new})
        return out

    def merge(self, others: Iterable["KeyParts"]) -> None:
        for other in others:
            for key, (cache, names) in other._keys.items():
                self._keys.setdefault(key, (cache, dict(names)))
            for digest, text in other._values.items():
                self._values.setdefault(digest, text)


def _names_problem(what: str, value: Any, limit: int) -> str | None:
    if type(value) is not dict:
        return f"key_parts {what}: expected an object, got {type(value).__name__}"
    if len(value) > limit:
        return f"key_parts {what}: {len(value)} entries, at most {limit}"
    for name, text in value.items():
        if len(name) > MAX_NAME or type(text) is not str:
            return f"key_parts {what}: expected names of <= {MAX_NAME} characters and strings"
    return None


def key_parts_problem(value: Any) -> str | None:
    """What is wrong with a ``key_parts`` line's value (None: nothing)."""
    if type(value) is not dict:
        return "key_parts: expected an object"
    for name in ("cache", "key"):
        text = value.get(name)
        if type(text) is not str or not text or len(text) > MAX_NAME:
            return f"key_parts {name}: expected a name of 1 to {MAX_NAME} characters"
    problem = _names_problem("parts", value.get("parts"), MAX_PARTS)
    if problem is None:
        problem = _names_problem("values", value.get("values"), MAX_PARTS)
    if problem is None and any(len(d) > MAX_NAME for d in value["parts"].values()):
        problem = f"key_parts parts: a digest longer than {MAX_NAME} characters"
    return problem
