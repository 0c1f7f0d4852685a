"""Does ``nk.generate`` hold on a model family? One tiny model of a ``model_type``, checked.

    outcome = check_family("qwen3")     # FamilyOutcome(outcome="holds", graphs=4, ...)

The reference is plain ``model.generate`` on each prompt alone (no padding, nothing compiled,
transformers' default cache); then ``nk.generate`` runs the same prompts in buckets, compiled
(backend ``eager``: Dynamo's graphs, run by torch itself, so a check takes seconds on CPU). It
*holds* when every prompt's tokens match and the graphs stay within the plan.
:func:`markdown_report` writes a table of outcomes (``bench/families.py``: every type).
"""
from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neuronkit.examples.any_family import NotATextDecoder, TinyBuildError, first_line, tiny_causal_lm
from neuronkit.workloads.generate_eager import is_uncompiled

__all__ = ["MEANINGS", "OUTCOMES", "SIX_PROMPTS", "FamilyOutcome", "check_family", "markdown_report"]

MEANINGS: dict[str, str] = {
    "holds": "every prompt's tokens equal plain model.generate's, graphs within the plan",
    "refused": "nk.generate said no and why, before generating or after probing the model",
    "differs": "nk.generate ran, but some prompt's tokens differ from plain model.generate's",
    "unbounded": "more graphs than planned, or torch's recompile limit hit: eager fallback",
    "crashes": "an error nk.generate did not turn into a refusal, or plain generate failed",
    "not a text decoder": "the model does not continue text from input_ids alone",
    "cannot be built tiny": "no tiny model of the type could be built from its config",
}
OUTCOMES: tuple[str, ...] = tuple(MEANINGS)
# Token lengths with the embedded tokenizer: 5, 9, 14 (bucket 16); 18, 25, 29 (bucket 32).
SIX_PROMPTS: tuple[str, ...] = (
    "Hello there",
    "The cat sat on the mat.",
    "The old dog slept by the fire.",
    "Rain fell on the quiet hills all night long.",
    "Once upon a time, a small robot wanted to paint the sea.",
    "Keep shapes static and the compiler builds few graphs.",
)
REASON_CHARS = 160


@dataclass(frozen=True)
class FamilyOutcome:
    """What became of one ``model_type``: ``outcome`` is one of :data:`OUTCOMES`."""

    model_type: str
    model_class: str
    outcome: str
    reason: str = ""
    graphs: int = 0
    planned_graphs: int = 0
    seconds: float = 0.0


def _first_sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    cut = text.find(". ")
    return text[:cut + 1] if cut >= 0 else text


def _refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is neuronkit saying no: its own error type, or a ValueError/TypeError
    raised in neuronkit's code with no transformers or torch frame under it (before generating)."""
    from neuronkit.workloads.static_cache import UnboundedCacheError

    if isinstance(exc, UnboundedCacheError):
        return True
    if not isinstance(exc, (ValueError, TypeError)):
        return False
    if type(exc).__module__.startswith("neuronkit"):
        return True
    files = [f.filename.replace("\\", "/") for f in traceback.extract_tb(exc.__traceback__)]
    inner = [f for f in files if "/neuronkit/" in f or "/transformers/" in f or "/torch/" in f]
    return bool(inner) and "/neuronkit/" in inner[-1] and not any(
        "/transformers/" in f or "/torch/" in f for f in inner)


def _cut_at_eos(ids: list[int], eos: int, start: int) -> list[int]:
    """``ids`` up to and including the first eos after the prompt (``start``)."""
    for k in range(start, len(ids)):
        if ids[k] == eos:
            return ids[:k + 1]
    return ids


def _reference(model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int) -> list[list[int]]:
    """Plain greedy ``model.generate`` of each prompt alone: prompt + new tokens, cut at eos."""
    import torch

    out = []
    for prompt in prompts:
        enc = tokenizer(prompt, return_tensors="pt")
        with torch.no_grad():
            ids = model.generate(enc["input_ids"], attention_mask=enc["attention_mask"],
                                 max_new_tokens=max_new_tokens, do_sample=False)
        ids = ids.sequences if hasattr(ids, "sequences") else ids
        out.append(_cut_at_eos(ids[0].tolist(), tokenizer.eos_token_id, enc["input_ids"].shape[1]))
    return out


def _compare(reference: list[list[int]], result: Any, tokenizer: Any) -> str:
    """'' when every prompt's tokens match, else which prompt and where they first differ."""
    for i, want in enumerate(reference):
        got = result.output_ids[i]
        got = [] if got is None else _cut_at_eos(got.tolist(), tokenizer.eos_token_id, 0)
        if got != want:
            pairs = enumerate(zip(got, want, strict=False))
            at = next((k for k, (a, b) in pairs if a != b), min(len(got), len(want)))
            return (f"prompt {i}: tokens differ from plain model.generate at position {at} "
                    f"({len(got)} vs {len(want)} tokens)")
    return ""


def _unbounded(result: Any) -> str:
    """'' when the call stayed within its plan, else what went past it."""
    over = [e.kind for e in result.events if e.kind in ("limit_hit", "eager_fallback")
            and not is_uncompiled(e)]   # a forward transformers never compiled: result.eager_reason
    if result.graphs > result.planned_graphs:
        return f"{result.graphs} graphs compiled, {result.planned_graphs} planned"
    if over or result.eager_calls:
        return f"recompile limit: {len(over)} {'/'.join(sorted(set(over))) or 'limit'} events, " \
               f"{result.eager_calls} forward calls ran eager ({result.eager_prefills} prefill)"
    return ""


def _run_checked(model: Any, tokenizer: Any, prompts: Sequence[str], buckets: Sequence[int],
                 batch_size: int, max_new_tokens: int) -> tuple[str, str, int, int]:
    """(outcome, reason, graphs, planned) of the reference and the ``nk.generate`` call."""
    import torch

    from neuronkit.workloads.generation import generate

    try:
        reference = _reference(model, tokenizer, prompts, max_new_tokens)
    except Exception as exc:
        return "crashes", f"plain model.generate: {first_line(exc)}", 0, 0
    torch._dynamo.reset()
    try:
        result = generate(model, tokenizer, list(prompts), max_new_tokens=max_new_tokens,
                          buckets=list(buckets), batch_size=batch_size, backend="eager")
    except Exception as exc:
        if _refusal(exc):
            return "refused", _first_sentence(exc), 0, 0
        return "crashes", first_line(exc), 0, 0
    graphs, planned = result.graphs, result.planned_graphs
    differs, unbounded = _compare(reference, result, tokenizer), _unbounded(result)
    if differs:
        return "differs", differs + (f"; also {unbounded}" if unbounded else ""), graphs, planned
    if unbounded:
        return "unbounded", unbounded, graphs, planned
    eager = getattr(result, "eager_reason", "")
    return "holds", (f"ran eager, not compiled: {eager}" if eager else ""), graphs, planned


def check_family(model_type: str, *, tokenizer: Any = None, prompts: Sequence[str] = SIX_PROMPTS,
                 buckets: Sequence[int] = (16, 32), batch_size: int = 2,
                 max_new_tokens: int = 8) -> FamilyOutcome:
    """Build a tiny ``model_type`` and compare ``nk.generate`` with plain ``model.generate``."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from neuronkit.setup.models import load_tokenizer

    t0 = time.perf_counter()
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer()
    name = str(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, "?"))

    def outcome(kind: str, reason: str, graphs: int = 0, planned: int = 0) -> FamilyOutcome:
        return FamilyOutcome(model_type, name, kind, reason, graphs, planned,
                             round(time.perf_counter() - t0, 2))

    try:
        model = tiny_causal_lm(model_type, tokenizer)
    except NotATextDecoder as exc:
        return outcome("not a text decoder", exc.reason)
    except TinyBuildError as exc:
        return outcome("cannot be built tiny", exc.reason)
    name = type(model).__name__
    try:
        return outcome(*_run_checked(model, tokenizer, prompts, buckets, batch_size, max_new_tokens))
    except Exception as exc:  # anything the steps above did not expect
        return outcome("crashes", first_line(exc))


def _cell(text: Any) -> str:
    """A Markdown table cell: first line, at most :data:`REASON_CHARS` characters, ``|`` escaped."""
    lines = str(text).strip().splitlines()
    line = " ".join(lines[0].split()) if lines else ""
    if len(line) > REASON_CHARS:
        line = line[:REASON_CHARS - 1] + "…"
    return line.replace("|", "\\|")


def _order(row: FamilyOutcome) -> tuple[int, str]:
    rank = OUTCOMES.index(row.outcome) if row.outcome in OUTCOMES else len(OUTCOMES)
    return rank, row.model_type


def markdown_report(rows: Sequence[FamilyOutcome], *, versions: Mapping[str, str], date: str,
                    settings: Mapping[str, Any]) -> str:
    """The family matrix as Markdown: title, versions, date, settings, totals per outcome, and a
    table sorted by outcome then type."""
    totals = {o: sum(r.outcome == o for r in rows) for o in OUTCOMES}
    totals.update({r.outcome: sum(x.outcome == r.outcome for x in rows) for r in rows})
    out = ["# nk.generate on every causal-LM family of transformers", "",
           ", ".join(f"{k} {v}" for k, v in versions.items()) + f"; run {date}.", ""]
    out += [f"- {_cell(k)}: {_cell(v)}" for k, v in settings.items()]
    out += ["", f"{len(rows)} model types:", ""]
    out += [f"- {o}: {n}" + (f" — {MEANINGS[o]}" if o in MEANINGS else "") for o, n in totals.items()]
    out += ["", "| type | class | outcome | graphs/planned | reason |", "|---|---|---|---|---|"]
    for r in sorted(rows, key=_order):
        out.append(f"| {_cell(r.model_type)} | {_cell(r.model_class)} | {_cell(r.outcome)} | "
                   f"{r.graphs}/{r.planned_graphs} | {_cell(r.reason)} |")
    return "\n".join(out) + "\n"


def outcome_rows(rows: Sequence[FamilyOutcome]) -> list[dict[str, Any]]:
    """The rows as plain dicts (for JSON), in the report's order."""
    return [dataclasses.asdict(r) for r in sorted(rows, key=_order)]
