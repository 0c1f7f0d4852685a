"""Past the recompile limit every forward call that ran eager is counted, the prefill's too.

With the prefill compiled, ``nk.generate``'s prefill and decode step share one code object, so
once it hits ``torch._dynamo.config.recompile_limit`` both run eager for every new shape:
``result.eager_calls`` (the total), ``result.eager_prefills``, the ``eager_fallback`` events
(``metrics["phase"]``) and the advice tell them apart. A hook on the embeddings counts the
uncompiled forward calls independently of neuronkit (traced into a graph, it counts nothing).
"""
from __future__ import annotations

import pytest
import torch

import neuronkit as nk
from neuronkit.advice.limits import eager_phases
from neuronkit.advice.uncompiled import uncompiled_findings
from neuronkit.events.event import CompileEvent
from neuronkit.setup.decode_graphs import RecompileLimitWarning
from neuronkit.workloads.padding_check import left_padding_verdict

PROMPTS = ["word " * n for n in (1, 3, 5, 7, 9)]   # five distinct lengths: 4, 8, 12, 16, 20 tokens


def uncompiled_forwards(model) -> tuple[list[int], object]:
    """The prompt length of each forward call run outside compiled code (1: a decode step)."""
    widths: list[int] = []

    def hook(module, args) -> None:
        if not torch.compiler.is_compiling():
            widths.append(int(args[0].shape[-1]))
    return widths, model.get_input_embeddings().register_forward_pre_hook(hook)


# limit 2: batch 1 compiles both graphs, batches 2-5 run eager (the prefill's hit the limit);
# limit 3: batch 2's prefill compiles, its decode hits the limit, batch 3 runs all eager
@pytest.mark.parametrize(("limit", "prompts", "prefills", "decodes"),
                         [(2, PROMPTS, 4, 12), (3, PROMPTS[:3], 1, 6)])
def test_eager_prefills_past_the_limit_are_counted(model, tok, compiler_reset, limit, prompts,
                                                   prefills, decodes):
    assert left_padding_verdict(model, tok("the cat sat")["input_ids"], tok.pad_token_id) is None
    widths, handle = uncompiled_forwards(model)            # counted after the padding probe
    try:
        with torch._dynamo.config.patch(recompile_limit=limit), \
                pytest.warns(RecompileLimitWarning, match="the rest will run eager"):
            res = nk.generate(model, tok, prompts, max_new_tokens=4, batch_size=1,
                              backend="eager", fit_recompile_limit=False)
    finally:
        handle.remove()
    assert (sum(w > 1 for w in widths), widths.count(1)) == (prefills, decodes)
    assert res.eager_calls == len(widths) == prefills + decodes and res.eager_prefills == prefills
    assert f"{prefills} prefill and {decodes} decode calls ran EAGER" in str(res)

    eager = [e for e in res.events if e.kind == "eager_fallback"]
    by_phase = {p: sum(e.calls for e in eager if e.metrics["phase"] == p) for p in ("prefill", "decode")}
    assert by_phase == {"prefill": prefills, "decode": decodes}
    assert all(e.input_shapes["input_ids"][1] > 1 for e in eager if e.metrics["phase"] == "prefill")
    assert any("1 prefill call ran eager" in e.reasons[0] for e in eager)

    (advice,) = [a for a in nk.diagnose(res.events) if "recompile limit hit" in a.title]
    assert advice.numbers["eager_calls"] == prefills + decodes
    assert advice.numbers["eager_phases"] == {"prefill": prefills, "decode": decodes}
    assert f"({prefills} prefill and {decodes} decode calls)" in advice.detail
    assert "every op of it first builds a kernel" in advice.detail
    # each eager event is a phase of a batch whose graph torch refused: the limit that fits them
    assert f"recompile_limit to {res.graphs + len(eager)} " in advice.fix


def test_a_logs_phases_are_read_as_untrusted():
    """Only known phases count, on the rank with most eager calls; a decode-only log (the
    Trainer's, an older nk.generate) says nothing of prefills."""
    def fallback(calls, rank=0, **metrics):
        return CompileEvent(kind="eager_fallback", function="f", calls=calls, rank=rank,
                            metrics=metrics)
    events = [fallback(1, phase="prefill"), fallback(3, phase="decode"), fallback(2, phase="<b>"),
              fallback(5, rank=1, phase=["decode"]), fallback(9, rank=2)]
    assert eager_phases(events[:3]) == {"prefill": 1, "decode": 3}
    assert eager_phases(events) == {}                     # rank 2 ran most, naming no phase
    assert eager_phases([]) == {}


def test_a_never_compiled_prefill_is_said_to_build_kernels_per_op():
    told = {"not_compiled": {"cause": "model_type", "reason": "no"}}
    def event(phase):
        return CompileEvent(kind="eager_fallback", function=f"M.forward[{phase}]", calls=1,
                            metrics={"phase": phase, **told})
    (both,) = uncompiled_findings([event("prefill"), event("decode")])
    (decode,) = uncompiled_findings([event("decode")])
    assert "An eager prefill runs every op" in both.detail
    assert "An eager prefill" not in decode.detail
