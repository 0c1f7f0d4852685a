"""server_buckets: plans in the server's words (hf, vllm-neuron, nxdi), parse_config, and
check_config. The key names are pinned against the cited excerpts in
tests/data/server_bucket_keys.md (Neuron 2.33.0 docs, NxDI tag v0.7.14366)."""
from __future__ import annotations

import ast
import inspect
import json
import random
import re
from pathlib import Path

import pytest

import neuronkit as nk
from neuronkit.advice.server_buckets import FAR, ServerConfig, check_config, parse_config, render
from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S, DEFAULT_TOKEN_COST_S, plan_cost

CITED = Path(__file__).resolve().parents[1] / "data" / "server_bucket_keys.md"


def cited(section: str) -> str:
    """The text of one ``## section`` of the cited-excerpts file."""
    parts = re.split(r"^## ", CITED.read_text(encoding="utf-8"), flags=re.M)
    found = [p for p in parts if p.startswith(section + "\n")]
    assert found, f"no section {section!r} in {CITED}"
    return found[0]


def uncited(keys: set[str], section: str) -> set[str]:
    """The keys that appear nowhere in the section's text, as whole words."""
    text = cited(section)
    return {k for k in keys if not re.search(rf"(?<![\w]){re.escape(k)}(?![\w])", text)}


def json_keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in json_keys(v)}
    return set()


def traffic(n: int = 2000, seed: int = 0) -> tuple[list[int], list[int]]:
    """Long-tailed prompt lengths and prompt + output lengths."""
    rng = random.Random(seed)
    prompts = [min(4000, int(rng.lognormvariate(4.5, 0.8)) + 1) for _ in range(n)]
    return prompts, [p + rng.randint(1, 256) for p in prompts]


def test_the_key_pin_can_fail():
    assert uncited({"num_batched_tokens_buckets", "context_length_buckets"}, "vllm-neuron") == {
        "context_length_buckets"}
    assert uncited({"num_seqs_buckets"}, "nxdi") == {"num_seqs_buckets"}


def test_vllm_output_is_json_with_exactly_the_cited_keys_and_constraints():
    text = render([96, 300, 1100], "vllm-neuron", batch_sizes=[8, 1, 4], max_len=1400)
    data = json.loads(text)
    assert uncited(json_keys(data), "vllm-neuron") == set()
    neuron = data["additional_config"]["neuron_config"]
    assert neuron["num_batched_tokens_buckets"] == [96, 300, 1100]
    assert neuron["num_seqs_buckets"] == [1, 4, 8]
    # "Largest must equal max_num_batched_tokens" / "Largest must equal max_num_seqs"
    assert data["max_num_batched_tokens"] == neuron["num_batched_tokens_buckets"][-1]
    assert data["max_num_seqs"] == neuron["num_seqs_buckets"][-1]
    assert data["max_model_len"] == 1400


def test_vllm_without_batch_sizes_leaves_num_seqs_to_the_server_default():
    data = json.loads(render([128], "vllm-neuron", batch_sizes=None, max_len=256))
    assert "num_seqs_buckets" not in data["additional_config"]["neuron_config"]
    assert "max_num_seqs" not in data


def test_nxdi_output_parses_as_neuronconfig_keywords_with_cited_keys_and_constraints():
    text = render([64, 200, 900], "nxdi", batch_sizes=[2], max_len=1000,
                  decode_buckets=[300, 1024])
    call = ast.parse(f"NeuronConfig({text})", mode="eval").body
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert uncited(set(kwargs), "nxdi") == set()
    assert kwargs["enable_bucketing"] is True    # the lists are ignored without it
    assert kwargs["context_encoding_buckets"] == [64, 200, 900]
    assert kwargs["token_generation_buckets"] == [300, 1024]
    # config.py:189-195: largest context bucket <= max_context_length, token gen <= max_length
    assert kwargs["context_encoding_buckets"][-1] <= kwargs["max_context_length"]
    assert kwargs["max_context_length"] <= kwargs["seq_len"]
    assert kwargs["token_generation_buckets"][-1] <= kwargs["seq_len"]
    assert kwargs["batch_size"] == 2


def test_nxdi_decode_defaults_to_one_bucket_at_max_len_and_must_cover_it():
    kwargs = parse_config(render([128, 512], "nxdi", batch_sizes=None, max_len=700))
    assert kwargs.decode == (700,) and kwargs.limits["seq_len"] == 700
    with pytest.raises(ValueError, match="must cover max_len"):
        render([128], "nxdi", batch_sizes=None, max_len=700, decode_buckets=[256, 512])


def test_hf_output_is_python_calling_neuronkit_with_real_parameters():
    text = render([40, 160], "hf", batch_sizes=[1, 4], max_len=300)
    tree = ast.parse(text)
    calls = {n.func.attr: n for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert set(calls) == {"Buckets", "warmup", "generate"}
    for name in ("warmup", "generate"):
        params = inspect.signature(getattr(nk, name)).parameters
        assert {k.arg for k in calls[name].keywords} <= set(params)
    assert ast.literal_eval(calls["Buckets"].args[0]) == [40, 160]
    assert "max_new_tokens=140" in text and "batch_sizes=(1, 4)" in text


@pytest.mark.parametrize("form", ["hf", "vllm-neuron", "nxdi"])
def test_render_then_parse_gives_the_plan_back(form):
    config = parse_config(render([256, 32, 100], form, batch_sizes=[1, 2], max_len=512))
    assert config.form == form
    assert config.prefill == (32, 100, 256)


@pytest.mark.parametrize("bad", [dict(max_len=100), dict(max_len=True)])
def test_render_refuses_a_max_len_below_the_largest_bucket(bad):
    with pytest.raises(ValueError, match="max_len"):
        render([64, 128], "vllm-neuron", batch_sizes=None, **bad)


def test_render_refuses_an_unknown_form():
    with pytest.raises(ValueError, match="hf, vllm-neuron, nxdi"):
        render([64], "tgi", batch_sizes=None, max_len=64)


@pytest.mark.parametrize("text,form,prefill", [
    ("64,128,256", "hf", (64, 128, 256)),
    ("[128, 64]", "hf", (64, 128)),
    ("buckets=nk.Buckets([32, 64])", "hf", (32, 64)),
    ('{"num_batched_tokens_buckets": [256, 512]}', "vllm-neuron", (256, 512)),
    ("{'additional_config': {'neuron_config': {'num_batched_tokens_buckets': [128]}}}",
     "vllm-neuron", (128,)),
    ("NeuronConfig(tp_degree=8, torch_dtype=torch.bfloat16, enable_bucketing=True, "
     "context_encoding_buckets=[512, 128], token_generation_buckets=[1024], seq_len=1024)",
     "nxdi", (128, 512)),
    ('{"neuron_config": {"context_encoding_buckets": [128], "token_generation_buckets": [256],'
     ' "seq_len": 256}}', "nxdi", (128,)),
])
def test_parse_config_detects_the_form(text, form, prefill):
    config = parse_config(text)
    assert (config.form, config.prefill) == (form, prefill)


def test_parse_config_fills_a_left_out_list_with_the_documented_default():
    # "Default: Power-of-2 token counts from 128 up to max_num_batched_tokens"
    config = parse_config('{"max_num_batched_tokens": 1000, "additional_config": '
                          '{"neuron_config": {"num_seqs_buckets": [1, 8]}}}')
    assert config.prefill == (128, 256, 512, 1000) and config.batch == (1, 8)
    # "Power-of-2 from 1 to max_num_seqs"
    config = parse_config('{"max_num_seqs": 6, "neuron_config": {"num_batched_tokens_buckets": [64]}}')
    assert config.batch == (1, 2, 4, 6)


@pytest.mark.parametrize("junk", [
    "", "   ", "\x00\x01binary", "hello world", "{not json", "[" * 100_000,
    '{"num_batched_tokens_buckets": [64, 64]}', '{"num_batched_tokens_buckets": [0, 64]}',
    '{"num_batched_tokens_buckets": [true]}', '{"num_batched_tokens_buckets": "64"}',
    f'{{"num_batched_tokens_buckets": [{2 ** 70}]}}', '{"other": 1}', "x" * 2_000_000,
    "context_encoding_buckets=[128", "64,abc",
])
def test_parse_config_refuses_junk_with_a_value_error(junk):
    with pytest.raises(ValueError):
        parse_config(junk)


def test_check_on_powers_of_two_names_the_unused_buckets():
    prompts = [30, 50, 60, 100, 120, 200]
    config = parse_config(json.dumps({"max_model_len": 2048, "additional_config": {
        "neuron_config": {"num_batched_tokens_buckets": [64, 128, 256, 512, 1024, 2048]}}}))
    report = check_config(prompts, [p + 10 for p in prompts], config, planned=[64, 128, 200])
    phase = report.phases[0]
    assert phase.unused == [512, 1024, 2048]
    assert phase.used == {64: 3, 128: 2, 256: 1}
    assert "unused buckets: [512, 1024, 2048]" in report.text()
    assert report.to_dict()["phases"][0]["unused"] == [512, 1024, 2048]


def test_check_counts_overflow_far_padding_and_savings_by_hand():
    prompts, totals = [10, 60, 64, 65, 300], [20, 100, 100, 200, 400]
    config = ServerConfig("nxdi", (64, 256), (128, 256), (),
                          {"seq_len": 256, "max_context_length": 256})
    report = check_config(prompts, totals, config, planned=[64, 65, 300])
    cte, tkg = report.phases
    assert (cte.overflow, cte.longest) == (1, 300)
    assert cte.far == 2                           # 10 -> 64 and 65 -> 256 (>= FAR x)
    assert FAR == 2
    assert cte.padding == (54 + 4 + 0 + 191)
    assert tkg.key == "token_generation_buckets"
    assert (tkg.used, tkg.overflow) == ({128: 3, 256: 1}, 1)
    assert report.limits == ["1 requests with prompt + output longer than seq_len=256",
                             "1 requests with prompt longer than max_context_length=256"]
    saves = report.to_dict()["saves"]
    assert saves == {"graphs": 2 - 3, "padding_tokens": 249 - (54 + 4), "overflow": 1}
    assert "costs 1 graphs more, saves 191 padded tokens" in report.text()


def test_check_a_planned_config_against_powers_of_two_on_long_tailed_traffic():
    prompts, totals = traffic()
    planned = list(nk.plan_buckets(prompts, max_buckets=4, multiple_of=64))
    pow2 = parse_config("128,256,512,1024,2048,4096")
    report = check_config(prompts, totals, pow2, planned)
    assert report.planned.overflow == 0 and report.planned.unused == []
    assert report.to_dict()["saves"]["graphs"] == 6 - len(planned)
    # the report's graphs and padding price both plans as nk.plan_cost does: the plan is cheaper
    def cost(phase):
        return len(phase.buckets) * DEFAULT_COMPILE_COST_S + phase.padding * DEFAULT_TOKEN_COST_S
    assert cost(report.planned) == pytest.approx(plan_cost(prompts, planned))
    assert cost(report.planned) < cost(report.phases[0])
    assert report.phases[0].unused == [2048, 4096]
    json.dumps(report.to_dict())
    mine = check_config(prompts, totals, parse_config(
        render(planned, "nxdi", batch_sizes=None, max_len=max(totals))), planned)
    assert mine.phases[0].overflow == 0 and mine.limits == []


def test_check_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="one entry per request"):
        check_config([1, 2], [3], parse_config("64"), [64])
