"""Plain-language findings about a compile log: what recompiled, why, and what to change.

    for advice in nk.diagnose(rec.log):
        print(advice)

Each finding names the numbers behind it (``Advice.numbers``) and one concrete fix. Findings are
ordered critical -> warning -> info, the compile-time share always last. The analysis reads only
the events: the input shapes of every graph, the guard-failure reasons, the kind, the rank and the
durations. Functions are told apart by name and place (``forward (modeling_qwen3.py:440)``), and
counts in a merged log are per rank. Which input dimensions varied: advice_shapes.py.
"""
from __future__ import annotations

import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

from .advice_neuron import kernel_findings, neff_findings
from .advice_shapes import CALLS_PER_LENGTH, Series, consecutive, graphs_of, graphs_per_rank, groups, \
    is_generation, limit_value, per_rank, plan, scalar_guards, series
from ._torch_text import short_reason
from .events import (GRAPH_KINDS, CompileEvent, CompileLog, as_events, function_labels, neff_seconds,
                     shape_key)

__all__ = ["Advice", "SEVERITIES", "Severity", "diagnose"]

Severity = Literal["info", "warning", "critical"]
SEVERITIES: tuple[str, ...] = ("critical", "warning", "info")
SHARE_WARNING = 0.20  # compile time above this share of the run is a warning

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


def _span(values: list[int]) -> str:
    return f"{min(values)}..{max(values)}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _listed(values: list[Any], most: int = 12) -> str:
    shown = ", ".join(str(v) for v in values[:most])
    return shown + (f", … ({len(values) - most} more)" if len(values) > most else "")


def _names(group: list[Series]) -> str:
    head = f"{group[0].name} dim {group[0].dim}"
    rest = [f"{s.name} dim {s.dim}" for s in group[1:]]
    if len(rest) > 2:
        rest = [rest[0], f"{len(rest) - 1} more alike"]
    return head + (f" (with {' and '.join(rest)})" if rest else "")


def _shape_findings(function: str, events: list[CompileEvent]) -> list[Advice]:
    """What varied between the graphs of one function (``function``: its label)."""
    shaped = [e for e in events if e.kind in (*GRAPH_KINDS, "limit_hit")]
    varied = series(shaped)
    graphs = graphs_of(events)
    generation = is_generation(events[0].function, shaped, varied)
    found: list[Advice] = []
    grouped = groups(varied, {i for i, e in enumerate(shaped) if e.kind in GRAPH_KINDS})
    per_token = [g for g in grouped if g[0].role == "cache" and consecutive(g[0].distinct)]
    if per_token:  # a cache growing per token drags the masks and positions along
        per_token += [g for g in grouped if generation and g[0].role == "length"
                      and consecutive(g[0].distinct)]
    for group in grouped:
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
    found += _python_scalars(function, shaped, graphs)
    if not found and graphs > 1:
        found.append(_same_shapes(function, events, graphs))
    return found


def _buckets(function: str, group: list[Series], events: list[CompileEvent],
             graphs: int) -> Advice:
    values = group[0].distinct
    buckets = plan([v for _, v in group[0].values])
    eager = max(per_rank([e for e in events if e.kind == "limit_hit"]).values(), default=0)
    title = (f"{function}: {_names(group)} took {len(values)} values ({_span(values)}) "
             f"-> {_count(graphs, 'graph')}" + (f" + {eager} run eagerly" if eager else ""))
    detail = (f"Every distinct value compiled its own graph of `{function}`: {_listed(values)}. "
              f"On Neuron each graph is a separate neuronx-cc compile (minutes each). "
              f"Suggested buckets (nk.plan_buckets, each length assumed to recur "
              f"{CALLS_PER_LENGTH} times): {buckets} -> at most {_count(len(buckets), 'graph')}.")
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
        "buckets": buckets})


def _batch_change(function: str, group: list[Series], events: list[CompileEvent],
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


def _cache_growth(function: str, group: list[Series], graphs: int) -> Advice:
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


def _dynamic_cache(function: str, groups: list[list[Series]], graphs: int) -> Advice:
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


def _python_scalars(function: str, events: list[CompileEvent], graphs: int) -> list[Advice]:
    """A guard ``name == value`` whose value grew by one at every compile: a Python int that
    changes per call, baked into the graph (a sliding-window cache's fill level, a step count)."""
    found = []
    for name, values in scalar_guards(events).items():
        distinct = sorted(set(values))
        if not consecutive(distinct):
            continue
        if "cumulative_length_int" in name:
            fix = ("this is a sliding-window static cache (StaticSlidingWindowLayer keeps its fill "
                   "level in a Python int): generate with nk.generate(...), which gives those "
                   "layers full-length static layers, so the tokens stay the same and each bucket "
                   "compiles one decode graph")
        else:
            fix = ("keep that value out of the compiled code: pass it as a tensor or make it "
                   "constant between calls")
        found.append(Advice(
            f"{function}: one graph per step: {name} is a Python int in the compiled code "
            f"({len(distinct)} values {_span(distinct)}) -> {_count(graphs, 'graph')}",
            f"Dynamo guards on `{name} == <value>`, and the value grew by one at every compile "
            f"({_listed(values)}): each call has a new value, so each call compiles again until "
            "the recompile limit, then runs eagerly.", fix, "critical",
            {"function": function, "name": name, "values": distinct, "distinct": len(distinct),
             "graphs": graphs}))
    return found


def _same_shapes(function: str, events: list[CompileEvent], graphs: int) -> Advice:
    reasons = [r for e in events if e.kind == "recompile" for r in e.reasons]
    first = short_reason(reasons[0], 120) if reasons else "no reason recorded"
    nums = {"function": function, "graphs": graphs, "first_reason": first}
    inputs = {tuple(sorted(e.input_shapes)) for e in events if e.kind in GRAPH_KINDS}
    if len(inputs) > 1:  # one code object called with other arguments: a shared wrapper
        return Advice(
            f"{function}: {graphs} graphs for different arguments",
            f"`{function}` was called with {len(inputs)} different sets of inputs, each a graph "
            f"of its own; first reason: {first}.", "expected for a wrapper or decorator that "
            "several functions share (each caller gets its graph, once); otherwise pass the same "
            "arguments on every call", "warning", {**nums, "input_sets": len(inputs)})
    return Advice(
        f"{function}: {graphs} graphs without an input shape change",
        f"A guard other than a tensor shape failed; first reason: {first}.",
        "make that value constant between calls (a Python flag, int argument, dtype or module "
        "attribute in the guard), or pass it as a tensor", "warning", nums)


# -- counted per rank: a merged log holds every rank's events ----------------------------------
def _on_ranks(events: list[CompileEvent], ranks: list[int]) -> tuple[int, str, dict[int, int]]:
    """The count to quote (the most on one rank), how to say it, and the counts per rank:
    ``""`` for one rank, ``" on each of 2 ranks"``, or ``" (rank 0: 3, rank 1: 1)"``."""
    counts = per_rank(events, ranks)
    n = max(counts.values(), default=0)
    if len(counts) < 2:
        return n, "", counts
    if len(set(counts.values())) == 1:
        return n, f" on each of {len(counts)} ranks", counts
    return n, " (" + ", ".join(f"rank {r}: {c}" for r, c in counts.items()) + ")", counts


# -- limit hits, failures, graph breaks --------------------------------------------------------
def _limit_hits(function: str, events: list[CompileEvent], ranks: list[int]) -> list[Advice]:
    hits = [e for e in events if e.kind == "limit_hit"]
    if not hits:
        return []
    n, on, counts = _on_ranks(hits, ranks)
    graphs = graphs_per_rank(events)
    limit = limit_value(hits) or graphs
    eager = [e for e in events if e.kind == "eager_fallback"]
    if eager:  # neuronkit drove the calls: it counted every one that ran eager
        shapes = graphs + len(_shapes(eager))
        calls = sum(e.calls for e in eager)
        ran = f"ran {_count(calls, 'call')} of {_count(len(_shapes(eager)), 'shape')}"
        needed = f"to {shapes} (its graphs plus the shapes that ran eager)"
    else:  # later eager calls leave no record: the shapes seen are a lower bound
        shapes = max(graphs + 1, len(_shapes([e for e in events if e.kind != "failed"])))
        calls = None
        ran = f"ran {_count(n, 'new shape')} (at least)"
        needed = (f"to at least {shapes} (the graphs plus the shape refused; later eager calls "
                  "leave no record)")
    return [Advice(
        f"{function}: recompile limit hit {_count(n, 'time')}{on}: torch ran it eagerly, "
        "uncompiled",
        f"After {graphs} graphs torch stopped compiling `{function}` "
        f"(torch._dynamo.config.recompile_limit = {limit}) and {ran} in eager mode without an "
        f"error. On Neuron that is op-by-op execution: far slower, silently.",
        f"remove the shape change (pad to buckets, see the other findings), or raise "
        f"torch._dynamo.config.recompile_limit {needed}",
        "critical", {"function": function, "limit_hits": n, "graphs": graphs,
                     "recompile_limit": limit, "shapes_seen": shapes, "eager_calls": calls,
                     "exact": bool(eager), "per_rank": counts, "events": [e.seq for e in hits]})]


def _shapes(events: list[CompileEvent]) -> set[str]:
    return {shape_key(e) for e in events}


def _why(e: CompileEvent) -> str:
    """A failed compile's reason: the recorder's, else the first line of torch's message."""
    dynamo = e.metrics.get("dynamo") if isinstance(e.metrics, dict) else None
    text = e.reasons[0] if e.reasons else str((dynamo or {}).get("fail_reason") or "")
    return text.strip().splitlines()[0] if text.strip() else "no reason recorded"


def is_graph_break(e: CompileEvent) -> bool:
    """A failed compile that is a graph break (torch's ``Unsupported``): Dynamo met code it
    cannot trace and ran the function eagerly. Other failures are errors."""
    dynamo = e.metrics.get("dynamo") if isinstance(e.metrics, dict) else None
    return (e.kind == "failed" and isinstance(dynamo, dict)
            and dynamo.get("fail_type") == "Unsupported")


def _failures(function: str, events: list[CompileEvent], ranks: list[int]) -> list[Advice]:
    failed = [e for e in events if e.kind == "failed" and not is_graph_break(e)]
    if not failed:
        return []
    n, on, counts = _on_ranks(failed, ranks)
    return [Advice(
        f"{function}: {_count(n, 'compile')} failed{on}",
        f"First failure (event #{failed[0].seq}): {short_reason(_why(failed[0]), 160)}.",
        "read the failure above; run once without torch.compile to check the model, then "
        "retry with the compile backend's own logs (TORCH_LOGS=+dynamo)", "critical",
        {"function": function, "failed": n, "per_rank": counts, "events": [e.seq for e in failed]})]


def _graph_breaks(events: list[CompileEvent], labels: dict[tuple[str, str], str],
                  ranks: list[int]) -> list[Advice]:
    breaks = [e for e in events if is_graph_break(e)]
    if not breaks:
        return []
    n, on, counts = _on_ranks(breaks, ranks)
    where: dict[str, list[str]] = {}  # reason -> the functions it broke, in order
    for e in breaks:
        names = where.setdefault(short_reason(_why(e), 80), [])
        if labels[e.function, e.location] not in names:
            names.append(labels[e.function, e.location])
    functions = [f for names in where.values() for f in names]
    return [Advice(
        f"graph breaks: {_count(n, 'function')} ran eagerly{on}",
        "Dynamo met a call it cannot trace, could not resume after it, and ran the whole "
        "function eagerly; the code it calls still compiles, as separate graphs, so the model "
        "runs as several graphs with eager code between them. What broke: "
        + "; ".join(f"{reason}: {', '.join(names)}" for reason, names in where.items()) + ".",
        "expected with FSDP: its hooks are marked torch._dynamo.disable ('function marked as "
        "skipped', `disable`) and break the graph around every layer. Otherwise remove the "
        "unsupported call from the compiled code or move it out of the compiled function "
        "(TORCH_LOGS=graph_breaks shows each break)", "warning",
        {"graph_breaks": n, "per_rank": counts, "functions": functions,
         "reasons": where, "events": [e.seq for e in breaks]})]


def _ranks(events: list[CompileEvent], labels: dict[tuple[str, str], str]) -> list[Advice]:
    seen: dict[int, set[tuple[str, str]]] = defaultdict(set)
    for e in events:
        if e.kind in GRAPH_KINDS:
            seen[e.rank].add((labels[e.function, e.location],
                               shape_key(e)))
        seen.setdefault(e.rank, set())
    if len(seen) < 2 or len({frozenset(s) for s in seen.values()}) == 1:
        return []
    common = set.intersection(*seen.values())
    counts = {r: len(s) for r, s in sorted(seen.items())}
    only = {r: sorted(s - common) for r, s in sorted(seen.items()) if s - common}
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
    seconds: dict[int, float] = defaultdict(float)
    for e in events:
        seconds[e.rank] += e.total_s  # Dynamo + the NEFF build on Neuron
    total = max(seconds.values(), default=0.0)  # ranks compile side by side
    nums: dict[str, Any] = {"compile_s": round(total, 3), "events": len(events)}
    neff = neff_seconds(events)
    if neff:
        nums["neff_s"] = round(neff, 3)
    if not wall:
        return Advice(f"compiling took {total:.2f} s over {_count(len(events), 'event')}"
                      + (f" (of which {neff:.1f} s NEFF builds)" if neff else ""),
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
    events = as_events(log)
    if not events:
        return [Advice("no compile events", "Nothing was compiled while recording: either no "
                       "torch.compile work ran, or every shape was already compiled.",
                       "", "info", {"events": 0})]
    labels = function_labels(events)
    by_function: dict[str, list[CompileEvent]] = defaultdict(list)
    for e in events:
        by_function[labels[e.function, e.location]].append(e)
    ranks = sorted({e.rank for e in events})
    found = _graph_breaks(events, labels, ranks)
    for function, evs in by_function.items():
        found += (_limit_hits(function, evs, ranks) + _failures(function, evs, ranks)
                  + _shape_findings(function, evs))
    found += _ranks(events, labels) + neff_findings(events) + kernel_findings(events)
    graphs = {f: graphs_per_rank(evs) for f, evs in by_function.items()}
    if not found and all(n <= 1 for n in graphs.values()):
        found.append(Advice(
            "shapes are static: one graph per function",
            "Graphs: " + ", ".join(f"{f} {n}" for f, n in graphs.items()) + ". Nothing recompiled.",
            "", "info", {"graphs": graphs}))
    found.sort(key=lambda a: SEVERITIES.index(a.severity))
    # the timing finding comes last whatever its severity: it depends on the machine's speed,
    # so the shape findings above it keep their place from run to run
    return found + [_compile_share(events, getattr(log, "wall_time_s", None))]
