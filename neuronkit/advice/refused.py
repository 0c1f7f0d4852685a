"""The finding for graphs Neuron would refuse: compiled here with symbolic shapes, under Neuron's
rules (``nk.CompileRecorder(as_neuron=True)``, ``neuronkit record --as-neuron``), which flag such
a graph's event with ``metrics["refused_on_neuron"]`` (``sources/neuron_rules.py``). One finding
per function, naming its graphs."""
from __future__ import annotations

from collections import defaultdict

from neuronkit.advice.excerpts import cut_long
from neuronkit.advice.finding import Advice
from neuronkit.advice.wording import count
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import function_labels

__all__ = ["REFUSED", "refused_findings"]

REFUSED = "refused_on_neuron"
# The neuron backend runs DynamicShapeAnalysis before AOTAutograd (torch-neuronx snapshot
# ndb/backend.py:299, ndb/fx/pipelines/preprocessing_pipeline.py:38), which raises RuntimeError
# "Dynamic shapes detected ..." for any symbol of the graph's ShapeEnv
# (ndb/fx/passes/dynamic_shape_analysis.py:59-64,95-118); the backend forces dynamic=False
# (ndb/backend.py:295-298).
_FIX = ("compile with static shapes: drop dynamic=True from torch.compile and any "
        "torch._dynamo.mark_dynamic call, and pad inputs to a few fixed shapes (nk.Buckets, "
        "nk.FixedLengthCollator); each shape is then a graph of its own")


def _why(e: CompileEvent) -> str | None:
    """The event's reason, when it was flagged (text from a log: a string only)."""
    why = e.metrics.get(REFUSED) if isinstance(e.metrics, dict) else None
    return cut_long(why) if isinstance(why, str) and why else None


def refused_findings(events: list[CompileEvent]) -> list[Advice]:
    """One critical finding per function with graphs Neuron would refuse (symbolic shapes)."""
    flagged = [e for e in events if _why(e) is not None]
    if not flagged:
        return []
    labels = function_labels(events)
    by_function: dict[str, list[CompileEvent]] = defaultdict(list)
    for e in flagged:
        by_function[labels[e.function, e.location]].append(e)
    found = []
    for function, evs in by_function.items():
        reasons = list(dict.fromkeys(str(_why(e)) for e in evs))
        found.append(Advice(
            f"{function}: {count(len(evs), 'graph')} would fail on Neuron (symbolic shapes)",
            f"Compiled here with symbolic shapes: {reasons[0]}. torch-neuronx's neuron backend "
            "checks each graph for symbolic shapes and raises \"Dynamic shapes detected\" "
            "instead of compiling it (read in its source, not run on Trainium), so the run "
            "would stop at the first one "
            f"(compile ids {', '.join(e.compile_id or '?' for e in evs[:5])}"
            f"{', ...' if len(evs) > 5 else ''}).",
            _FIX, "critical",
            {"function": function, "graphs": len(evs), "reasons": reasons,
             "events": [e.seq for e in evs]}))
    return found
