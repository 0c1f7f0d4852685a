"""Findings that only native Neuron's compile path has: NEFF builds and eager-op kernels.

``diagnose()`` (diagnose.py) adds them; each reads the Neuron fields of the events (``neff_compile_s``,
``neff_cache``, ``kernels`` events) and says nothing when there are none.
"""
from __future__ import annotations

from collections import Counter

from neuronkit.advice.finding import Advice
from neuronkit.events.event import BUILD_KINDS, CompileEvent
from neuronkit.events.facts import number, of_kind
from neuronkit.log.shared_cache import waited_for

__all__ = ["fallback_findings", "kernel_findings", "neff_findings", "sync_mode_findings"]


def neff_findings(events: list[CompileEvent]) -> list[Advice]:
    """How much of the compile time the neuronx-cc builds took, and where the other NEFFs came
    from. A disk hit is stored with 0 ms whether it was read at once or waited for another
    process's build under its lock: torch-neuronx does not tell which, so it is not a saving."""
    graphs = [e for e in of_kind(events, *BUILD_KINDS) if e.neff_cache is not None]
    if not graphs:
        return []
    waited = [e for e in graphs if e.neff_cache == "disk_hit" and waited_for(e)]
    states = Counter(e.neff_cache for e in graphs if e not in waited)
    built = [e for e in graphs if e.neff_cache == "compiled"]
    neff = sum(float(e.neff_compile_s or 0.0) for e in built)
    dynamo = sum(e.duration_s for e in graphs)
    backward = sum(1 for e in built if e.kind == "backward")
    detail = (f"{len(built)} graph(s) were built by neuronx-cc ({neff:.1f} s, after Dynamo's "
              f"{dynamo:.1f} s of tracing and lowering"
              + (f"; {backward} of them backward graphs, built at the first .backward()"
                 if backward else "") + f"); {states['memory_hit']} came from memory")
    if states["disk_hit"]:
        detail += (f" and {states['disk_hit']} were loaded from the NEFF disk cache or waited "
                   "for another process's build (torch-neuronx records 0 s for both, so their "
                   "wait is not known)")
    if waited:
        wait_s = sum(float(number((waited_for(e) or {}).get("wait_s")) or 0.0) for e in waited)
        detail += (f"; {len(waited)} waited {wait_s:.1f} s in all under the lock for another "
                   "rank's build of the same NEFF (counted once, as that rank's build)")
    fix = ("keep the NEFF cache between runs ($TORCH_NEURONX_NEFF_CACHE_DIR on a persistent disk, "
           "the same NEURON_CC_FLAGS: they are part of every key) and compile fewer shapes"
           if built and neff > dynamo else "")
    where = [f"{n} {word}" for n, word in ((states["memory_hit"], "in memory"),
                                            (states["disk_hit"], "loaded or waited")) if n]
    return [Advice(f"NEFF builds took {neff:.1f} s for {len(built)} graph(s)"
                   + (f"; {', '.join(where)}" if where else ""), detail + ".", fix,
                   "warning" if fix else "info",
                   {"neff_s": round(neff, 3), "built": len(built), "disk_hits": states["disk_hit"],
                    "memory_hits": states["memory_hit"], "dynamo_s": round(dynamo, 3),
                    "backward_built": backward, "waited": len(waited)})]


def fallback_findings(events: list[CompileEvent]) -> list[Advice]:
    """Eager ops that ran on CPU on Neuron. Most have no Neuron kernel: torch-neuronx runs them
    on CPU with no compile at all (``csrc/core/NeuronBindings.cpp:232-246,483-484``,
    ``python_ops/base.py:763-829``); a few fell back after their Neuron compile or run failed
    (``csrc/core/utils/ErrorRecovery.cpp:40-63``), which ``NEURON_FALLBACK_ENABLED=0`` turns into
    an error. ``get_fallback_ops()`` does not say which."""
    rows = of_kind(events, "cpu_fallback")
    if not rows:
        return []
    ops = sorted({op for e in rows for op in e.ops})
    first = rows[0].context or "an unlabelled point"
    detail = (f"{', '.join(ops)} ran on CPU (first seen at {first}): torch-neuronx has no Neuron "
              "kernel for most such ops and runs them on CPU without compiling; each call copies "
              "the op's tensors from the device to the host and back, and waits for the device "
              "first. Less often an op lands here because its Neuron compile or run failed.")
    fix = ("run that step on CPU yourself before moving its tensors to the device, or write it "
           "with ops Neuron has (torch-neuronx prints a one-time warning naming each op without "
           "a kernel); to tell a failed compile apart, run once with NEURON_FALLBACK_ENABLED=0 "
           "(it raises only for those) and TORCH_NEURONX_ENABLE_STACK_TRACE=1")
    return [Advice(f"{len(ops)} eager op(s) run on CPU, a device-to-host copy each call", detail,
                   fix, "warning", {"ops": ops, "safe_points": len(rows)})]


def sync_mode_findings(events: list[CompileEvent]) -> list[Advice]:
    """Said once: what a log recorded in sync mode (``NEURON_LAUNCH_BLOCKING=1``, the RELEASE
    build's default, ``tn/_build_config.py:7-11``) cannot show."""
    sync_kernels = [e for e in of_kind(events, "kernels") if e.metrics.get("sync_mode")]
    in_dynamo = [e for e in of_kind(events, *BUILD_KINDS) if e.neff_in_duration]
    if not sync_kernels and not in_dynamo:
        return []
    unseen = []
    if in_dynamo:
        unseen.append("each graph's neuronx-cc build ran inside Dynamo's compile time (the NEFF "
                      "seconds are part of it, not added to it)")
    if sync_kernels:
        most = sum(int(number(e.metrics.get("compiled")) or 0) for e in sync_kernels)
        unseen.append(f"eager-op kernels compiled in Python: their build times are not recorded, "
                      f"and built or read from the NEFF disk cache is known only as a bound (at "
                      f"most {most} built)")
    return [Advice("Recorded in sync mode (NEURON_LAUNCH_BLOCKING=1): what this log cannot show",
                   "; ".join(unseen) + ".",
                   "to see eager kernel build times, record once with NEURON_LAUNCH_BLOCKING=0 "
                   "(async: kernels go through the C++ compilation cache)", "info",
                   {"sync_kernels": len(sync_kernels), "graphs_in_dynamo": len(in_dynamo)})]


def kernel_findings(events: list[CompileEvent]) -> list[Advice]:
    """Eager-op kernels: how many, which ops, where (measured on Neuron, or a CPU forecast)."""
    found = []
    for forecast in (False, True):
        rows = [e for e in of_kind(events, "kernels") if e.forecast is forecast]
        if not rows:
            continue
        total = sum(e.kernels for e in rows)
        loaded = sum(int(number(e.metrics.get("loaded")) or 0) for e in rows)
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
        done = ("forecast" if forecast else f"new: {total - loaded} compiled, {loaded} loaded "
                "or waited" if loaded else "compiled")
        found.append(Advice(f"{total} eager kernel(s) {done}"
                            + (f" ({seconds:.1f} s)" if seconds else ""), detail, fix,
                            "warning" if len(rows) > 1 else "info",
                            {"kernels": total, "safe_points": len(rows), "forecast": forecast,
                             "ops": dict(ops.most_common())}))
    return found
