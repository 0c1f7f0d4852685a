"""diagnose(): findings built from exact, hand-made compile events (plus one real recorded log)."""
from __future__ import annotations

import dataclasses
import warnings

import pytest

from helpers.logs import make_log
from neuronkit.advice.diagnose import diagnose
from neuronkit.advice.finding import Advice
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog


def graphs(function: str, shapes: list[dict], start: float = 100.0, step: float = 1.0,
           duration: float = 0.5, **kw) -> list[CompileEvent]:
    """One compile event per input-shape dict: the first is ``first``, the rest ``recompile``."""
    return [CompileEvent(function=function, input_shapes=s, started_at=start + i * step,
                         duration_s=duration, kind="first" if i == 0 else "recompile", **kw)
            for i, s in enumerate(shapes)]


def find(advices: list[Advice], text: str) -> Advice:
    hits = [a for a in advices if text in a.title]
    assert len(hits) == 1, f"expected one finding with {text!r} in its title, got {advices}"
    return hits[0]


LENGTHS = [12, 40, 33, 100, 240, 17, 64]


def length_log() -> CompileLog:
    return make_log(graphs("forward", [{"input_ids": [8, n], "attention_mask": [8, n]}
                                       for n in LENGTHS]))


def test_varying_length_names_its_cause_and_equals_plan_buckets_at_the_stated_price():
    from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S, DEFAULT_TOKEN_COST_S, plan_buckets

    advices = diagnose(length_log())
    a = find(advices, "the sequence length")
    assert a.severity == "warning"
    assert "took 7 values (12..240) -> 7 graphs" in a.title
    assert "input_ids dim 1 (with attention_mask dim 1)" in a.detail  # one cause, one finding
    assert a.numbers["values"] == sorted(LENGTHS) and a.numbers["lengths"] == sorted(LENGTHS)
    assert (a.numbers["min"], a.numbers["max"], a.numbers["graphs"]) == (12, 240, 7)
    plan = a.numbers["plan"]
    assert (plan["compile_cost_s"], plan["token_cost_s"]) == (DEFAULT_COMPILE_COST_S,
                                                              DEFAULT_TOKEN_COST_S)
    assert plan["multiple_of"] == 16 and plan["graphs_per_bucket"] == 1  # no device known: 16
    expected = list(plan_buckets(sorted(LENGTHS), **plan).boundaries)
    assert a.numbers["buckets"] == expected
    assert f"compile priced at {DEFAULT_COMPILE_COST_S:g} s a graph" in a.detail
    assert f"padding at {DEFAULT_TOKEN_COST_S:g} s a token" in a.detail
    assert str(expected) in a.fix and "max_length" in a.fix
    assert f"longer than {expected[-1]} raises" in a.fix and "truncate='left'" in a.fix
    assert len(advices) == 2 and not any("batch" in x.title for x in advices)


def test_bucket_suggestion_follows_the_price_passed():
    # padding priced high (a workload served many times): worth a few graphs
    a = find(diagnose(length_log(), token_cost_s=1.0), "the sequence length")
    buckets = a.numbers["buckets"]
    assert 1 < len(buckets) <= 4 and buckets[-1] == 240 and buckets == sorted(buckets)
    assert a.numbers["plan"]["token_cost_s"] == 1.0 and "padding at 1 s a token" in a.detail
    cheap = find(diagnose(length_log()), "the sequence length")  # the planner's default price
    assert cheap.numbers["buckets"] == [240]


def test_bad_prices_are_refused_with_the_name_of_the_argument():
    with pytest.raises(ValueError, match="token_cost_s"):
        diagnose(length_log(), token_cost_s=-1)
    with pytest.raises(TypeError, match="compile_cost_s"):
        diagnose(length_log(), compile_cost_s="60")


def test_bucket_suggestion_weighs_lengths_by_how_often_they_were_seen():
    # 30 is seen in many events (limit hits included), 200 once: 30 earns a bucket of its own
    shapes = [{"input_ids": [1, n]} for n in (30, 200, 190)] + [{"input_ids": [1, 30]}] * 40
    events = graphs("forward", shapes)
    a = find(diagnose(events, token_cost_s=0.1), "input_ids dim 1")
    assert 32 in a.numbers["buckets"] and a.numbers["buckets"][-1] == 208  # 30, 200 rounded up
    assert a.numbers["lengths"].count(30) == 41


def test_last_partial_batch_suggests_drop_last():
    shapes = [{"input_ids": [8, 64], "labels": [8, 64]}, {"input_ids": [3, 64], "labels": [3, 64]}]
    events = graphs("forward", shapes)
    events[1].context = "step 12"
    advices = diagnose(make_log(events))
    a = find(advices, "partial batch")
    assert a.numbers["batch_size"] == 8 and a.numbers["partial_batch"] == 3
    assert a.numbers["extra_graphs"] == 1 and a.numbers["events"] == [1]
    assert "dataloader_drop_last=True" in a.fix
    assert "step 12" in a.detail
    assert not any("dim 1" in x.title for x in advices)  # the length never changed


def test_batch_size_change_in_generation_suggests_fixed_batch_size():
    shapes = [{"input_ids": [4, 1], "cache_position": [1]}, {"input_ids": [2, 1], "cache_position": [1]}]
    a = find(diagnose(make_log(graphs("wrapper", shapes))), "batch size changed during generation")
    assert a.numbers["values"] == [2, 4] and a.numbers["batch_size"] == 4
    assert "batch_size=4" in a.fix


def cache_reason(expected: int, actual: int) -> str:
    return (f"tensor 'kwargs['past_key_values'].layers[0].keys' size mismatch at index 2. "
            f"expected {expected}, actual {actual}")


def test_static_cache_growth_from_reasons():
    lengths = [12, 18, 40]
    events = graphs("wrapper", [{}] * 3)
    events[1].reasons = [cache_reason(12, 18)]
    events[2].reasons = [cache_reason(12, 40), cache_reason(18, 40)]
    a = find(diagnose(make_log(events)), "static cache length")
    assert a.numbers["values"] == lengths and a.numbers["dim"] == 2
    assert "changed 2 times (12, 18, 40) -> 3 graphs" in a.title
    assert "buckets" in a.fix


def test_cache_growing_every_token_suggests_static_cache():
    n = 6
    events = graphs("forward", [{"input_ids": [1, 1], "past_key_values.layers[0].keys": [1, 2, 10 + i, 16]}
                                for i in range(n)])
    advices = diagnose(make_log(events))
    a = find(advices, "a graph per generated token")
    assert a.severity == "critical"
    assert a.numbers["values"] == list(range(10, 10 + n)) and a.numbers["graphs"] == n
    assert "cache_implementation='static'" in a.fix
    assert not any("static cache length" in x.title for x in advices)


def test_limit_hit_is_critical_and_first():
    events = graphs("forward", [{"x": [2, n]} for n in range(1, 9)])
    events += [CompileEvent(function="forward", kind="limit_hit", input_shapes={"x": [2, 20 + i]},
                            started_at=200.0 + i,
                            reasons=["torch._dynamo hit config.recompile_limit (8)"]) for i in range(2)]
    advices = diagnose(make_log(events))
    assert advices[0].severity == "critical"
    a = find(advices, "recompile limit hit")
    assert a is advices[0]
    assert a.numbers == {"function": "forward", "limit_hits": 2, "graphs": 8, "held": 8,
                         "recompile_limit": 8, "shapes_seen": 10, "eager_calls": None,
                         "exact": False, "per_rank": {0: 2}, "events": [8, 9]}
    assert "recompile_limit to at least 10" in a.fix   # later eager calls left no record
    assert "ran at least 2 new shapes" in a.detail
    lengths = find(advices, "x dim 1")
    assert "10 values (1..21) -> 8 graphs + at least 2 run eagerly" in lengths.title


def test_limit_advice_is_exact_with_eager_fallback_events():
    """Where neuronkit drove the calls it counted those that ran eager: the limit to raise to is
    the graphs plus the shapes that ran eager, said without "at least"."""
    events = graphs("forward", [{"x": [2, n]} for n in range(1, 9)])
    events.append(CompileEvent(function="forward", kind="limit_hit", input_shapes={"x": [2, 20]},
                               reasons=["torch._dynamo hit config.recompile_limit (8)"]))
    events += [CompileEvent(function="forward", kind="eager_fallback", calls=5,
                            input_shapes={"x": [2, 20 + i]}) for i in range(3)]
    a = find(diagnose(make_log(events)), "recompile limit hit")
    assert a.numbers["exact"] is True and a.numbers["eager_calls"] == 15
    assert a.numbers["shapes_seen"] == 11                  # 8 graphs + 3 shapes that ran eager
    assert "recompile_limit to 11 " in a.fix and "at least" not in a.fix
    assert "ran 15 calls of 3 shapes" in a.detail


def _scalar_run(values):
    reason = "0/{i}: kwargs['cache'].layers[0].cumulative_length_int == {v}    # is_full = ..."
    return [CompileEvent(function="wrapped_func", kind="first" if i == 0 else "recompile",
                         input_shapes={"input_ids": [1, 1]},
                         reasons=[] if i == 0 else [reason.format(i=i - 1, v=v)])
            for i, v in enumerate([None, *values])]


def test_python_int_guard_run_is_its_own_finding():
    advices = diagnose(make_log(_scalar_run([17, 18, 19, 20])))
    a = find(advices, "one graph per step")
    assert a.severity == "critical"
    assert "cache.layers[0].cumulative_length_int is a Python int" in a.title
    assert a.numbers["values"] == [17, 18, 19, 20] and a.numbers["graphs"] == 5
    assert "nk.generate" in a.fix and "sliding-window" in a.fix
    assert not any("without an input shape change" in x.title for x in advices)


def test_python_int_guard_needs_four_consecutive_values():
    """Three values one apart (or four with a gap) are not yet a per-step pattern."""
    for values in ([17, 18, 19], [17, 18, 19, 21]):
        advices = diagnose(make_log(_scalar_run(values)))
        assert not any("one graph per step" in x.title for x in advices), values


def test_limit_value_from_the_recorders_note():
    events = graphs("f", [{"x": [n]} for n in (1, 2, 3)])
    events.append(CompileEvent(function="f", kind="limit_hit", input_shapes={"x": [4]},
                               metrics={"limit": {"name": "recompile_limit", "value": 2}}))
    a = find(diagnose(make_log(events)), "recompile limit hit")
    assert a.numbers["recompile_limit"] == 2 and a.numbers["graphs"] == 3


def test_compile_share_of_wall_time():
    events = graphs("forward", [{"x": [4]}], duration=3.0) + graphs("loss", [{"y": [4]}],
                                                                   duration=3.0, start=104.0)
    high = find(diagnose(make_log(events, wall=10.0)), "compile time is")
    assert high.title == "compile time is 60% of the run (6.0 s of 10.0 s): first compiles"
    assert high.severity == "info" and high.numbers["share"] == pytest.approx(0.6)
    assert "first graph (each graph once" in high.detail and "warm-up" in high.detail
    assert "NEFF cache" in high.detail and high.numbers["avoidable"] == 0
    low = find(diagnose(make_log(events, wall=100.0)), "compile time is")
    assert low.severity == "info" and "6%" in low.title and not low.detail
    unknown = find(diagnose(make_log(events)), "compiling took")
    assert unknown.numbers["compile_s"] == 6.0


def test_a_bucketed_generate_compiling_each_graph_once_is_not_warned_about():
    """nk.generate's decode graph is torch's recompile of ``forward`` but the first graph of
    ``forward[decode]``: each planned graph compiled once, a high share is no warning."""
    events = []
    for rank in (0, 1):
        events += graphs("Qwen3ForCausalLM.forward[prefill]", [{"input_ids": [1, 64]}], rank=rank,
                         duration=2.0)
        events += graphs("Qwen3ForCausalLM.forward[decode]", [{"input_ids": [1, 1]}], rank=rank,
                         duration=2.0, start=103.0)
        events[-1].kind = "recompile"
    share = find(diagnose(make_log(events, wall=5.0)), "compile time is")
    assert share.severity == "info" and share.title.endswith(": first compiles")
    assert share.numbers["avoidable"] == 0
    events.append(dataclasses.replace(events[-1], seq=9, input_shapes={"input_ids": [2, 1]}))
    again = find(diagnose(make_log(events, wall=5.0)), "compile time is")
    assert again.severity == "warning" and again.numbers["avoidable"] == 1


@pytest.mark.parametrize("kind", ["recompile", "limit_hit", "eager_fallback"])
def test_a_high_compile_share_with_avoidable_compiles_is_a_warning(kind):
    events = graphs("forward", [{"x": [4]}], duration=3.0)
    events.append(CompileEvent(function="forward", kind=kind, input_shapes={"x": [5]},
                               started_at=104.0, duration_s=0.5))
    high = find(diagnose(make_log(events, wall=10.0)), "compile time is")
    assert high.severity == "warning" and high.title.endswith("(3.5 s of 10.0 s)")
    assert "1 avoidable event (recompiles" in high.detail and "first compiles" not in high.title
    assert high.numbers["avoidable"] == 1 and "compile fewer graphs" in high.fix
    low = find(diagnose(make_log(events, wall=100.0)), "compile time is")
    assert low.severity == "info"


def test_advice_quotes_long_reasons_whole():
    reason = "the backend failed on " + "a very long operator name " * 8 + "in the graph"
    guard = "L['self'].config." + "nested_setting_" * 8 + "flag == 12345"
    events = [CompileEvent(function="loss", kind="failed", reasons=[reason], started_at=1.0)]
    events += graphs("forward", [{"x": [4]}, {"x": [4]}], start=2.0)
    events[-1].reasons = [f"0/0: {guard}"]
    advices = diagnose(make_log(events))
    assert reason in find(advices, "compile failed").detail
    same = find(advices, "without an input shape change")
    assert guard.replace("L['self']", "self") in same.detail
    assert not any("…" in a.title + a.detail + a.fix for a in advices)


def test_long_value_lists_end_with_a_count_in_words():
    from neuronkit.advice.wording import listed

    assert listed(list(range(15)), most=12) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 3 more"
    assert listed([1, 2]) == "1, 2"
    shapes = [{"x": [4, n]} for n in (8, 16, 24, 32)]
    events = graphs("forward", shapes, rank=0) + graphs("forward", shapes[:1], rank=1, start=100.2)
    a = find(diagnose(make_log(events)), "ranks compiled different graphs")
    assert "rank 0 alone compiled 3: " in a.detail and " and 1 more" in a.detail
    assert "…" not in a.detail


def test_ranks_that_compiled_different_graphs_are_flagged():
    a_shape, b_shape = {"x": [4, 8]}, {"x": [4, 16]}
    events = (graphs("forward", [a_shape, b_shape], rank=0)
              + graphs("forward", [a_shape], rank=1, start=100.2))
    a = find(diagnose(make_log(events)), "ranks compiled different graphs")
    assert a.numbers["graphs_per_rank"] == {0: 2, 1: 1}
    assert a.numbers["only_on_rank"] == {0: 1} and a.numbers["common"] == 1
    assert "rank 0 alone compiled 1" in a.detail and "16" in a.detail
    same = graphs("forward", [a_shape], rank=0) + graphs("forward", [a_shape], rank=1)
    advices = diagnose(make_log(same))
    assert not any("ranks compiled different" in x.title for x in advices)
    assert find(advices, "shapes are static")  # one graph per function on each rank


def test_static_shapes_is_an_info_finding():
    events = graphs("forward", [{"x": [4, 8]}]) + graphs("loss", [{"y": [4]}], start=101.0)
    advices = diagnose(make_log(events, wall=50.0))
    assert [a.severity for a in advices] == ["info", "info"]
    assert find(advices, "shapes are static").numbers["graphs"] == {"forward": 1, "loss": 1}


def test_recompile_without_shape_change_quotes_the_guard():
    events = graphs("forward", [{"x": [4]}, {"x": [4]}])
    events[1].reasons = ["0/0: L['self'].training == True"]
    a = find(diagnose(make_log(events)), "without an input shape change")
    assert "self.training changed (was True)" in a.detail and a.numbers["graphs"] == 2
    assert a.numbers["guard"] == "L['self'].training == True"  # torch's text, on demand


def test_failed_compile_is_critical():
    events = graphs("forward", [{"x": [4]}])
    events.append(CompileEvent(function="forward", kind="failed", reasons=["BackendCompilerFailed: boom"]))
    a = find(diagnose(make_log(events)), "failed")
    assert a.severity == "critical" and "boom" in a.detail


def test_findings_are_ordered_by_severity():
    events = graphs("forward", [{"x": [8, n]} for n in (4, 5)], duration=5.0)
    events.append(CompileEvent(function="forward", kind="limit_hit", input_shapes={"x": [8, 9]}))
    severities = [a.severity for a in diagnose(make_log(events, wall=10.0))]
    order = ["critical", "warning", "info"]
    assert severities == sorted(severities, key=order.index)
    assert severities[0] == "critical" and "warning" in severities


def test_empty_log_and_bad_input():
    (a,) = diagnose(CompileLog())
    assert a.title == "no compile events" and a.severity == "info"
    assert diagnose([])[0].title == "no compile events"
    with pytest.raises(TypeError, match="CompileLog"):
        diagnose("compile-log.jsonl")


def test_advice_str_and_severity_check():
    a = Advice("forward: 3 graphs", "x dim 1 took 3 values", "pad to buckets", "warning", {"n": 3})
    text = str(a)
    assert text.splitlines()[0] == "[warning] forward: 3 graphs"
    assert "x dim 1 took 3 values" in text and "fix: pad to buckets" in text
    with pytest.raises(ValueError, match="severity"):
        Advice("t", "d", "f", "fatal")


def test_real_recorded_log():
    import torch

    from neuronkit.recorder import recorder  # a broken recorder fails here, it is never skipped

    def f(x, mask):
        return (x * 2).sum(dim=1) + mask.sum()

    torch.compiler.reset()
    compiled = torch.compile(f, backend="eager", dynamic=False)
    with warnings.catch_warnings():  # the recorder may warn about the limit; not under test here
        warnings.simplefilter("ignore")
        with torch._dynamo.config.patch(recompile_limit=3), recorder.CompileRecorder() as rec:
            for n in (4, 7, 9, 7, 12):
                compiled(torch.ones(2, n), torch.ones(2, n))
    torch.compiler.reset()
    advices = diagnose(rec.log)
    assert advices[0].severity == "critical"
    assert advices[0].numbers["recompile_limit"] == 3 and advices[0].numbers["limit_hits"] == 1
    varying = [a for a in advices if a.numbers.get("dim") == 1]
    assert len(varying) == 1, advices  # x and mask changed together: one finding
    assert "mask dim 1" in varying[0].title
    assert varying[0].numbers["values"] == [4, 7, 9, 12] and varying[0].numbers["graphs"] == 3


def unsupported(function: str, reason: str, rank: int = 0, location: str = "") -> CompileEvent:
    """A graph break as logs written before the graph_break kind hold it: a failed compile
    with torch's ``Unsupported``."""
    dynamo = {"fail_type": "Unsupported", "fail_reason": reason + "\n  Hint: …"}
    return CompileEvent(function=function, location=location, kind="failed", rank=rank,
                        reasons=[reason], metrics={"dynamo": dynamo})


def graph_break(function: str, reason: str, cause: str, where: str, resumed: bool = False,
                stack: tuple[str, ...] = (), rank: int = 0) -> CompileEvent:
    """A graph break as the recorder writes it now."""
    info = {"where": where, "reason": reason, "cause": cause, "resumed": resumed,
            "cause_text": {"item": "`.item()`: a tensor's value taken into Python",
                           "fsdp": "FSDP's hooks (marked torch.compiler.disable)",
                           "data_dependent": "a data-dependent branch"}.get(cause, reason),
            "stack": list(stack)}
    return CompileEvent(function=function, kind="graph_break", rank=rank, reasons=[reason],
                        metrics={"graph_break": info})


SKIPPED = "Attempted to call function marked as skipped"


def test_an_old_logs_graph_breaks_are_still_read_as_breaks():
    """Logs written before the graph_break kind: a failed compile with torch's Unsupported is a
    break, a backend error stays an error, and a limit hit misfiled as failed is no break."""
    events = graphs("forward", [{"x": [4]}]) + [
        unsupported("wrapper", SKIPPED, location="generic.py:1112"),
        unsupported("wrapper", SKIPPED, location="capturing.py:326"),
        unsupported("<dictcomp>", "Missing tp_iternext"),
        unsupported("forward", "Dynamo recompile limit exceeded"),
        CompileEvent(function="loss", kind="failed", reasons=["backend='b' raised: boom"],
                     metrics={"dynamo": {"fail_type": "BackendCompilerFailed"}})]
    advices = diagnose(make_log(events))
    a = find(advices, "graph breaks")
    assert a.severity == "warning" and a.title == "graph breaks: 3 functions ran eagerly"
    assert a.numbers["reasons"] == {
        SKIPPED: ["wrapper (generic.py:1112)", "wrapper (capturing.py:326)"],
        "Missing tp_iternext": ["<dictcomp>"]}
    assert a.numbers["causes"] == ["skipped", "other"]
    assert "eagerly" in a.detail and "code Dynamo does not trace" in a.detail
    assert "FSDP" not in a.fix  # nothing says FSDP here: no "expected with FSDP"
    assert not any("wrapper" in x.title or "dictcomp" in x.title for x in advices)
    failed = find(advices, "loss: 1 compile failed")  # a backend error stays an error
    assert failed.severity == "critical" and "boom" in failed.detail
    # a log written before the recorder copied torch's reason: its first line, from the metrics
    old = unsupported("step", "Missing tp_iternext")
    old.reasons = []
    assert find(diagnose(make_log([old])), "graph breaks").numbers["reasons"] == {
        "Missing tp_iternext": ["step"]}


def test_graph_break_advice_says_what_the_break_was():
    item = graph_break("step", "Unsupported Tensor.item() call", "item", "/w/train.py:18",
                       resumed=True)
    branch = graph_break("step", "Data-dependent branching", "data_dependent", "/w/train.py:30",
                         resumed=True)
    events = graphs("step", [{"x": [4]}]) + [item, branch]
    a = find(diagnose(make_log(events)), "graph breaks")
    assert a.title == "graph breaks: 2 graphs split at a break"
    assert "`.item()`: a tensor's value taken into Python at train.py:18" in a.detail
    assert "a data-dependent branch at train.py:30" in a.detail
    assert "capture_scalar_outputs" in a.fix and "torch.where" in a.fix
    assert "FSDP" not in a.fix and a.numbers["causes"] == ["item", "data_dependent"]
    # graph breaks are neither graphs nor failures nor limit hits
    advices = diagnose(make_log(events))
    assert [x.title for x in advices if "step" in x.title or x.severity == "critical"] == []
    assert make_log(events).graph_counts() == {"step": 1}


def test_only_fsdp_breaks_are_expected():
    fsdp = graph_break("Qwen3Model.forward", SKIPPED, "fsdp", "/m/modeling_qwen3.py:375",
                       stack=("/m/modeling_qwen3.py:375", "/t/torch/distributed/fsdp/_state.py:30"))
    a = find(diagnose(make_log([fsdp])), "graph breaks")
    assert "expected with FSDP" in a.fix and "otherwise" not in a.fix
    assert "FSDP's hooks (marked torch.compiler.disable) at modeling_qwen3.py:375" in a.detail
    mixed = diagnose(make_log([fsdp, graph_break("f", "Missing tp_iternext", "other", "/a.py:3")]))
    fix = find(mixed, "graph breaks").fix
    assert "expected with FSDP" in fix and "otherwise remove the unsupported call" in fix


def test_counts_in_a_merged_log_are_per_rank():
    events = []
    for rank in (0, 1):
        events += graphs("forward", [{"x": [2, n]} for n in (1, 2)], rank=rank)
        events += [unsupported("hook", "Missing tp_iternext", rank=rank) for _ in range(2)]
        events += [CompileEvent(function="loss", kind="failed", rank=rank, reasons=["boom"])
                   for _ in range(2 + rank)]
        events.append(CompileEvent(function="forward", kind="limit_hit", rank=rank,
                                   input_shapes={"x": [2, 3]}, reasons=["recompile_limit (2)"]))
    advices = diagnose(make_log(events))
    breaks = find(advices, "graph breaks")
    assert breaks.title == "graph breaks: 2 functions ran eagerly on each of 2 ranks"
    assert breaks.numbers["per_rank"] == {0: 2, 1: 2} and breaks.numbers["graph_breaks"] == 2
    failed = find(advices, "compiles failed")
    assert failed.title == "loss: 3 compiles failed (rank 0: 2, rank 1: 3)"
    assert failed.numbers["failed"] == 3 and failed.numbers["per_rank"] == {0: 2, 1: 3}
    limit = find(advices, "recompile limit hit")
    assert "hit 1 time on each of 2 ranks" in limit.title and limit.numbers["limit_hits"] == 1
    assert "2 graphs + at least 1 run eagerly" in find(advices, "x dim 1").title


def test_functions_that_share_a_name_are_told_apart_by_location():
    events = []
    for i, where in enumerate(["/a/operations.py:942", "/m/modeling_qwen3.py:440",
                               "/m/modeling_qwen3.py:357", "/m/modeling_qwen3.py:59"]):
        events += graphs("forward", [{"x": [4]}], start=100.0 + i, location=where)
    advices = diagnose(make_log(events))
    assert not any("without an input shape change" in a.title for a in advices)
    static = find(advices, "shapes are static")
    assert list(static.numbers["graphs"]) == [
        "forward (operations.py:942)", "forward (modeling_qwen3.py:440)",
        "forward (modeling_qwen3.py:357)", "forward (modeling_qwen3.py:59)"]
    # one of them recompiling is named with its place
    events += graphs("forward", [{"x": [4], "y": [1]}], start=110.0,
                     location="/m/modeling_qwen3.py:59")
    events[-1].kind = "recompile"
    a = find(diagnose(make_log(events)), "graphs for different arguments")
    assert a.title == "forward (modeling_qwen3.py:59): 2 graphs for different arguments"
    assert "each caller" in a.fix


def test_compile_share_stays_last_whatever_the_other_findings():
    events = graphs("forward", [{"x": [8, n]} for n in (4, 5, 6)], duration=0.01)
    events.append(unsupported("hook", "Missing tp_iternext"))
    titles = [a.title for a in diagnose(make_log(events, wall=100.0))]
    assert titles[-1].startswith("compile time is") and len(titles) == 3


def test_real_graph_break_on_a_disabled_function():
    import contextlib

    import torch

    import neuronkit as nk

    @torch._dynamo.disable
    def hook(x):  # like FSDP's hooks: Dynamo may not trace it
        return x + 1

    @contextlib.contextmanager
    def gathered():
        yield

    def step(x):
        with gathered():  # a break inside a `with` block cannot resume: the frame runs eagerly
            return hook(x) * 2

    torch.compiler.reset()
    with nk.CompileRecorder() as rec:
        torch.compile(step, backend="eager")(torch.ones(2))
    torch.compiler.reset()
    advices = diagnose(rec.log)
    a = find(advices, "graph breaks")
    assert a.title == "graph breaks: 1 function ran eagerly" and a.numbers["functions"] == ["step"]
    assert "disable" in a.detail  # torch's reason names the disabled call
    assert not any(x.severity == "critical" for x in advices)


def per_token_log(n: int) -> CompileLog:
    return make_log(graphs("forward", [{"input_ids": [1, 1],
                                        "past_key_values.layers[0].keys": [1, 2, 10 + i, 16]}
                                       for i in range(n)]))


def test_a_graph_per_token_needs_four_consecutive_cache_lengths():
    """Three cache lengths one apart are three prompts of neighbouring lengths as often as a
    growing cache: the per-token finding (critical) starts at four. Lowering that threshold to
    two or three must fail here."""
    for n in (2, 3):
        advices = diagnose(per_token_log(n))
        assert not any("a graph per generated token" in a.title for a in advices), n
        assert find(advices, "static cache length").severity == "warning"
    assert find(diagnose(per_token_log(4)), "a graph per generated token").severity == "critical"


def test_limit_advice_counts_the_graphs_the_code_held_not_only_those_recorded():
    """A wrapper shared by several models (or graphs compiled before recording): 2 graphs of this
    function recorded, but torch refuses at its limit of 8. Raising it to 3 would change nothing."""
    events = graphs("Qwen3ForCausalLM.forward[decode]", [{"x": [2, n]} for n in (1, 2)])
    events.append(CompileEvent(function="Qwen3ForCausalLM.forward[decode]", kind="limit_hit",
                               input_shapes={"x": [2, 3]}, graph_count=8,
                               metrics={"limit": {"name": "recompile_limit", "value": 8}}))
    a = find(diagnose(make_log(events)), "recompile limit hit")
    assert (a.numbers["graphs"], a.numbers["held"], a.numbers["shapes_seen"]) == (2, 8, 9)
    assert "After 8 graphs (2 of them recorded for" in a.detail
    assert "recompile_limit to at least 9 " in a.fix


def test_eager_calls_are_counted_per_rank_and_named_like_the_limit_hit():
    """Each rank ran 4 eager calls (not 8), and the eager_fallback events nk.generate records
    for the raw decode wrapper are named like the limit hit on that wrapper (eager_name), so
    they count for that function."""
    from neuronkit.workloads.recompile_limit import eager_name

    raw = {"name": "wrapped_func", "location": "/t/deprecation.py:121"}
    events = []
    for rank in (0, 1):
        events += graphs("M.forward[prefill]", [{"x": [2, 9]}], rank=rank,
                         location="/t/modeling.py:440", metrics={"frame": raw})
        events += graphs("M.forward[decode]", [{"x": [2, n]} for n in (1, 2)], rank=rank,
                         location="/t/modeling.py:440", metrics={"frame": raw})
        events.append(CompileEvent(function="M.forward[decode]", location="/t/modeling.py:440",
                                   kind="limit_hit", rank=rank, input_shapes={"x": [2, 3]},
                                   metrics={"frame": raw, "limit": {"name": "recompile_limit",
                                                                    "value": 2}}))
        events.append(CompileEvent(function="M.forward[prefill]", location="/t/modeling.py:440",
                                   kind="recompile", rank=rank, input_shapes={"x": [2, 17]},
                                   metrics={"frame": raw}))
        name, place = eager_name(events, "wrapped_func", raw["location"])
        assert (name, place) == ("M.forward[decode]", "/t/modeling.py:440")
        events += [CompileEvent(function=name, location=place, kind="eager_fallback", rank=rank,
                                calls=2, input_shapes={"input_ids": [2, 1], "cache": [2, c]},
                                metrics={"frame": raw})
                   for c in (40, 72)]
    assert eager_name(events, "g", "/t/elsewhere.py:1") == ("g", "/t/elsewhere.py:1")
    advices = diagnose(make_log(events))
    a = find(advices, "recompile limit hit")
    assert a.numbers["exact"] and a.numbers["eager_calls"] == 4 and a.numbers["shapes_seen"] == 4
    assert "ran 4 calls of 2 shapes" in a.detail and "recompile_limit to 4 " in a.fix
    assert not any("wrapped_func" in x.title for x in advices)


def test_suggested_buckets_are_round_numbers_for_the_device():
    lengths = [71, 137, 33, 90, 12, 250]
    cpu = find(diagnose(graphs("f", [{"input_ids": [1, n]} for n in lengths], device="cpu")),
               "input_ids dim 1")
    assert cpu.numbers["multiple_of"] == 16 and all(b % 16 == 0 for b in cpu.numbers["buckets"])
    assert cpu.numbers["buckets"][-1] == 256 and "71" not in cpu.fix and "137" not in cpu.fix
    neuron = find(diagnose(graphs("f", [{"input_ids": [1, n]} for n in lengths],
                                  device="neuron:0")), "input_ids dim 1")
    assert neuron.numbers["multiple_of"] == 64
    assert all(b % 64 == 0 for b in neuron.numbers["buckets"]) and neuron.numbers["buckets"][-1] == 256
    assert "multiples of 64" in neuron.detail and "longer than 256 raises" in neuron.fix
    # one length only when asked: multiple_of=1 gives the lengths seen
    exact = find(diagnose(graphs("f", [{"input_ids": [1, n]} for n in lengths]), multiple_of=1),
                 "input_ids dim 1")
    assert set(exact.numbers["buckets"]) <= set(lengths) and exact.numbers["buckets"][-1] == 250
    single = find(diagnose(graphs("f", [{"input_ids": [1, n]} for n in (40, 61)],
                                  device="neuron")), "input_ids dim 1")
    assert single.numbers["buckets"] == [64] and "max_length=64" in single.fix


def test_an_input_of_length_zero_does_not_break_the_bucket_advice():
    """A log whose inputs varied down to length 0 (an empty prompt) once crashed diagnose()."""
    a = find(diagnose(graphs("f", [{"input_ids": [1, n]} for n in (0, 5, 40, 90)])),
             "input_ids dim 1")
    assert a.numbers["buckets"] and all(b > 0 for b in a.numbers["buckets"])


def _growing_events() -> list[CompileEvent]:
    """Three functions whose events interleave: lengths, batch sizes, a limit hit, a failure."""
    events = []
    for i in range(24):
        events.append(CompileEvent(function="forward", kind="first" if i == 0 else "recompile",
                                   started_at=100.0 + i, duration_s=0.5,
                                   input_shapes={"input_ids": [8, 10 + 3 * i]}))
        if i % 3 == 0:
            events.append(CompileEvent(function="step", kind="first" if i == 0 else "recompile",
                                       started_at=100.2 + i, duration_s=0.2,
                                       input_shapes={"x": [1 + i // 3, 16]}, rank=i % 2))
    events.insert(30, CompileEvent(function="forward", kind="limit_hit", started_at=130.5,
                                   reasons=["cache_size_limit reached"]))
    events.insert(12, CompileEvent(function="loss", kind="failed", started_at=111.5,
                                   reasons=["RuntimeError: boom"]))
    return events


def test_a_memo_kept_between_calls_gives_the_findings_of_a_fresh_diagnose():
    events, memo, log = _growing_events(), {}, CompileLog()
    for n, event in enumerate(events, 1):
        log.append(event)
        if n % 4 and n != len(events):
            continue
        assert diagnose(log, memo=memo) == diagnose(CompileLog(list(log.events))), n
    assert set(memo) == {"forward", "step", "loss"}


def test_a_memo_analyses_again_only_the_function_whose_events_changed(monkeypatch):
    from neuronkit.advice import diagnose as advice

    seen: list[str] = []
    real = advice.shape_findings
    monkeypatch.setattr(advice, "shape_findings",
                        lambda function, *rest: seen.append(function) or real(function, *rest))
    log, memo = make_log(_growing_events()), {}
    diagnose(log, memo=memo)
    assert sorted(seen) == ["forward", "loss", "step"]
    seen.clear()
    diagnose(log, memo=memo)
    assert seen == []  # nothing new: every function's findings kept
    log.append(CompileEvent(function="step", kind="recompile", started_at=200.0,
                            input_shapes={"x": [99, 16]}))
    found = diagnose(log, memo=memo)
    assert seen == ["step"]
    assert found == diagnose(CompileLog(list(log.events)))
    seen.clear()  # a new rank changes every function's "on which ranks": all analysed again
    log.append(CompileEvent(function="loss", kind="failed", started_at=201.0, rank=5,
                            reasons=["RuntimeError: boom"]))
    diagnose(log, memo=memo)
    assert sorted(seen) == ["forward", "loss", "step"]


def test_a_varying_1d_input_is_a_length_not_the_batch_size():
    """Dim 0 of a 1-D input is its length: bucket advice, not "the batch size (dim 0)"."""
    lengths = [12, 40, 33, 100]
    advices = diagnose(graphs("forward", [{"x": [n]} for n in lengths]))
    a = find(advices, "x dim 0")
    assert a.numbers["values"] == sorted(lengths) and a.numbers["buckets"]
    assert "buckets" in a.fix
    assert not any("batch" in x.title.lower() for x in advices)


def prefill_decode_log(prompts: list[int], extra: int = 32) -> CompileLog:
    """What plain per-request generation records: per prompt length a prefill graph (input_ids,
    positions, a mask of prompt x cache) and a decode graph (a static cache of prompt + extra)."""
    events = []
    for n in prompts:
        cache = n + extra
        events.append(CompileEvent(function="M.forward[prefill]", location="m.py:1", input_shapes={
            "input_ids": [1, n], "position_ids": [1, n], "attention_mask": [1, 1, n, cache]}))
        events.append(CompileEvent(function="M.forward[decode]", location="m.py:1", input_shapes={
            "input_ids": [1, 1], "position_ids": [1, 1], "attention_mask": [1, 1, 1, cache],
            **{f"cache.layers[{i}].{kv}": [1, 2, cache, 16] for i in range(2) for kv in ("keys", "values")}}))
    for i, e in enumerate(events):
        e.kind, e.started_at, e.duration_s = ("first" if i < 2 else "recompile"), 100.0 + i, 0.5
    return make_log(events)


DEMO_PROMPTS = [137, 115, 47, 104, 114, 124, 126, 3, 107, 31, 117]


def test_one_cause_one_finding_per_function_and_no_buckets_for_a_cache_length():
    from neuronkit.workloads.shapes import plan_buckets

    advices = diagnose(prefill_decode_log(DEMO_PROMPTS))
    shape = [a for a in advices if a.numbers.get("function", "").startswith("M.forward")]
    assert [a.numbers["function"] for a in shape] == ["M.forward[prefill]", "M.forward[decode]"]
    prefill, decode = shape
    assert prefill.numbers["cause"] == decode.numbers["cause"] == "the prompt length"
    assert "the prompt length (input_ids dim 1) took 11 values (3..137) -> 11 graphs" in prefill.title
    assert "attention_mask dim 3 (+32) follows it" in prefill.detail
    # the suggestion is the planner's answer on the prompt lengths, at the stated price
    assert prefill.numbers["lengths"] == sorted(DEMO_PROMPTS)
    assert prefill.numbers["plan"]["graphs_per_bucket"] == 2  # each bucket: a prefill + a decode
    assert prefill.numbers["buckets"] == list(plan_buckets(DEMO_PROMPTS, **prefill.numbers["plan"]))
    # the decode's cache length follows the prompt length: no buckets of its own
    assert "buckets" not in decode.numbers and decode.numbers["buckets_of"] == prefill.numbers["buckets"]
    assert "cache = prompt + 32" in decode.detail
    assert f"nk.Buckets({prefill.numbers['buckets']})" in decode.fix
    every_bucket = [b for a in advices for b in a.numbers.get("buckets", [])]
    caches = {n + 32 for n in DEMO_PROMPTS}
    assert not any("attention_mask dim 3" in a.title for a in advices)
    assert every_bucket == prefill.numbers["buckets"], "a cache length got buckets of its own"
    assert caches  # (the cache lengths: never a finding's buckets)


def test_a_price_passed_to_diagnose_reaches_the_prompt_finding_and_its_decode():
    advices = diagnose(prefill_decode_log(DEMO_PROMPTS), token_cost_s=1.0)
    prefill = find(advices, "forward[prefill]")
    decode = find(advices, "forward[decode]")
    assert len(prefill.numbers["buckets"]) > 1
    assert decode.numbers["buckets_of"] == prefill.numbers["buckets"]
