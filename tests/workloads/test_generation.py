"""nk.generate (bucketed static shapes, real compiles with the eager backend) and nk.pipeline."""
from __future__ import annotations

import random
import types
import warnings

import pytest
import torch

import neuronkit as nk
from helpers.compiling import counting_backend
from neuronkit.workloads.generate_plan import PlannedGraph, cache_length, plan_generation
from neuronkit.workloads.generate_settings import compile_kwargs as _compile_kwargs
from neuronkit.workloads.padding_check import left_padding_verdict

WORDS = "the cat sat on a mat while rain fell over quiet hills and rivers ran to the sea".split()


def make_prompts(tok, n, seed, lo=1, hi=30):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def n_tokens(tok, prompt):
    return len(tok(prompt)["input_ids"])


# ---- correctness and shapes ------------------------------------------------------------------

@pytest.mark.slow
def test_bucketed_greedy_equals_plain_unpadded_generation(model, tok, compiler_reset):
    prompts = make_prompts(tok, 7, seed=0)
    lengths = [n_tokens(tok, p) for p in prompts]
    assert min(lengths) < 16 < max(lengths) <= 64          # both buckets are used
    res = nk.generate(model, tok, prompts, max_new_tokens=10, buckets=[16, 64], batch_size=3,
                      backend=counting_backend())
    for prompt, ids, text in zip(prompts, res.output_ids, res.texts, strict=True):
        enc = tok(prompt, return_tensors="pt")
        ref = model.generate(**enc, max_new_tokens=10, do_sample=False)[0]   # dynamic cache, eager
        assert ids.device.type == "cpu"
        assert ids.tolist() == ref.tolist()                # prompt first, then identical tokens
        assert text == tok.decode(ref[enc["input_ids"].shape[1]:], skip_special_tokens=True)
    assert res.graphs >= 1 and res.backend == "counting_eager"


@pytest.mark.slow
def test_graphs_bounded_by_buckets_whatever_the_arrival_order(model, tok):
    prompts = make_prompts(tok, 9, seed=3)
    lengths = [n_tokens(tok, p) for p in prompts]
    buckets = nk.Buckets([16, 64])
    assert {buckets.fit(n) for n in lengths} == {16, 64}
    # without buckets, batches of 2 in arrival order would each be their own shape
    assert len({max(lengths[i:i + 2]) for i in range(0, len(lengths), 2)}) > len(buckets)
    for order_seed in range(2):                     # two arrival orders, each from scratch
        order = prompts[:]
        random.Random(order_seed).shuffle(order)
        torch.compiler.reset()
        counter = counting_backend()
        res = nk.generate(model, tok, order, max_new_tokens=6, buckets=buckets, batch_size=2,
                          backend=counter)
        # a prefill and a decode graph per bucket, whatever the order; the recorder agrees
        assert counter.graphs == res.graphs == 2 * len(buckets)
        assert res.cache_lengths == [cache_length(16, 6), cache_length(64, 6)]
        assert all(t.rows == 2 for t in res.timings)           # short batches were filled up
    again = nk.generate(model, tok, prompts[::-1], max_new_tokens=6, buckets=buckets,
                        batch_size=2, backend=counter)
    assert again.graphs == 0 and counter.graphs == 2 * len(buckets)  # second pass: nothing new
    torch.compiler.reset()


@pytest.mark.slow
def test_without_buckets_each_new_longest_batch_compiles(model, tok, compiler_reset):
    prompts = make_prompts(tok, 6, seed=3)
    lengths = [n_tokens(tok, p) for p in prompts]
    counter = counting_backend()
    with nk.CompileRecorder() as rec:
        res = nk.generate(model, tok, prompts, max_new_tokens=6, batch_size=2, backend=counter,
                          recorder=rec)
        assert rec.active                                   # a caller's recorder keeps running
    expected = {cache_length(max(lengths[i:i + 2]), 6) for i in range(0, len(lengths), 2)}
    assert res.buckets is None and res.cache_lengths == sorted(expected)
    assert counter.graphs == res.graphs == 2 * len(expected) >= 4
    assert res.events == rec.events[-len(res.events):]
    assert all(e.context.startswith("generate batch") for e in res.events)
    # no buckets: the context names the batch's own length, never a "bucket"
    assert all(", cache " in e.context and "bucket" not in e.context for e in res.events)
    assert sum(t.compiles for t in res.timings) == res.graphs
    torch.compiler.reset()
    with nk.CompileRecorder(context="sweep 2") as rec:      # a caller's label is kept
        res = nk.generate(model, tok, prompts[:2], max_new_tokens=6, batch_size=2,
                          backend=counter, recorder=rec)
        assert rec.current_context == "sweep 2"
    assert res.events and all(e.context.startswith("sweep 2 · generate batch") for e in res.events)


def test_cache_length_rule():
    assert [cache_length(16, n) for n in (1, 32, 33, 64, 65, 200)] == [48, 48, 80, 80, 144, 272]


def test_outputs_order_padding_waste_and_timings(model, tok):
    prompts = make_prompts(tok, 5, seed=11)
    lengths = [n_tokens(tok, p) for p in prompts]
    buckets = nk.Buckets([16, 64])
    res = nk.generate(model, tok, prompts, max_new_tokens=4, buckets=buckets, batch_size=2,
                      compile=False)
    assert res.backend is None and res.graphs == 0
    for prompt, ids in zip(prompts, res.output_ids, strict=True):           # original order, no padding
        assert ids[:n_tokens(tok, prompt)].tolist() == tok(prompt)["input_ids"]
    # every batch holds 2 rows (dummies included) padded to its bucket
    per_bucket = {}
    for n in lengths:
        per_bucket[buckets.fit(n)] = per_bucket.get(buckets.fit(n), 0) + 1
    batches = sum(-(-c // 2) for c in per_bucket.values())
    positions = sum(-(-c // 2) * 2 * b for b, c in per_bucket.items())
    assert len(res.timings) == batches
    assert res.padding_waste == pytest.approx(1 - sum(lengths) / positions)
    assert sum(t.real_rows for t in res.timings) == len(prompts)
    assert res.new_tokens == sum(t.new_tokens for t in res.timings) == \
        sum(len(ids) - n for ids, n in zip(res.output_ids, lengths, strict=True))
    assert all(t.prefill_s > 0 and t.decode_s >= 0 for t in res.timings)
    assert res.tokens_per_s == pytest.approx(res.new_tokens / res.wall_s)
    assert "5 prompts" in str(res) and "padding waste" in str(res)
    assert res.steady_tokens_per_s == pytest.approx(res.tokens_per_s)  # compile=False: no compiles
    assert f"= {res.tokens_per_s:.1f} tokens/s, padding waste" in str(res)  # one rate alone


def made_result(events, wall_s=10.0, new_tokens=120):
    from neuronkit.workloads.generation import GenerationResult

    return GenerationResult(texts=["a"], output_ids=[torch.tensor([1])], timings=[],
                            tokens_per_s=new_tokens / wall_s, padding_waste=0.0, events=events,
                            buckets=None, wall_s=wall_s, new_tokens=new_tokens)


def test_throughput_without_the_compile_seconds():
    from neuronkit.events.event import CompileEvent

    events = [CompileEvent(kind="first", duration_s=1.5),
              CompileEvent(kind="recompile", duration_s=0.5, neff_compile_s=2.0,
                           neff_cache="compiled")]
    res = made_result(events)
    assert res.steady_tokens_per_s == pytest.approx(120 / (10.0 - 4.0))  # NEFF builds included
    assert "120 new tokens in 10.00 s = 12.0 tokens/s (20.0 tokens/s without the 4.00 s of " \
           "compiles), padding waste 0%" in str(res)
    assert res.throughput(".0f") == "12 tokens/s (20 tokens/s without the 4.00 s of compiles)"
    quiet = made_result([])
    assert quiet.steady_tokens_per_s == pytest.approx(12.0) and quiet.throughput() == "12.0 tokens/s"
    busy = made_result([CompileEvent(duration_s=10.0)])  # compiles took the whole wall time
    assert busy.steady_tokens_per_s is None
    assert busy.throughput() == "12.0 tokens/s (no time without the 10.00 s of compiles)"


@pytest.mark.parametrize("on_neuron", [False, True])
def test_the_demos_side_by_side_gives_the_throughput_without_compiles(on_neuron):
    from neuronkit.events.event import CompileEvent
    from neuronkit.examples.demo import side_by_side
    from neuronkit.log.compile_log import CompileLog

    naive = CompileLog([CompileEvent(kind="first", duration_s=3.0),
                        CompileEvent(kind="recompile", duration_s=1.0)])
    bucketed = CompileLog([CompileEvent(kind="first", duration_s=1.0)])
    runs = {"naive": (naive, 10.0), "bucketed": (bucketed, 5.0)}
    lines = side_by_side(runs, on_neuron=on_neuron, new_tokens={"naive": 120, "bucketed": 120})
    assert "throughput of naive: 12.0 tokens/s (20.0 tokens/s without the 4.00 s of compiles)" \
        in lines
    assert "throughput of bucketed: 24.0 tokens/s (30.0 tokens/s without the 1.00 s of " \
           "compiles)" in lines
    assert lines[:3] == side_by_side(runs, on_neuron=on_neuron)[:3]  # the table as before
    assert not any("throughput" in line for line in side_by_side(runs, on_neuron=on_neuron))


def test_single_prompt_and_auto_buckets(model, tok):
    res = nk.generate(model, tok, "the cat sat", max_new_tokens=3, buckets="auto", compile=False)
    assert len(res.texts) == 1 and res.text == res.texts[0]
    assert res.buckets == nk.Buckets([n_tokens(tok, "the cat sat")]) and res.batch_size == 1
    assert res.padding_waste == 0.0


def test_truncate_left_keeps_the_end_of_a_long_prompt(model, tok):
    prompt = " ".join(WORDS * 3)
    ids = tok(prompt)["input_ids"]
    assert len(ids) > 16
    res = nk.generate(model, tok, [prompt], max_new_tokens=2, buckets=[8, 16], truncate="left",
                      compile=False)
    assert res.output_ids[0][:16].tolist() == ids[-16:]


def test_tokenizer_without_pad_token_uses_eos_and_says_so(model, tok, tiny_model_path):
    prompts = make_prompts(tok, 3, seed=5)
    with_pad = nk.generate(model, tok, prompts, max_new_tokens=3, buckets=[64], compile=False)
    no_pad = nk.load_tokenizer(tiny_model_path)
    no_pad.pad_token = None
    assert no_pad.pad_token_id is None
    with pytest.warns(UserWarning, match=r"no pad token.*eos token"):
        res = nk.generate(model, no_pad, prompts, max_new_tokens=3, buckets=[64], compile=False)
    assert [x.tolist() for x in res.output_ids] == [x.tolist() for x in with_pad.output_ids]


def test_pad_token_id_keyword_is_used_instead_of_the_tokenizers(model, tok, tiny_model_path):
    prompts = make_prompts(tok, 3, seed=5)
    with_pad = nk.generate(model, tok, prompts, max_new_tokens=3, buckets=[64], compile=False)
    no_pad = nk.load_tokenizer(tiny_model_path)
    no_pad.pad_token = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # given a pad id, there is nothing to warn about
        res = nk.generate(model, no_pad, prompts, max_new_tokens=3, buckets=[64], compile=False,
                          pad_token_id=tok.pad_token_id)
    assert [x.tolist() for x in res.output_ids] == [x.tolist() for x in with_pad.output_ids]


class ForceEos:
    """Logits processor: row ``row`` emits eos as its new token number ``at`` (0-based); no
    other row or step may emit eos, so the cut is deterministic."""

    def __init__(self, eos, width, row, at):
        self.eos, self.width, self.row, self.at = eos, width, row, at

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        scores[:, self.eos] = -float("inf")
        if input_ids.shape[1] - self.width == self.at:
            scores[self.row] = -float("inf")
            scores[self.row, self.eos] = 0.0
        return scores


def test_generation_is_cut_after_eos_in_ids_texts_and_counts(model, tok):
    prompts = ["the cat sat on", "rain fell over quiet hills"]
    eos, width = tok.eos_token_id, 16
    assert eos != tok.pad_token_id
    res = nk.generate(model, tok, prompts, max_new_tokens=6, buckets=[width], batch_size=2,
                      compile=False, logits_processor=[ForceEos(eos, width, row=0, at=2)])
    short, long_ = (ids[n_tokens(tok, p):].tolist()
                    for p, ids in zip(prompts, res.output_ids, strict=True))
    assert len(short) == 3 and short[-1] == eos and eos not in short[:-1]   # eos kept, then cut
    assert len(long_) == 6 and eos not in long_                             # the other row runs on
    assert tok.pad_token_id not in short                 # nothing of the padding after eos
    assert res.texts[0] == tok.decode(short[:-1], skip_special_tokens=True)
    assert res.texts[0] == tok.decode(short, skip_special_tokens=True)     # eos not in the text
    assert res.new_tokens == res.timings[0].new_tokens == 3 + 6


def test_eos_token_id_keyword_cuts_at_its_first_occurrence(model, tok):
    prompt = "the cat sat on"
    plain = nk.generate(model, tok, prompt, max_new_tokens=8, buckets=[16], compile=False)
    new = plain.output_ids[0][n_tokens(tok, prompt):].tolist()
    stop = new[3]                                        # a token the model really produces
    assert stop not in (tok.eos_token_id, tok.pad_token_id)
    first = new.index(stop)
    res = nk.generate(model, tok, [prompt, "rain fell"], max_new_tokens=8, buckets=[16],
                      compile=False, eos_token_id=stop)
    cut = res.output_ids[0][n_tokens(tok, prompt):].tolist()
    assert cut == new[:first + 1]                        # up to and including the stop token
    assert res.texts[0] == tok.decode(new[:first + 1], skip_special_tokens=True)
    other = len(res.output_ids[1]) - n_tokens(tok, "rain fell")
    assert res.new_tokens == first + 1 + other


def test_first_token_clock_waits_for_a_lazy_device():
    from neuronkit.workloads.generation import _FirstTokenClock

    order = []

    class LazyValue:
        def __float__(self):
            order.append("read")
            return 0.0

    class Scores:                               # logits on a device that computes lazily
        device = torch.device("meta")

        def __getitem__(self, index):
            return LazyValue()

    clock = _FirstTokenClock()
    scores = Scores()
    assert clock(None, scores) is scores
    assert order == ["read"] and clock.at is not None
    clock(None, scores)                         # only the first token is timed
    assert order == ["read"]
    cpu = _FirstTokenClock()
    cpu(None, torch.zeros(1, 4))
    assert cpu.at is not None


# ---- the plan: pure, no model, no torch.compile ------------------------------------------------

def ids_of(*lengths):
    """Token ids of prompts with these lengths (token i of each prompt is i + 1)."""
    return [list(range(1, n + 1)) for n in lengths]


def test_plan_groups_by_bucket_in_arrival_order_and_fills_short_batches():
    plan = plan_generation(ids_of(5, 20, 3, 18, 7), 10, [8, 32], batch_size=2)
    assert [(b.bucket, b.prompts, b.rows) for b in plan.batches] == \
        [(8, (0, 2), 2), (8, (4,), 2), (32, (1, 3), 2)]
    assert plan.batches[1].row_prompts == (4, 4)          # one dummy row, dropped from the result
    assert plan.batches[0].row_prompts == (0, 2)
    assert plan.padding_waste() == pytest.approx(1 - (5 + 20 + 3 + 18 + 7) / (2 * 8 * 2 + 2 * 32))
    assert plan.padding_waste(1) == pytest.approx(1 - (5 + 3) / 16)   # the batches run so far
    assert plan.padding_waste(0) == 0.0


def test_plan_without_buckets_pads_each_batch_to_its_longest_in_arrival_order():
    plan = plan_generation(ids_of(3, 9, 4, 2, 6), 4, batch_size=2)
    assert plan.buckets is None
    assert [(b.bucket, b.prompts) for b in plan.batches] == [(9, (0, 1)), (4, (2, 3)), (6, (4,))]
    assert plan.batch_size == 2 and plan_generation(ids_of(3, 4), 4).batch_size == 2  # min(n, 4)
    assert plan_generation(ids_of(*[3] * 9), 4).batch_size == 4


def test_plan_cache_lengths_are_capped_at_the_models_positions():
    plan = plan_generation(ids_of(5, 20), 10, [8, 32], batch_size=1, max_positions=60)
    assert [b.cache_len for b in plan.batches] == [cache_length(8, 10), 60]   # 32 + 32 capped
    assert [b.cache_len for b in plan_generation(ids_of(5, 20), 10, [8, 32]).batches] == [40, 64]
    with pytest.raises(ValueError, match=r"bucket 32 \+ max_new_tokens 30 exceeds the model's 60 "
                                         "positions"):
        plan_generation(ids_of(5, 20), 30, [8, 32], max_positions=60)


def test_plan_auto_buckets_come_from_these_prompts():
    lengths = [4, 4, 9, 30, 31]
    plan = plan_generation(ids_of(*lengths), 3, "auto")
    assert plan.buckets == nk.plan_buckets(lengths)
    with pytest.raises(ValueError, match="'auto'"):
        plan_generation(ids_of(4), 3, "fast")


def test_plan_truncates_on_the_left_or_names_the_long_prompt():
    with pytest.raises(ValueError, match=r"prompt 1 has 20 tokens.*Buckets\(\[8, 16\]\).*"
                                         "truncate='left'"):
        plan_generation(ids_of(3, 20), 4, [8, 16])
    plan = plan_generation(ids_of(3, 20), 4, [8, 16], truncate="left")
    assert plan.token_ids == ((1, 2, 3), tuple(range(5, 21)))          # the last 16 tokens kept
    assert [b.bucket for b in plan.batches] == [8, 16]
    with pytest.raises(ValueError, match="truncate"):
        plan_generation(ids_of(3), 4, [8], truncate="right")


def test_plan_counts_the_distinct_graphs_it_may_compile():
    plan = plan_generation(ids_of(3, 5, 3, 5, 12), 6, [8, 16], batch_size=2)
    assert [b.shape for b in plan.batches] == [(8, 40), (8, 40), (16, 48)]
    assert plan.graphs == (PlannedGraph("prefill", 2, 8, 40), PlannedGraph("decode", 2, 8, 40),
                           PlannedGraph("prefill", 2, 16, 48), PlannedGraph("decode", 2, 16, 48))
    assert plan.planned_graphs == 4
    eager = plan_generation(ids_of(3, 5, 3, 5, 12), 6, [8, 16], batch_size=2, prefill="eager")
    assert eager.graphs == (PlannedGraph("decode", 2, 8, 40), PlannedGraph("decode", 2, 16, 48))
    assert plan_generation(ids_of(3, 5, 12), 6, [8, 16], compile=False).planned_graphs == 0
    # without buckets each distinct longest length is its own pair of graphs
    assert plan_generation(ids_of(3, 5, 3, 5), 6, batch_size=1).planned_graphs == 4
    with pytest.raises(ValueError, match="prefill must be 'compiled' .* or 'eager'"):
        plan_generation(ids_of(3), 6, prefill="lazy")


@pytest.mark.parametrize("args, kwargs, text", [
    ((ids_of(3), 0), {}, "max_new_tokens must be a positive int"),
    ((ids_of(3), 4), {"batch_size": 0}, "batch_size must be a positive int"),
    ((ids_of(3), 4, [0, 8]), {}, "positive"),
    (([[1], []], 4), {}, "prompt 1 has no tokens"),
])
def test_plan_rejects_bad_values(args, kwargs, text):
    with pytest.raises(ValueError, match=text):
        plan_generation(*args, **kwargs)


# ---- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("prompts, err, text", [
    ([], ValueError, "prompts is empty"),
    (["ok", ""], ValueError, "prompt 1 is an empty string"),
    (None, TypeError, "str or a list of str"),
    (42, TypeError, "str or a list of str"),
    (torch.tensor([[1, 2]]), TypeError, "not token ids or tensors"),
    (["ok", 7], TypeError, "prompt 1 is a int"),
    (["ok", None], TypeError, "prompt 1 is a NoneType"),
    ([[1, 2, 3]], TypeError, "prompt 0 is a list"),
])
def test_bad_prompts(model, tok, prompts, err, text):
    with pytest.raises(err, match=text):
        nk.generate(model, tok, prompts, compile=False)


def test_prompt_longer_than_the_largest_bucket(model, tok):
    prompt = " ".join(WORDS * 3)
    n = n_tokens(tok, prompt)
    with pytest.raises(ValueError, match=rf"prompt 1 has {n} tokens.*Buckets\(\[8, 16\]\).*"
                                         r"truncate='left'"):
        nk.generate(model, tok, ["the cat", prompt], buckets=[8, 16], compile=False)


@pytest.mark.parametrize("kwargs, err, text", [
    ({"max_new_tokens": 0}, ValueError, "max_new_tokens"),
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"truncate": "right"}, ValueError, "truncate"),
    ({"buckets": "fast"}, ValueError, "'auto'"),
    ({"buckets": [0, 8]}, ValueError, "positive"),
    ({"cache_implementation": "dynamic"}, ValueError, "sets .*cache_implementation"),
    ({"backend": "no-such-backend"}, ValueError, "unknown compile backend"),
    ({"recorder": "x"}, TypeError, r"recorder must be a neuronkit CompileRecorder or None.*"
                                   r"got a str: 'x'.*nk\.CompileRecorder\(log_path='x'\)"),
    ({"recorder": object()}, TypeError, "recorder must be a neuronkit CompileRecorder"),
])
def test_bad_options(model, tok, kwargs, err, text):
    with pytest.raises(err, match=text):
        nk.generate(model, tok, ["the cat"], **kwargs)


# ---- compile settings per device -------------------------------------------------------------

def _fake_model(kind):
    return types.SimpleNamespace(device=types.SimpleNamespace(type=kind))


def test_compile_settings_per_device(monkeypatch):
    monkeypatch.delenv("NEURONKIT_CPU_BACKEND", raising=False)
    kw, name = _compile_kwargs(_fake_model("neuron"), True, None, {})
    assert kw == {} and name == "neuron"                 # transformers' own neuron default
    kw, name = _compile_kwargs(_fake_model("cpu"), True, None, {})
    cc = kw["compile_config"]
    assert name == "eager" == cc.backend and cc == nk.compile_config("eager")  # any device
    kw, name = _compile_kwargs(_fake_model("cuda"), True, None, {})
    assert name == "inductor" and kw["compile_config"].dynamic is False
    assert _compile_kwargs(_fake_model("cpu"), False, None, {}) == ({"disable_compile": True}, None)
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "aot_eager")
    assert _compile_kwargs(_fake_model("cpu"), True, None, {})[1] == "aot_eager"
    assert _compile_kwargs(_fake_model("cpu"), True, "eager", {})[1] == "eager"


def test_inputs_stay_on_cpu_and_the_cache_is_static_per_bucket(model, tok, monkeypatch):
    from transformers import StaticCache

    seen = []
    real = model.generate
    left_padding_verdict(model, tok("the cat")["input_ids"], tok.pad_token_id)  # its own calls

    def spy(**kw):
        cache = kw.get("cache", kw.get("past_key_values"))
        seen.append((kw["input_ids"].device.type, kw["attention_mask"].device.type,
                     type(cache), tuple(kw["input_ids"].shape)))
        return real(**kw)

    monkeypatch.setattr(model, "generate", spy)
    nk.generate(model, tok, ["the cat", "rain " * 20], max_new_tokens=2, buckets=[8, 64],
                batch_size=2, compile=False)
    assert [(i, m, issubclass(c, StaticCache), shape) for i, m, c, shape in seen] == [
        ("cpu", "cpu", True, (2, 8)), ("cpu", "cpu", True, (2, 64))]


# ---- pipeline --------------------------------------------------------------------------------

@pytest.fixture
def pipeline_calls(monkeypatch):
    import transformers

    calls = []
    monkeypatch.setattr(transformers, "pipeline",
                        lambda task, **kw: calls.append((task, kw)) or "pipe")
    return calls


def test_pipeline_passes_neuron_explicitly(fake_neuron, pipeline_calls):
    assert nk.pipeline("text-generation", "org/model", max_new_tokens=5) == "pipe"
    assert pipeline_calls == [("text-generation",
                               {"model": "org/model", "device": "neuron", "max_new_tokens": 5})]
    with pytest.warns(UserWarning, match="device_map='auto'"):
        nk.pipeline("text-generation", "org/model", device_map="auto")
    assert pipeline_calls[-1][1]["device"] == "neuron" and "device_map" not in pipeline_calls[-1][1]


def test_pipeline_rejects_a_device_map_dict_by_name(pipeline_calls):
    with pytest.raises(TypeError, match=r"device_map must be one device.*got dict"):
        nk.pipeline("text-generation", "org/model", device_map={"": "cpu"})
    assert pipeline_calls == []
    nk.pipeline("text-generation", "org/model", device_map=torch.device("cpu"))
    assert pipeline_calls[-1][1]["device"] == "cpu"


def test_pipeline_keeps_a_loaded_models_device(model, pipeline_calls):
    nk.pipeline("text-generation", model)
    assert pipeline_calls[-1][1]["device"] == "cpu" and pipeline_calls[-1][1]["model"] is model
    with pytest.raises(ValueError, match="loaded on cpu"):
        nk.pipeline("text-generation", model, device="cuda")


def test_pipeline_on_cpu_really_runs(model, tok):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe = nk.pipeline("text-generation", model, tokenizer=tok)
    out = pipe("the cat", max_new_tokens=3, do_sample=False)
    assert pipe.device.type == "cpu" and out[0]["generated_text"].startswith("the cat")
