"""Plain-language findings about a compile log: what recompiled, why, and what to change.

    for advice in nk.diagnose(rec.log):
        print(advice)

Each finding names the numbers behind it (``Advice.numbers``) and one concrete fix. Findings are
ordered critical -> warning -> info. The analysis reads only the events: the input shapes of every
graph, the guard-failure reasons, the kind, the rank and the durations.
"""
from __future__ import annotations

import json
import re
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

from .events import CompileEvent, CompileLog

Severity = Literal["info", "warning", "critical"]
SEVERITIES: tuple[str, ...] = ("critical", "warning", "info")
GRAPH_KINDS = ("first", "recompile")
SHARE_WARNING = 0.20  # compile time above this share of the run is a warning

_MISMATCH = re.compile(r"tensor '(?P<name>.+?)' size mismatch at index (?P<dim>\d+)\. "
                       r"expected (?P<expected>\d+), actual (?P<actual>\d+)")
_LIMIT = re.compile(r"recompile_limit\W*\(?(\d+)|currently set to (\d+)")
_SOURCE = re.compile(r"\b(?:L|G|kwargs|args)\[['\"]([^'\"]+)['\"]\]")
_CACHE_NAME = re.compile(r"past_key_values|key_cache|value_cache|layers\[\d+\]\.(keys|values)")


@dataclass
class Advice:
    """One finding: a title, what was seen, the fix, a severity and the numbers behind it."""

    title: str
    detail: str
    fix: str = ""
    severity: Severity = "info"
    numbers: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"Advice severity must be one of {SEVERITIES}, got {self.severity!r}")

    def __str__(self) -> str:
        lines = [f"[{self.severity}] {self.title}"]
        if self.detail:
            lines += textwrap.wrap(self.detail, 100, initial_indent="  ", subsequent_indent="  ")
        if self.fix:
            lines += textwrap.wrap(self.fix, 100, initial_indent="  fix: ",
                                   subsequent_indent="       ")
        return "\n".join(lines)


# -- helpers shared with report.py ------------------------------------------------------------
def clean_name(text: str) -> str:
    """``L['input_ids']`` / ``kwargs['cache'].layers[0].keys`` -> ``input_ids`` / ``cache.layers[0].keys``."""
    return _SOURCE.sub(r"\1", text.strip())


def short_reason(reason: str, width: int = 48) -> str:
    """A guard-failure reason in one short line: ``input_ids dim 1: 17 -> 33``."""
    text = re.sub(r"^.*guard failure\(s\):\s*", "", reason.strip(), flags=re.S)
    text = re.sub(r"^-?\s*\d+/\d+:\s*", "", text.splitlines()[0] if text else "")
    m = _MISMATCH.search(text)
    if m:
        text = f"{clean_name(m['name'])} dim {m['dim']}: {m['expected']} -> {m['actual']}"
    return text if len(text) <= width else text[: width - 1] + "…"


def _graphs_per_rank(events: list[CompileEvent]) -> int:
    """Graphs of one function: the most on any rank (a merged log repeats them once per rank)."""
    counts: dict[int, int] = defaultdict(int)
    for e in events:
        counts[e.rank] += e.kind in GRAPH_KINDS
    return max(counts.values(), default=0)


def _graphs(events: list[CompileEvent]) -> int:
    """Distinct graphs of one function over all ranks (by input shapes), at least any rank's count."""
    shapes = {json.dumps(e.input_shapes, sort_keys=True) for e in events
              if e.kind in GRAPH_KINDS}
    return max(len(shapes), _graphs_per_rank(events))


def _span(values: list[int]) -> str:
    return f"{min(values)}..{max(values)}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _listed(values: list[Any], most: int = 12) -> str:
    shown = ", ".join(str(v) for v in values[:most])
    return shown + (f", … ({len(values) - most} more)" if len(values) > most else "")


def _plan(values: list[int]) -> tuple[list[int], str]:
    """Bucket boundaries for observed lengths, via shapes.plan_buckets or powers of two."""
    try:
        from .shapes import plan_buckets

        return [int(b) for b in plan_buckets(sorted(values)).boundaries], "plan_buckets"
    except Exception as exc:  # missing module or a refusal: say so and still suggest something
        powers = sorted({1 << max(int(v) - 1, 0).bit_length() for v in values})
        return powers, f"powers of two (plan_buckets unavailable: {type(exc).__name__}: {exc})"


# -- per function: which input dimensions varied -----------------------------------------------
@dataclass
class _Series:
    """The values one input dimension took, in event order."""

    name: str
    dim: int
    ndim: int | None
    values: list[tuple[int, int]] = field(default_factory=list)  # (event index, value)

    @property
    def distinct(self) -> list[int]:
        return sorted({v for _, v in self.values})

    @property
    def role(self) -> str:
        """``batch`` (dim 0 of a 2-D+ tensor), ``cache`` (a KV-cache length) or ``length``."""
        is_1d = self.ndim == 1 or (self.ndim is None and "position" in self.name)
        if self.dim == 0 and not is_1d:
            return "batch"
        return "cache" if _CACHE_NAME.search(self.name) else "length"


def _series(events: list[CompileEvent]) -> dict[tuple[str, int], _Series]:
    """Input dimensions from the recorded shapes, completed from the guard-failure reasons."""
    out: dict[tuple[str, int], _Series] = {}
    for i, e in enumerate(events):
        for raw, dims in (e.input_shapes or {}).items():
            for d, v in enumerate(dims or []):
                if isinstance(v, int):
                    name = clean_name(raw)
                    out.setdefault((name, d), _Series(name, d, len(dims))).values.append((i, v))
    from_reasons: dict[tuple[str, int], _Series] = {}
    for i, e in enumerate(events):
        for reason in e.reasons:
            for m in _MISMATCH.finditer(reason):
                key = (clean_name(m["name"]), int(m["dim"]))
                if key in out:
                    continue
                s = from_reasons.setdefault(key, _Series(key[0], key[1], None))
                if not s.values:  # the first graph's value is what the first recompile expected
                    s.values.append((-1, int(m["expected"])))
                if s.values[-1][0] != i:
                    s.values.append((i, int(m["actual"])))
    out.update(from_reasons)
    return out


def _groups(series: dict[tuple[str, int], _Series], graph_at: set[int]) -> list[list[_Series]]:
    """Varying dimensions grouped when they changed together (input_ids and attention_mask).

    Only graph events decide the grouping: a limit hit's shapes may be known only in part.
    """
    groups: dict[tuple[bool, tuple], list[_Series]] = {}
    for s in series.values():
        if len(s.distinct) > 1:
            together = tuple((i, v) for i, v in s.values if i in graph_at or i < 0)
            groups.setdefault((s.role == "batch", together), []).append(s)
    # a cache tensor leads its group: the masks sized to the cache follow it
    return [sorted(g, key=lambda s: s.role != "cache") for g in groups.values()]


def _names(group: list[_Series]) -> str:
    head = f"{group[0].name} dim {group[0].dim}"
    rest = [f"{s.name} dim {s.dim}" for s in group[1:]]
    if len(rest) > 2:
        rest = [rest[0], f"{len(rest) - 1} more alike"]
    return head + (f" (with {' and '.join(rest)})" if rest else "")


def _is_generation(function: str, events: list[CompileEvent],
                   series: dict[tuple[str, int], _Series]) -> bool:
    text = " ".join(r for e in events for r in e.reasons)
    return (function == "wrapper" or "past_key_values" in text
            or any(_CACHE_NAME.search(n) or "cache_position" in n for n, _ in series))


def _consecutive(values: list[int]) -> bool:
    """Four or more values one apart: what a cache growing by one token per step leaves."""
    return len(values) >= 4 and all(b - a == 1 for a, b in zip(values, values[1:]))


def _shape_findings(function: str, events: list[CompileEvent]) -> list[Advice]:
    shaped = [e for e in events if e.kind in (*GRAPH_KINDS, "limit_hit")]
    series = _series(shaped)
    graphs = _graphs(events)
    generation = _is_generation(function, shaped, series)
    found: list[Advice] = []
    groups = _groups(series, {i for i, e in enumerate(shaped) if e.kind in GRAPH_KINDS})
    per_token = [g for g in groups if g[0].role == "cache" and _consecutive(g[0].distinct)]
    if per_token:  # a cache growing per token drags the masks and positions along
        per_token += [g for g in groups if generation and g[0].role == "length"
                      and _consecutive(g[0].distinct)]
    for group in groups:
        role = group[0].role
        if any(group is g for g in per_token):
            continue
        if role == "cache":
            found.append(_cache_growth(function, group, graphs))
        elif role == "batch":
            found.append(_batch_change(function, group, shaped, graphs, generation))
        else:
            found.append(_buckets(function, group, shaped, graphs))
    if per_token:
        found.append(_dynamic_cache(function, per_token, graphs))
    if not found and graphs > 1:
        found.append(_same_shapes(function, events, graphs))
    return found


def _buckets(function: str, group: list[_Series], events: list[CompileEvent],
             graphs: int) -> Advice:
    values = group[0].distinct
    buckets, source = _plan(values)
    eager = sum(e.kind == "limit_hit" for e in events)
    title = (f"{function}: {_names(group)} took {len(values)} values ({_span(values)}) "
             f"-> {_count(graphs, 'graph')}" + (f" + {eager} run eagerly" if eager else ""))
    detail = (f"Every distinct value compiled its own graph of `{function}`: {_listed(values)}. "
              f"On Neuron each graph is a separate neuronx-cc compile (minutes each). "
              f"Suggested buckets ({source}): {buckets} -> at most {_count(len(buckets), 'graph')}.")
    if len(buckets) == 1:
        fix = (f"pad to one length, {buckets[0]}: padding='max_length', max_length={buckets[0]} "
               f"(or nk.FixedLengthCollator(tokenizer, max_length={buckets[0]})) for training, "
               f"nk.generate(..., buckets=nk.Buckets({buckets})) for generation")
    else:
        fix = (f"pad to buckets: nk.generate(..., buckets=nk.Buckets({buckets})) for generation, "
               f"nk.FixedLengthCollator(tokenizer, buckets=nk.Buckets({buckets})) for training "
               f"(or padding='max_length', max_length={max(values)} for a single graph)")
    return Advice(title, detail, fix, "warning", {
        "function": function, "input": group[0].name, "dim": group[0].dim, "values": values,
        "distinct": len(values), "min": min(values), "max": max(values), "graphs": graphs,
        "buckets": buckets, "bucket_source": source})


def _batch_change(function: str, group: list[_Series], events: list[CompileEvent],
                  graphs: int, generation: bool) -> Advice:
    s = group[0]
    order = [v for _, v in s.values]
    values, full = s.distinct, order[0]
    smaller = [(i, v) for i, v in s.values if v < full]
    nums: dict[str, Any] = {"function": function, "input": s.name, "values": values,
                            "batch_size": full, "graphs": graphs}
    if generation:
        extra = len(values) - 1
        return Advice(
            f"{function}: the batch size changed during generation ({_listed(order)}) "
            f"-> {_count(extra, 'extra graph')}",
            f"Dim 0 of {s.name} took {len(values)} values: every batch size compiles its own "
            f"decode graph.",
            f"generate with a fixed batch size (nk.generate(..., batch_size={full})) and pad the "
            f"last batch to it, so every call has {full} rows", "warning",
            {**nums, "extra_graphs": extra})
    partial = len(values) == 2 and max(values) == full and len(smaller) <= len(order) - len(smaller)
    if partial:
        where = [events[i] for i, _ in smaller if i >= 0]
        at = ", ".join(f"#{e.seq}" + (f" ({e.context})" if e.context else "") for e in where)
        return Advice(
            f"{function}: a last partial batch (batch {values[0]} instead of {full}) compiled "
            f"{_count(len(smaller), 'extra graph')}",
            f"Dim 0 of {s.name} was {full} except at event {at}, where it dropped to {values[0]}: "
            f"the dataset size is not a multiple of the batch size, so the last batch of an epoch "
            f"is smaller and compiles a graph of its own.",
            "dataloader_drop_last=True in TrainingArguments (nk.fixed_shape_args sets it) or "
            "DataLoader(..., drop_last=True); for evaluation pad the last batch to the full size",
            "warning", {**nums, "partial_batch": values[0], "extra_graphs": len(smaller),
                        "events": [e.seq for e in where]})
    return Advice(
        f"{function}: the batch size (dim 0 of {s.name}) took {len(values)} values "
        f"({_listed(values)}) -> {graphs} graphs",
        "Every batch size compiles its own graph.",
        "use one batch size for every step (same per_device_train_batch_size, "
        "dataloader_drop_last=True)", "warning", {**nums, "extra_graphs": len(values) - 1})


def _cache_growth(function: str, group: list[_Series], graphs: int) -> Advice:
    s = group[0]
    values = s.distinct
    return Advice(
        f"{function}: the static cache length changed {_count(len(values) - 1, 'time')} "
        f"({_listed([v for _, v in s.values])}) -> {graphs} graphs",
        f"The cache length, {_names(group)}, took {len(values)} values: generate() sizes the "
        f"static cache from the prompt length + max_new_tokens, so each new prompt length "
        f"compiles a new decode graph.",
        "fix the cache length per bucket: nk.generate(..., buckets=...) gives every bucket one "
        "cache length (one decode graph per bucket); or keep one static cache of a fixed "
        "max_cache_len for all calls", "warning",
        {"function": function, "input": s.name, "dim": s.dim, "values": values,
         "distinct": len(values), "graphs": graphs})


def _dynamic_cache(function: str, groups: list[list[_Series]], graphs: int) -> Advice:
    values = groups[0][0].distinct
    names = ", ".join(f"{g[0].name} dim {g[0].dim}" for g in groups[:4])
    return Advice(
        f"{function}: a graph per generated token ({len(values)} values {_span(values)}, one "
        f"token apart) -> {graphs} graphs",
        f"{names} grew by one at every compile: the cache grows with each token (a dynamic "
        f"cache), so every decoding step has a new shape and compiles again.",
        "use a static cache: model.generate(..., cache_implementation='static') (nk.generate "
        "does this), so the decode step keeps one shape", "critical",
        {"function": function, "values": values, "distinct": len(values), "graphs": graphs,
         "inputs": [f"{g[0].name} dim {g[0].dim}" for g in groups]})


def _same_shapes(function: str, events: list[CompileEvent], graphs: int) -> Advice:
    reasons = [r for e in events if e.kind == "recompile" for r in e.reasons]
    first = short_reason(reasons[0], 120) if reasons else "no reason recorded"
    return Advice(
        f"{function}: {graphs} graphs without an input shape change",
        f"A guard other than a tensor shape failed; first reason: {first}.",
        "make that value constant between calls (a Python flag, int argument, dtype or module "
        "attribute in the guard), or pass it as a tensor", "warning",
        {"function": function, "graphs": graphs, "first_reason": first})


# -- whole-log findings ------------------------------------------------------------------------
def _limit_hits(function: str, events: list[CompileEvent]) -> list[Advice]:
    hits = [e for e in events if e.kind == "limit_hit"]
    if not hits:
        return []
    graphs = _graphs_per_rank(events)
    limit = _limit_value(hits) or graphs
    shapes = {json.dumps(e.input_shapes, sort_keys=True) for e in events if e.kind != "failed"}
    return [Advice(
        f"{function}: recompile limit hit {_count(len(hits), 'time')}: torch ran it eagerly, uncompiled",
        f"After {graphs} graphs torch stopped compiling `{function}` "
        f"(torch._dynamo.config.recompile_limit = {limit}) and ran {_count(len(hits), 'new shape')} in "
        f"eager mode without an error. On Neuron that is op-by-op execution: far slower, silently.",
        f"remove the shape change (pad to buckets, see the other findings), or raise "
        f"torch._dynamo.config.recompile_limit to at least {len(shapes)} (the shapes seen)",
        "critical", {"function": function, "limit_hits": len(hits), "graphs": graphs,
                     "recompile_limit": limit, "shapes_seen": len(shapes),
                     "events": [e.seq for e in hits]})]


def _limit_value(hits: list[CompileEvent]) -> int | None:
    """The recompile limit in force: the recorder's note, else torch's message."""
    for e in hits:
        note = e.metrics.get("limit")
        if isinstance(note, dict) and isinstance(note.get("value"), int):
            return note["value"]
        m = _LIMIT.search(" ".join(e.reasons) + json.dumps(e.metrics, default=str))
        if m:
            return int(m[1] or m[2])
    return None


def _failures(function: str, events: list[CompileEvent]) -> list[Advice]:
    failed = [e for e in events if e.kind == "failed"]
    if not failed:
        return []
    first = short_reason(failed[0].reasons[0], 160) if failed[0].reasons else "no reason recorded"
    return [Advice(
        f"{function}: {_count(len(failed), 'compile')} failed",
        f"First failure (event #{failed[0].seq}): {first}.",
        "read the failure above; run once without torch.compile to check the model, then "
        "retry with the compile backend's own logs (TORCH_LOGS=+dynamo)", "critical",
        {"function": function, "failed": len(failed), "events": [e.seq for e in failed]})]


def _ranks(events: list[CompileEvent]) -> list[Advice]:
    per_rank: dict[int, set[tuple[str, str]]] = defaultdict(set)
    for e in events:
        if e.kind in GRAPH_KINDS:
            per_rank[e.rank].add((e.function, json.dumps(e.input_shapes, sort_keys=True)))
        per_rank.setdefault(e.rank, set())
    if len(per_rank) < 2 or len({frozenset(s) for s in per_rank.values()}) == 1:
        return []
    common = set.intersection(*per_rank.values())
    counts = {r: len(s) for r, s in sorted(per_rank.items())}
    only = {r: sorted(s - common) for r, s in sorted(per_rank.items()) if s - common}
    detail = "; ".join(f"rank {r} alone compiled {len(x)}: " + ", ".join(f"{f} {sh}" for f, sh in x[:2])
                       + (", …" if len(x) > 2 else "") for r, x in only.items())
    return [Advice(
        "ranks compiled different graphs: " + ", ".join(f"rank {r}: {n}" for r, n in counts.items()),
        detail + ". A rank compiling a graph the others do not stalls them at the next collective.",
        "give every rank the same shapes: the same padding or buckets (padding='max_length'), the "
        "same per-device batch size and dataloader_drop_last=True", "warning",
        {"graphs_per_rank": counts, "only_on_rank": {r: len(x) for r, x in only.items()},
         "common": len(common)})]


def _compile_share(events: list[CompileEvent], wall: float | None) -> Advice:
    per_rank: dict[int, float] = defaultdict(float)
    for e in events:
        per_rank[e.rank] += e.duration_s
    total = max(per_rank.values(), default=0.0)  # ranks compile side by side
    nums: dict[str, Any] = {"compile_s": round(total, 3), "events": len(events)}
    if not wall:
        return Advice(f"compiling took {total:.2f} s over {_count(len(events), 'event')}",
                      "The run's wall time is unknown, so its share cannot be given.", "", "info", nums)
    share = total / wall
    nums.update(wall_s=round(wall, 3), share=round(share, 4))
    high = share > SHARE_WARNING
    return Advice(f"compile time is {share:.0%} of the run ({total:.1f} s of {wall:.1f} s)",
                  f"More than {SHARE_WARNING:.0%} of the wall time went into compiling." if high else "",
                  "compile fewer graphs (see the findings above) and keep the Neuron compile cache "
                  "between runs so repeated graphs load instead of compiling" if high else "",
                  "warning" if high else "info", nums)


def diagnose(log: CompileLog | Iterable[CompileEvent]) -> list[Advice]:
    """Findings for a compile log (or a list of events), most severe first."""
    if hasattr(log, "events"):
        events = list(log.events)
    elif isinstance(log, (list, tuple)) and all(isinstance(e, CompileEvent) for e in log):
        events = list(log)
    else:
        raise TypeError(f"diagnose() takes a CompileLog or a list of CompileEvent, got "
                        f"{type(log).__name__}; load a file with nk.CompileLog.load(path)")
    if not events:
        return [Advice("no compile events", "Nothing was compiled while recording: either no "
                       "torch.compile work ran, or every shape was already compiled.",
                       "", "info", {"events": 0})]
    by_function: dict[str, list[CompileEvent]] = defaultdict(list)
    for e in events:
        by_function[e.function].append(e)
    found: list[Advice] = []
    for function, evs in by_function.items():
        found += _limit_hits(function, evs) + _failures(function, evs) + _shape_findings(function, evs)
    found += _ranks(events)
    graphs = {f: _graphs_per_rank(evs) for f, evs in by_function.items()}
    if not found and all(n <= 1 for n in graphs.values()):
        found.append(Advice(
            "shapes are static: one graph per function",
            "Graphs: " + ", ".join(f"{f} {n}" for f, n in graphs.items()) + ". Nothing recompiled.",
            "", "info", {"graphs": graphs}))
    found.sort(key=lambda a: SEVERITIES.index(a.severity))
    # the timing finding comes last whatever its severity: it depends on the machine's speed,
    # so the shape findings above it keep their place from run to run
    return found + [_compile_share(events, getattr(log, "wall_time_s", None))]
