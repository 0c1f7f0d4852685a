"""Warm-up before serving: every graph of a plan compiled up front, none left for requests."""
from __future__ import annotations

import json

import pytest
import torch

import neuronkit as nk
from neuronkit.apps.cli import main
from neuronkit.log.compile_log import CompileLog
from neuronkit.workloads.warm_up import WarmupManifest, WarmupStep, _filler_prompt, new_token_band, warmup

BUCKETS = [8, 16]   # x batch sizes [1, 2] x (prefill + decode): 8 graphs, over a limit of 4


def test_the_facade_gives_the_function_and_the_manifest():
    assert nk.warmup is warmup and nk.WarmupManifest is WarmupManifest


def test_new_token_band_is_the_power_of_two_room_of_the_cache():
    assert new_token_band(1) == new_token_band(32) == (1, 32)
    assert new_token_band(33) == new_token_band(64) == (33, 64)
    assert new_token_band(100) == (65, 128)


@pytest.mark.parametrize("bucket, shorter", [(4, 0), (8, 4), (16, 8), (64, 32)])
def test_synthetic_prompts_have_exactly_bucket_tokens_and_no_pad(tok, bucket, shorter):
    text = _filler_prompt(tok, bucket, shorter)
    ids = tok(text, add_special_tokens=True)["input_ids"]
    assert len(ids) == bucket and tok.pad_token_id not in ids


@pytest.mark.parametrize("kwargs, text", [
    ({"batch_sizes": [0]}, "batch_sizes must be positive ints"),
    ({"batch_sizes": []}, "batch_sizes must be positive ints"),
    ({"max_new_tokens": 0}, "max_new_tokens must be a positive int"),
    ({"buckets": [10**6]}, "exceeds the model's"),
])
def test_a_bad_plan_is_refused_before_anything_compiles(model, tok, kwargs, text):
    args = {"buckets": [8], "batch_sizes": [1], "max_new_tokens": 4, **kwargs}
    with nk.CompileRecorder() as rec, pytest.raises(ValueError, match=text):
        nk.warmup(model, tok, **args)
    assert rec.events == []


def test_a_manifest_round_trips_through_json(tmp_path):
    manifest = WarmupManifest(
        graphs=[{"batch_size": 1, "bucket": 8, "cache_len": 40, "graphs": 1, "kernels": 0,
                 "compile_s": 1.5, "wall_s": 2.0, "neff_compile_s": None, "neff_cache": None,
                 "cache_keys": None}],
        device="cpu", backend="eager", torch="2", transformers="4", max_new_tokens=4,
        new_token_band=(1, 32), buckets=[8], batch_sizes=[1], total_s=2.0)
    path = manifest.save(tmp_path / "sub" / "warmup.json")
    data = json.loads(path.read_text())
    assert data["format"] == "neuronkit-warmup" and "log" not in data
    assert "TORCH_NEURONX_NEFF_CACHE_DIR" in data["travel"]
    assert WarmupManifest.load(path) == manifest
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(ValueError, match="not a neuronkit warm-up manifest"):
        WarmupManifest.load(tmp_path / "other.json")


def test_the_manifest_keeps_the_dtype_and_old_manifests_still_load(tmp_path):
    """A serving process loads the model in the warm-up's dtype (other dtypes are other graphs);
    manifests written before the field existed load with ``dtype`` None."""
    manifest = WarmupManifest(graphs=[], device="cpu", backend="eager", torch="2", transformers="5",
                              max_new_tokens=4, new_token_band=(1, 32), buckets=[8],
                              batch_sizes=[1], total_s=1.0, dtype="bfloat16")
    path = manifest.save(tmp_path / "new.json")
    assert json.loads(path.read_text())["dtype"] == "bfloat16" and WarmupManifest.load(path) == manifest
    old = {k: v for k, v in json.loads(path.read_text()).items() if k != "dtype"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert WarmupManifest.load(tmp_path / "old.json").dtype is None


@pytest.mark.slow
def test_after_warmup_a_plan_of_four_steps_serves_with_zero_compiles(model, tok, compiler_reset,
                                                                     recompile_limit_4):
    steps: list[WarmupStep] = []
    manifest = nk.warmup(model, tok, BUCKETS, batch_sizes=[2, 1], max_new_tokens=3,
                         backend="eager", on_step=steps.append)
    assert [(g["batch_size"], g["bucket"]) for g in manifest.graphs] == [
        (bs, b) for bs in (1, 2) for b in BUCKETS]
    assert [s.done for s in steps] == list(range(1, 5)) and steps[-1].total == 4
    assert all((g["graphs"], g["prefill_graphs"], g["decode_graphs"]) == (2, 1, 1)
               and g["compile_s"] > 0 for g in manifest.graphs)
    assert all(g["cache_len"] == g["bucket"] + 32 for g in manifest.graphs)
    assert all(g["neff_compile_s"] is None and g["cache_keys"] is None for g in manifest.graphs)
    assert isinstance(manifest.log, CompileLog)
    kinds = [e.kind for e in manifest.log.events]
    assert "limit_hit" not in kinds and kinds.count("first") + kinds.count("recompile") == 8
    assert torch._dynamo.config.recompile_limit == 4            # restored after the warm-up
    json.loads(manifest.to_json())

    prompts = ["hi", "a bit longer", "one two three", "the cat sat on the mat",
               "hello there, how are you today?", "x"]
    lengths = [len(tok(p)["input_ids"]) for p in prompts]
    assert max(lengths) <= max(BUCKETS)
    assert len({nk.Buckets(BUCKETS).fit(n) for n in lengths}) == len(BUCKETS)   # every bucket
    with nk.CompileRecorder() as rec:
        for batch_size in (1, 2):
            for max_new_tokens in (2, 5):                           # the same band as 3
                result = nk.generate(model, tok, prompts, max_new_tokens=max_new_tokens,
                                     buckets=BUCKETS, batch_size=batch_size, recorder=rec)
                assert (result.graphs, result.eager_calls) == (0, 0)
                assert set(result.cache_lengths) <= {b + 32 for b in BUCKETS}
    assert rec.events == []


@pytest.mark.slow
def test_the_cli_warms_up_with_a_progress_bar_and_writes_manifest_and_log(
        tiny_model_path, tmp_path, capsys, compiler_reset):
    manifest_path, log_path = tmp_path / "warmup.json", tmp_path / "compile.jsonl"
    code = main(["warmup", str(tiny_model_path), "--buckets", "16,8", "--batch-sizes", "1",
                 "--max-new-tokens", "4", "--device", "cpu", "--dtype", "float32",
                 "--backend", "eager", "--manifest", str(manifest_path), "--log", str(log_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "warm-up of 2 graphs" in out and "bucket     8" in out and "bucket    16" in out
    assert "2/2" in err and "ETA" in err                         # tqdm's bar, with the ETA
    manifest = WarmupManifest.load(manifest_path)
    assert [g["bucket"] for g in manifest.graphs] == [8, 16] and manifest.max_new_tokens == 4
    assert manifest.log is None and str(manifest_path) in out
    assert len(CompileLog.load(log_path).events) == 4     # a prefill and a decode graph per bucket


@pytest.mark.parametrize("argv, text", [
    (["--buckets", "8,x"], "comma-separated positive ints"),
    (["--batch-sizes", "0"], "comma-separated positive ints"),
    (["--max-new-tokens", "-1"], "positive int"),
])
def test_the_cli_refuses_bad_input_with_exit_2(argv, text, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["warmup", "some-model", *argv])
    assert exit_.value.code == 2 and text in capsys.readouterr().err


def test_the_cli_says_when_the_model_is_missing(tmp_path, capsys):
    assert main(["warmup", str(tmp_path / "no-such-model"), "--device", "cpu"]) == 2
    assert "neuronkit warmup: error:" in capsys.readouterr().err


@pytest.mark.slow
def test_on_neuron_the_manifest_has_neff_times_cache_states_and_keys(tiny_model_path, monkeypatch):
    from neuron_fake import installed_fake

    for name in ("NEURON_CC_FLAGS", "NEURON_COMPILER_OPT_LEVEL", "NEURON_LAUNCH_BLOCKING",
                 "TORCH_NEURONX_METRICS_ENABLED", "TORCH_NEURONX_NEFF_DISABLE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    tok = nk.load_tokenizer(tiny_model_path)
    with installed_fake() as fake:
        fake.plan("compiled", duration_s=120.0)
        fake.plan("compiled", duration_s=90.0)
        manifest = nk.warmup(model, tok, [8, 16], max_new_tokens=3, backend="neuron")
    # each step builds a prefill and a decode graph: the first step's two builds are 120 + 90 s
    assert [(g["neff_compile_s"], g["neff_cache"]) for g in manifest.graphs] == [
        (210.0, "compiled"), (4.0, "compiled")]      # the next step's two: the default 2 s each
    keys = [g["cache_keys"] for g in manifest.graphs]
    assert all(k and len(k) == 2 for k in keys) and not set(keys[0]) & set(keys[1])
    assert manifest.torch_neuronx is not None and manifest.backend == "neuron"


def test_importing_the_module_first_keeps_nk_warmup_the_function():
    """The module is not named like the function: importing it never shadows ``nk.warmup``."""
    import importlib
    import subprocess
    import sys

    code = ("import neuronkit as nk, neuronkit.workloads.warm_up; "
            "assert callable(nk.warmup) and nk.warmup is neuronkit.workloads.warm_up.warmup")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
    assert importlib.import_module("neuronkit.workloads.warm_up").warmup is nk.warmup
