"""What neuronkit knows about the wording of torch's messages, in one place: guard failures,
graph breaks, limit warnings. (The lines of torch's trace files and of torchrun's output:
``torch_logs.py``; the aten ops Neuron's eager path skips are data of ``kernel_forecast.py``.)

torch rewords guard failures, source names and warnings between releases; when it does, this
module and its test file (tests/test_torch_text.py) are what change. Names are given to users
without Dynamo's source wrappers: ``L['x']`` -> ``x``, ``kwargs['cache'].layers[0].keys`` ->
``cache.layers[0].keys`` (logs written before that rule keep loading: views clean names again).
Guard failures are put in plain words for tables (:func:`guard_text`: ``___check_obj_id(L['x'],
…)`` -> ``x: a different object``; events keep torch's text verbatim); graph-break reports give
their user frame and cause (:func:`break_site`, :func:`break_cause`); a recompile-limit hit is
told from its metrics alone when torch's warning is silenced (:func:`limit_failure`).
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CACHE_NAME", "LIMIT_WARNING", "BreakSite", "break_cause", "break_site", "changed_dim",
           "failure_reason", "first_guard", "guard_text", "input_name", "is_mode_change",
           "is_torch_file", "limit_failure", "limit_note", "limit_value_in", "names_size_mismatch",
           "parse_device", "parse_reasons", "scalar_guard", "short_reason", "size_mismatches",
           "sole_mismatch_at"]

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


@functools.lru_cache(maxsize=4096)  # a log names the same few inputs over and over
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


def names_size_mismatch(reason: str) -> bool:
    """Whether a reason names any size mismatch (what :func:`size_mismatches` parses)."""
    return "size mismatch" in reason


def sole_mismatch_at(reason: str) -> tuple[str, int] | None:
    """``(input name, dim)`` of a reason naming exactly one size mismatch, read without a regex
    (a long log repeats such reasons); None for any other reason."""
    if reason.count("size mismatch") != 1:
        return None
    head, _, tail = reason.partition("' size mismatch at index ")
    index = tail.partition(".")[0]
    return (input_name(head.rpartition("tensor '")[2]), int(index)) if index.isdigit() else None


def is_mode_change(reasons: list[str]) -> bool:
    """Whether guard failures name the grad mode or a module's ``training`` flag: training and
    evaluation running different graphs."""
    text = " ".join(reasons)
    return "grad_mode" in text or "training" in text


def first_guard(reason: str) -> str:
    """The first failed guard of a reason, without torch's prefix (``0/3:``) or comment."""
    text = re.sub(r"^.*guard failure\(s\):\s*", "", reason.strip(), flags=re.S)
    line = _GUARD_PREFIX.sub("", text.splitlines()[0] if text else "")
    return line.split("  #")[0].strip()


def short_reason(reason: str, width: int = 48) -> str:
    """A guard-failure reason in one short line of plain words (:func:`guard_text`):
    ``input_ids dim 1: 17 -> 33``, ``grad mode changed``."""
    text = guard_text(reason)
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


_LIMIT_TYPE = re.compile(r"exceeding the (\w+) cache size limit|Limit type: (\w+)")


def limit_failure(fail_type: Any, fail_reason: Any) -> dict[str, Any] | None:
    """The limit's facts (``limit_type``, ``limit``: None when unsaid) when a compile's metrics
    record (``fail_type``, ``fail_reason``) is a recompile-limit hit, else None. torch raises
    ``Unsupported("Dynamo recompile limit exceeded …")`` for it, the type of a graph break, and
    logs its warning only while ``torch._dynamo`` logs warnings."""
    text = str(fail_reason or "")
    if "RecompileLimit" not in str(fail_type or "") and "recompile limit" not in text.lower():
        return None
    kind = _LIMIT_TYPE.search(text)
    return {"limit_type": next((g for g in kind.groups() if g), "recompile_limit") if kind
            else "recompile_limit", "limit": limit_value_in(text), "function": "", "location": ""}


# -- guard failures in plain words -----------------------------------------------------------
_TENSOR_GUARD = re.compile(r"^tensor '(?P<name>.+?)' (?P<what>[\w ]+?) mismatch\b\.?\s*(?P<rest>.*)$")
_EXPECTED = re.compile(r"expected (?P<old>.+?), actual (?P<new>.+)$")
_KEYSET = re.compile(r"DispatchKeySet\((?P<keys>[^)]*)\)")
_OBJ_ID = re.compile(r"^___check_obj_id\((?P<name>.+?), -?\d+\)")
_TYPE_ID = re.compile(r"^___check_type_id\((?P<name>.+?), -?\d+\)(?:, type=<class '(?P<type>[^']+)'>)?")
_DICT_KEY = re.compile(r"^(?P<neg>not )?___dict_contains\((?P<key>'[^']*'|\"[^\"]*\"), (?P<name>.+)\)$")
_LEN = re.compile(r"^len\((?P<name>.+)\) == (?P<value>\d+)$")
_IS_NONE = re.compile(r"^(?P<name>[\w.\[\]'\"]+) is (?P<neg>not )?None$")
_EQUALS = re.compile(r"^(?P<name>[\w.\[\]'\"]+) == (?P<value>.+)$")
_CLOSURE = re.compile(r"(?P<owner>[\w.\[\]'\"]*?)\.__closure__\[(?P<i>\d+)\]\.cell_contents")
_HOOK_CLOSURE = re.compile(r"(?P<module>[\w.]+)\._(?P<kind>forward_pre_hooks|forward_hooks|"
                           r"backward_pre_hooks|backward_hooks)\[.*\]\.__closure__\[\d+\]"
                           r"\.cell_contents")
_MODULE_PART = re.compile(r"\._(?:modules|parameters|buffers)\[['\"]([^'\"]+)['\"]\]")
_GLOBAL_STATE = {"grad_mode": "grad mode", "deterministic_algorithms": "deterministic algorithms",
                 "torch_function_enabled": "torch function mode", "default_dtype": "default dtype"}


def _guard_name(source: str) -> str:
    """A guarded object's name for people: ``L['self']._modules['d'].training`` ->
    ``self.d.training``; ``G['f'].__closure__[1].cell_contents`` -> ``a variable captured by f``."""
    text = _MODULE_PART.sub(r".\1", input_name(source.lstrip(".")))
    hook = _HOOK_CLOSURE.search(text)  # transformers >= 5.25 registers hooks that capture
    if hook:
        kind = {"forward_pre_hooks": "forward pre-hook", "forward_hooks": "forward hook",
                "backward_pre_hooks": "backward pre-hook", "backward_hooks": "backward hook"}
        return f"a variable captured by a {kind[hook['kind']]} of {hook['module']}"
    closure = _CLOSURE.search(text)
    if closure:
        owner = closure["owner"] or "a function"
        return f"a variable captured by {owner}"
    return text


def _tensor_guard(name: str, what: str, rest: str) -> str:
    """``tensor 'x' <what> mismatch. expected A, actual B`` in plain words."""
    found = _EXPECTED.search(rest)
    old, new = (found["old"], found["new"].rstrip(". ")) if found else ("", "")
    if what == "dispatch key set":
        before, after = [m["keys"].split(", ") for m in _KEYSET.finditer(rest)][:2] or ([], [])
        if before and after and before[0] != after[0]:
            return f"{name}: moved to another device ({before[0]} -> {after[0]})"
        gone, came = sorted(set(before) - set(after)), sorted(set(after) - set(before))
        change = " ".join([f"-{k}" for k in gone] + [f"+{k}" for k in came])
        return f"{name}: tensor mode changed (dispatch keys {change or 'differ'})"
    if what == "requires_grad":
        was = "True" if re.search(r"requires_grad=(1|True)", rest) else "False"
        return f"{name}: requires_grad changed (was {was})"
    if what in ("dtype", "device") and found:
        return f"{name}: {what} changed ({old} -> {new})"
    if what.startswith("stride"):
        return f"{name}: memory layout changed (strides{' ' + old + ' -> ' + new if found else ''})"
    return f"{name}: {what} changed" + (f" ({old} -> {new})" if found else "")


def _python_value(name: str, value: str) -> str:
    """A failed ``name == value`` guard: a Python value baked into the graph."""
    if name.endswith(".training") or name == "training":
        return f"{name} changed (was {value})"
    if value in ("True", "False") or re.fullmatch(r"-?\d+", value):
        return f"a Python int/flag changed: {name} == {value}"
    if re.fullmatch(r"-?[\d.]+(?:e-?\d+)?|inf|nan", value):
        return f"a Python float changed: {name} == {value}"
    if value[:1] in "'\"":
        return f"a Python string changed: {name} == {value}"
    return f"{name} changed (was {value})"


def guard_text(reason: str) -> str:
    """The first failed guard of a reason in plain words; torch's own text when the guard is of
    no known family (the event keeps the verbatim reasons). ``tensor 'x' size mismatch at index 1.
    expected 3, actual 5`` -> ``x dim 1: 3 -> 5``; ``___check_obj_id(L['x'], 1403…)`` ->
    ``x: a different object``; ``GLOBAL_STATE changed: grad_mode`` -> ``grad mode changed``."""
    guard = first_guard(reason)
    found = size_mismatches(guard)
    if found:
        name, dim, old, new = found[0]
        return f"{name} dim {dim}: {old} -> {new}"
    m = _TENSOR_GUARD.match(guard)
    if m:
        return _tensor_guard(_guard_name(m["name"]), m["what"], m["rest"])
    if guard.startswith("GLOBAL_STATE changed:"):
        parts = [p.strip() for p in guard.partition(":")[2].split(",") if p.strip()]
        words = [_GLOBAL_STATE.get(p) or (f"autocast ({p[9:-9]})" if p.startswith("autocast(")
                                          and p.endswith(")_enabled") else p) for p in parts]
        return f"{', '.join(words) or 'global state'} changed"
    for pattern, say in ((_OBJ_ID, "{name}: a different object"),
                         (_TYPE_ID, "{name}: a different type"),
                         (_LEN, "{name}: length changed (was {value})")):
        m = pattern.match(guard)
        if m:
            text = say.format(name=_guard_name(m["name"]), value=m.groupdict().get("value"))
            return text + (f" (was {m['type']})" if m.groupdict().get("type") else "")
    m = _DICT_KEY.match(guard)
    if m:
        verb = "added" if m["neg"] else "removed"
        return f"{_guard_name(m['name'])}: key {m['key']} {verb}"
    m = _IS_NONE.match(guard)
    if m:
        return f"{_guard_name(m['name'])}: " + ("now None" if m["neg"] else "was None, now set")
    m = _EQUALS.match(guard)
    if m:
        return _python_value(_guard_name(m["name"]), m["value"].strip())
    return guard


# -- graph breaks ------------------------------------------------------------------------------
_BREAK_AT = re.compile(r"Graph break in user code at (?P<where>.+?:\d+)")
_BREAK_REASON = re.compile(r"Graph Break Reason:\s*(?P<reason>.*?)(?:\n\s*User code traceback:|\Z)",
                           re.S)
_USER_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)', re.M)
# torch's own files: a break "in" them is caused by the user code that called them
_TORCH_FILE = re.compile(r"[/\\](?:site|dist)-packages[/\\]torch[/\\]|[/\\]torch[/\\](?:_dynamo|"
                         r"_inductor|_functorch|distributed|nn|fx|utils|autograd|_higher_order_ops)"
                         r"[/\\]")


@dataclass
class BreakSite:
    """Where and why Dynamo broke the graph: the user frame (``file:line``, not torch's own
    code) and torch's reason (its graph-break type first: ``Data-dependent branching``)."""

    where: str
    reason: str
    frames: list[str] = field(default_factory=list)  # the user traceback, innermost last


def _break_reason(text: str) -> str:
    """torch's reason without its preamble (``Encountered graph break when attempting to trace
    CALL: …:``), its type line first, then its explanation line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    while len(lines) > 1 and lines[0].endswith(":") and not lines[0].startswith("Explanation"):
        lines.pop(0)
    head = lines[0] if lines else ""
    explain = next((line for line in lines[1:] if line.startswith("Explanation:")), "")
    return f"{head} ({explain})" if explain else head


def is_torch_file(path: str) -> bool:
    """Whether ``path`` is torch's own code (a break there was caused by its caller)."""
    return bool(_TORCH_FILE.search(path))


def break_site(payload: Any) -> BreakSite | None:
    """The ``dynamo_graph_break_reason`` trace payload -> its :class:`BreakSite` (None when the
    text is not a graph-break report): the innermost user-code frame outside torch."""
    text = str(payload or "")
    at = _BREAK_AT.search(text)
    if at is None:
        return None
    reason = _BREAK_REASON.search(text)
    user = text.partition("User code traceback:")[2].partition("Traceback (most recent call")[0]
    frames = [f"{m['file']}:{m['line']}" for m in _USER_FRAME.finditer(user)]
    mine = [f for f in frames if not is_torch_file(f)]
    where = at["where"] if not is_torch_file(at["where"]) or not mine else mine[-1]
    return BreakSite(where, _break_reason(reason["reason"]) if reason else "", frames)


_BUILTIN = re.compile(r"trace the builtin `(?P<name>[^`]+?)\.?`")
_CAUSES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("fsdp", re.compile(r"fsdp|fully_shard", re.I), "FSDP's hooks (marked torch.compiler.disable)"),
    ("item", re.compile(r"Tensor\.item\(\)|\.item\(\)"), "`.item()`: a tensor's value taken into Python"),
    ("data_dependent", re.compile(r"[Dd]ata-dependent (?:branching|control flow)|"
                                  r"[Dd]ata dependent|dynamic control flow"),
     "a data-dependent branch: Python `if` on a tensor's value"),
    ("dynamic_output", re.compile(r"[Dd]ynamic shape operator|output shape depends"),
     "an op whose output shape depends on the data (e.g. nonzero)"),
    ("builtin", _BUILTIN, "an unsupported builtin"),
    ("disabled", re.compile(r"torch\.compiler\.disable|_dynamo\.disable|\bdisable\(\)"),
     "a call to a function marked torch.compiler.disable"),
    ("skipped", re.compile(r"marked as skipped|[Ss]kipfiles|skip_files"),
     "a call into code Dynamo does not trace"),
    ("generator", re.compile(r"[Gg]enerator"), "a generator"),
)


@functools.lru_cache(maxsize=1024)  # a log repeats the same few breaks
def break_cause(*texts: str) -> tuple[str, str]:
    """``(key, plain words)`` for what caused a graph break, from its reason and places:
    ``("item", "`.item()`: …")``, ``("fsdp", "FSDP's hooks …")``, ``("other", <reason>)``."""
    text = "\n".join(t for t in texts if t)
    for key, pattern, words in _CAUSES:
        m = pattern.search(text)
        if m:
            if key == "builtin":
                words = f"an unsupported builtin (`{m['name']}`)"
            return key, words
    first = next((t.strip().splitlines()[0] for t in texts if t and t.strip()), "")
    return "other", first or "no reason recorded"

