"""Findings that only native Neuron's compile path has: NEFF builds and eager-op kernels.

``diagnose()`` (diagnose.py) adds them; each reads the Neuron fields of the events (``neff_compile_s``,
``neff_cache``, ``kernels`` events) and says nothing when there are none.
"""
from __future__ import annotations

from collections import Counter

from neuronkit.advice.finding import Advice
from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import of_kind

__all__ = ["neff_findings", "kernel_findings"]


def neff_findings(events: list[CompileEvent]) -> list[Advice]:
    """How much of the compile time the neuronx-cc builds took, and how many the cache saved."""
    graphs = [e for e in of_kind(events, *GRAPH_KINDS) if e.neff_cache is not None]
    if not graphs:
        return []
    states = Counter(e.neff_cache for e in graphs)
    built = [e for e in graphs if e.neff_cache == "compiled"]
    neff = sum(float(e.neff_compile_s or 0.0) for e in built)
    dynamo = sum(e.duration_s for e in graphs)
    hits = states["disk_hit"] + states["memory_hit"]
    detail = (f"{len(built)} graph(s) were built by neuronx-cc ({neff:.1f} s, after Dynamo's "
              f"{dynamo:.1f} s of tracing and lowering); {states['disk_hit']} came from the NEFF "
              f"disk cache and {states['memory_hit']} from memory.")
    fix = ("keep the NEFF cache between runs ($TORCH_NEURONX_NEFF_CACHE_DIR on a persistent disk, "
           "the same NEURON_CC_FLAGS: they are part of every key) and compile fewer shapes"
           if built and neff > dynamo else "")
    return [Advice(f"NEFF builds took {neff:.1f} s for {len(built)} graph(s); {hits} cache hit(s)",
                   detail, fix, "warning" if fix else "info",
                   {"neff_s": round(neff, 3), "built": len(built), "disk_hits": states["disk_hit"],
                    "memory_hits": states["memory_hit"], "dynamo_s": round(dynamo, 3)})]


def kernel_findings(events: list[CompileEvent]) -> list[Advice]:
    """Eager-op kernels: how many, which ops, where (measured on Neuron, or a CPU forecast)."""
    found = []
    for forecast in (False, True):
        rows = [e for e in of_kind(events, "kernels") if e.forecast is forecast]
        if not rows:
            continue
        total = sum(e.kernels for e in rows)
        ops: Counter[str] = Counter()
        for e in rows:
            ops.update(e.ops)
        top = ", ".join(f"{op} {n}" for op, n in ops.most_common(4))
        busiest = max(rows, key=lambda e: e.kernels)
        what = ("forecast on CPU: what native Neuron would compile" if forecast
                else "compiled on Neuron")
        detail = (f"{total} eager-op kernel(s) {what} outside any compiled graph, over "
                  f"{len(rows)} safe point(s); most at {busiest.context or 'an unlabelled point'} "
                  f"({busiest.kernels}). Ops: {top}.")
        fix = ("each new input shape of code that runs eagerly (generate()'s prefill, "
               "pre/post-processing) compiles a kernel per op: pad prompts to a few buckets "
               "(nk.generate(..., buckets=...)) and warm each bucket up once before serving")
        seconds = sum(e.duration_s for e in rows)
        found.append(Advice(f"{total} eager kernel(s) {'forecast' if forecast else 'compiled'}"
                            + (f" ({seconds:.1f} s)" if seconds else ""), detail, fix,
                            "warning" if len(rows) > 1 else "info",
                            {"kernels": total, "safe_points": len(rows), "forecast": forecast,
                             "ops": dict(ops.most_common())}))
    return found
