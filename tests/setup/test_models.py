"""The embedded tiny model, explicit loading, the device_map="auto" guard, placement checks."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings
from importlib import resources

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

import neuronkit as nk
from neuronkit.examples import train_tiny
from neuronkit.setup import tiny
from neuronkit.setup.device import DeviceFallbackWarning
from neuronkit.setup.load_errors import CorruptWeightsError, ModelNotFoundError
from neuronkit.setup.models import DeviceMapWarning
from neuronkit.setup.placement import PlacementWarning

TEXT = "The river carried the boats down to the sea."
SHIPPED = resources.files("neuronkit").joinpath("data/tiny-qwen3")


# --------------------------------------------------------------------------- tiny_model

def test_tiny_model_is_built_under_neuronkit_home(tiny_model_path, neuronkit_home):
    assert tiny_model_path == neuronkit_home / "tiny-qwen3"
    assert nk.tiny_model() == tiny_model_path  # no argument: $NEURONKIT_HOME
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json"):
        assert (tiny_model_path / name).is_file(), name
    assert (tiny_model_path / "model.safetensors").stat().st_size < 2_000_000


def test_tiny_model_config_and_special_tokens_agree(tiny_model_path):
    config = json.loads((tiny_model_path / "config.json").read_text())
    gen = json.loads((tiny_model_path / "generation_config.json").read_text())
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    assert config["model_type"] == "qwen3"
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"], config["head_dim"]) == (64, 2, 4, 2, 16)
    assert config["vocab_size"] == len(tok)
    assert tok.pad_token == "<|pad|>" and tok.eos_token == "<|endoftext|>"
    assert tok.pad_token_id != tok.eos_token_id
    assert config["pad_token_id"] == gen["pad_token_id"] == tok.pad_token_id
    assert config["eos_token_id"] == gen["eos_token_id"] == tok.eos_token_id
    assert config["bos_token_id"] == gen["bos_token_id"] == tok.eos_token_id
    assert gen["do_sample"] is False
    assert tok.decode(tok(TEXT).input_ids) == TEXT  # byte-level BPE round-trips


def test_tiny_model_build_is_deterministic_and_leaves_global_rng_alone(tmp_path):
    rng_before = torch.random.get_rng_state()
    a, b = nk.tiny_model(tmp_path / "a"), nk.tiny_model(tmp_path / "b")
    assert torch.equal(rng_before, torch.random.get_rng_state())
    assert a != b
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and len(wa) > 10
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    ta, tb = AutoTokenizer.from_pretrained(a), AutoTokenizer.from_pretrained(b)
    assert ta(TEXT).input_ids == tb(TEXT).input_ids


def test_tiny_model_reloads_and_generates(tiny_model_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert 50_000 < model.num_parameters() < 500_000
    batch = tok(["The old bridge", "A river begins as rain on the hill"], return_tensors="pt",
                padding=True, padding_side="left")
    kw = dict(max_new_tokens=6, min_new_tokens=6)
    dynamic = model.generate(**batch, **kw)
    static = model.generate(**batch, **kw, cache_implementation="static")
    assert dynamic.shape == (2, batch.input_ids.shape[1] + 6)
    assert torch.equal(dynamic, static)  # greedy: both caches give the same tokens
    assert torch.equal(dynamic, model.generate(**batch, **kw))  # deterministic


def test_tiny_model_holds_the_shipped_trained_files(tiny_model_path):
    shipped = {f.name: f.read_bytes() for f in SHIPPED.iterdir() if f.is_file()}
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= shipped.keys()
    assert sorted(p.name for p in tiny_model_path.iterdir()) == sorted([*shipped, tiny.STAMP_FILE])
    for name, data in shipped.items():
        assert (tiny_model_path / name).read_bytes() == data, name
    assert sum(map(len, shipped.values())) < 1_000_000


def test_build_copies_without_torch(tmp_path, monkeypatch):
    for name in ("torch", "transformers", "tokenizers", "safetensors"):
        monkeypatch.setitem(sys.modules, name, None)  # importing any of them now fails
    path = tiny.tiny_model(tmp_path)
    assert tiny._is_built(path)


def test_shipped_tokenizer_is_the_one_trained_on_the_corpus(tiny_model_path, tmp_path):
    train_tiny.build_tokenizer().save_pretrained(tmp_path)
    assert (tmp_path / "tokenizer.json").read_bytes() == \
        (tiny_model_path / "tokenizer.json").read_bytes()
    built, shipped = AutoTokenizer.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(
        tiny_model_path)
    sample = train_tiny.training_text()[:2000] + TEXT
    assert built(sample).input_ids == shipped(sample).input_ids


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("prompt", ["Trainium compiles one graph for every input shape",
                                    "The old bridge", "The French Bread Law states"])
def test_tiny_model_speaks_corpus_words(tiny_model_path, tok, prompt, dtype):
    model = nk.load_model(tiny_model_path, device="cpu", dtype=dtype)
    batch = tok(prompt, return_tensors="pt")
    out = model.generate(**batch, max_new_tokens=12, do_sample=False)
    assert out.shape[1] == batch.input_ids.shape[1] + 12  # no early eos: fixed shapes stay fixed
    new = tok.decode(out[0, batch.input_ids.shape[1]:], skip_special_tokens=True)
    words = _words(new)[1 if new[:1].isalpha() else 0:-1]  # the ends may be cut mid-word
    vocabulary = set(_words(train_tiny.training_text()))
    assert len(words) >= 3, new
    assert sum(w in vocabulary for w in words) >= 0.8 * len(words), new
    assert len(set(new.replace(" ", ""))) >= 5, new  # not one character over and over


def test_built_model_is_reused_not_rebuilt(tiny_model_path, monkeypatch):
    def refuse(folder):
        raise AssertionError("tiny_model rebuilt a complete model")

    monkeypatch.setattr(tiny, "_build_into", refuse)
    assert nk.tiny_model() == tiny_model_path


@pytest.mark.parametrize("damage", ["missing weights", "old recipe", "random weights"])
def test_incomplete_or_stale_build_is_replaced(tmp_path, damage):
    path = nk.tiny_model(tmp_path)
    if damage == "missing weights":
        (path / "model.safetensors").unlink()
    elif damage == "old recipe":
        (path / tiny.STAMP_FILE).write_text(json.dumps({"recipe": -1}))
    else:  # what neuronkit before the trained model left in a user's cache
        corpus = "\n\n".join(train_tiny.corpus()).encode()
        stamp = {"recipe": 1, "corpus_sha256": hashlib.sha256(corpus).hexdigest()[:16]}
        (path / tiny.STAMP_FILE).write_text(json.dumps(stamp, indent=2) + "\n")
        (path / "model.safetensors").write_bytes(b"random weights")
    assert nk.tiny_model(tmp_path) == path
    assert (path / "model.safetensors").read_bytes() == \
        SHIPPED.joinpath("model.safetensors").read_bytes()
    assert tiny._is_built(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-qwen3", "tiny-qwen3.lock"]


def test_leftovers_of_a_killed_build_are_removed(tmp_path):
    (tmp_path / ".tiny-qwen3-killed").mkdir()
    (tmp_path / ".tiny-qwen3-killed" / "config.json").write_text("{")
    nk.tiny_model(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-qwen3", "tiny-qwen3.lock"]


def test_concurrent_first_calls_build_once(tmp_path, monkeypatch):
    real_build, builds = tiny._build_into, []

    def slow_build(folder):
        builds.append(folder)
        time.sleep(0.3)  # keep the others waiting on the lock
        real_build(folder)

    monkeypatch.setattr(tiny, "_build_into", slow_build)
    results, errors = [], []

    def call():
        try:
            results.append(nk.tiny_model(tmp_path))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(builds) == 1 and set(results) == {tmp_path / "tiny-qwen3"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-qwen3", "tiny-qwen3.lock"]


@pytest.mark.slow
def test_two_processes_building_at_once(tmp_path, tiny_model_path):
    code = "import neuronkit as nk; print(nk.tiny_model())"
    env = {**os.environ, "NEURONKIT_HOME": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert {out.strip() for out, _ in outs} == {str(tmp_path / "tiny-qwen3")}
    built = tmp_path / "tiny-qwen3" / "model.safetensors"
    assert built.read_bytes() == (tiny_model_path / "model.safetensors").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-qwen3", "tiny-qwen3.lock"]


# --------------------------------------------------------------------------- load_model

@pytest.fixture
def spy_from_pretrained(monkeypatch, tiny_model_path):
    """Record the kwargs load_model passes; return a real tiny model loaded on CPU."""
    real = AutoModelForCausalLM.from_pretrained
    calls: list[dict] = []

    def fake(source, **kw):
        calls.append({"source": source, **kw})
        kw = {k: v for k, v in kw.items() if k not in ("device_map", "distributed_config")}
        return real(source, **kw)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", fake)
    return calls


def test_load_model_defaults(tiny_model_path, no_neuron):
    with pytest.warns(DeviceFallbackWarning):
        model = nk.load_model()
    assert model.dtype == torch.bfloat16 and not model.training
    assert model.name_or_path == str(tiny_model_path)
    assert nk.check_placement(model, "cpu").ok


def test_load_model_on_explicit_cpu_is_quiet(tiny_model_path, spy_from_pretrained):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    assert model.dtype == torch.float32
    assert spy_from_pretrained[0]["device_map"] == "cpu"


@pytest.mark.parametrize("dtype,expected", [("float16", torch.float16),
                                            (torch.bfloat16, torch.bfloat16),
                                            ("auto", torch.float32)])
def test_load_model_dtypes(tiny_model_path, dtype, expected):
    assert nk.load_model(tiny_model_path, device="cpu", dtype=dtype).dtype == expected


@pytest.mark.parametrize("dtype", ["bf16", "int8", 16, None])
def test_bad_dtype_lists_the_valid_ones(dtype):
    with pytest.raises(ValueError, match="unknown dtype") as err:
        nk.load_model(device="cpu", dtype=dtype)
    assert all(name in str(err.value) for name in ("'bfloat16'", "'float32'", "'auto'"))


def test_missing_path_names_what_was_tried(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelNotFoundError) as err:
        nk.load_model(missing, device="cpu")
    msg = str(err.value)
    assert str(missing) in msg and "no local folder" in msg and "Hub" in msg
    assert isinstance(err.value, FileNotFoundError)
    assert isinstance(err.value.__cause__, OSError)


def test_missing_hub_name_offline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelNotFoundError, match="Hugging Face Hub lookup for 'no-org/no-model'"):
        nk.load_tokenizer("no-org/no-model")


def test_folder_without_config(tmp_path):
    with pytest.raises(ModelNotFoundError, match="has no config.json"):
        nk.load_model(tmp_path, device="cpu")


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_file_instead_of_the_model_folder_says_so_and_names_the_folder(tiny_model_path, name,
                                                                         spy_from_pretrained):
    path = tiny_model_path / name
    with pytest.raises(ModelNotFoundError) as err:
        nk.load_model(path, device="cpu")
    msg = str(err.value)
    assert f"{path} is a file, not a folder" in msg
    assert f"{tiny_model_path} holds a config.json: pass that folder" in msg
    assert "Fix: pass the folder holding config.json" in msg
    assert "no local folder" not in msg and "Hub lookup" not in msg
    assert spy_from_pretrained == []                   # refused before transformers saw it
    with pytest.raises(ModelNotFoundError, match=r"is a file, not a folder.*"
                                                 r"holds a tokenizer_config\.json"):
        nk.load_tokenizer(path)


def test_a_file_with_no_model_beside_it(tmp_path):
    stray = tmp_path / "weights.bin"
    stray.write_bytes(b"x")
    with pytest.raises(ModelNotFoundError, match=r"weights\.bin is a file, not a folder\. Fix"):
        nk.load_model(stray, device="cpu")


@pytest.fixture
def model_copy(tiny_model_path, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(tiny_model_path, folder)
    return folder


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_weights_name_the_file_and_the_fix(model_copy, damage):
    weights = model_copy / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(b"not a safetensors file" if damage == "garbage" else data[:len(data) // 2])
    with pytest.raises(CorruptWeightsError) as err:
        nk.load_model(model_copy, device="cpu")
    msg = str(err.value)
    assert f"{weights} (SafetensorError:" in msg and "corrupt or truncated" in msg
    assert "Fix: write the folder again with model.save_pretrained" in msg
    assert type(err.value.__cause__).__name__ == "SafetensorError"
    assert isinstance(err.value, OSError)


def test_corrupt_weights_in_the_hub_cache_name_the_cached_file(tiny_model_path, tmp_path):
    repo = tmp_path / "hub" / "models--no-org--tiny"
    snapshot = repo / "snapshots" / ("a" * 40)
    shutil.copytree(tiny_model_path, snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    nk.load_model("no-org/tiny", device="cpu", cache_dir=tmp_path / "hub")   # offline, cached
    (snapshot / "model.safetensors").write_bytes(b"junk")
    with pytest.raises(CorruptWeightsError) as err:
        nk.load_model("no-org/tiny", device="cpu", cache_dir=tmp_path / "hub")
    assert str(snapshot / "model.safetensors") in str(err.value)
    assert "`hf cache rm model/no-org/tiny`" in str(err.value)


def test_corrupt_shard_is_named_among_good_ones(model_copy):
    from safetensors.torch import save_file

    weights = model_copy / "model.safetensors"
    tensors = load_file(weights)
    names = sorted(tensors)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half],
              "model-00002-of-00002.safetensors": names[half:]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, model_copy / shard, metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {k: shard for shard, keys in shards.items()
                                            for k in keys}}
    (model_copy / "model.safetensors.index.json").write_text(json.dumps(index))
    weights.unlink()
    nk.load_model(model_copy, device="cpu")            # the sharded copy loads
    bad = model_copy / "model-00002-of-00002.safetensors"
    bad.write_bytes(bad.read_bytes()[:100])
    with pytest.raises(CorruptWeightsError, match=r"1 weights file\(s\) are corrupt") as err:
        nk.load_model(model_copy, device="cpu")
    assert str(bad) in str(err.value) and "00001-of" not in str(err.value)


def test_load_tokenizer(tiny_model_path, tmp_path):
    tok = nk.load_tokenizer()
    assert tok.pad_token == "<|pad|>" and len(tok) == nk.load_model(device="cpu").config.vocab_size
    assert nk.load_tokenizer(tiny_model_path)(TEXT).input_ids == tok(TEXT).input_ids
    with pytest.raises(ModelNotFoundError, match="cannot load tokenizer"):
        nk.load_tokenizer(tmp_path / "missing")


def test_device_map_auto_without_neuron_explains(no_neuron, spy_from_pretrained):
    with pytest.warns(DeviceMapWarning, match="would mean CPU"):
        model = nk.load_model(device="cpu", device_map="auto")
    assert spy_from_pretrained[0]["device_map"] == "cpu"
    assert nk.check_placement(model, "cpu").ok


def test_device_map_auto_without_neuron_warns_once(no_neuron, spy_from_pretrained):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        nk.load_model(device_map="auto")        # device=None: no DeviceFallbackWarning on top
    assert [w.category for w in seen] == [DeviceMapWarning], [str(w.message) for w in seen]
    assert spy_from_pretrained[0]["device_map"] == nk.detect().device


@pytest.mark.parametrize("device", [None, "cpu"])
def test_device_map_auto_strict_raises_without_neuron_too(no_neuron, spy_from_pretrained, device):
    with pytest.raises(ValueError, match=r"strict=True refuses device_map='auto'.*would mean "
                                         r"CPU.*Fix: drop device_map and use device=.*or drop "
                                         r"strict=True"):
        nk.load_model(device=device, device_map="auto", strict=True)
    assert spy_from_pretrained == []  # refused before loading anything


def test_device_map_auto_with_neuron_warns_with_the_fix(fake_neuron, spy_from_pretrained):
    with pytest.warns(DeviceMapWarning, match="device_map='neuron'"), \
            pytest.warns(PlacementWarning, match="not on neuron"):  # the spy returns a CPU model
        nk.load_model(device_map="auto")
    assert spy_from_pretrained[0]["device_map"] == "neuron"


def test_device_map_auto_with_neuron_strict_raises(fake_neuron, spy_from_pretrained):
    with pytest.raises(ValueError, match="does not see Neuron"):
        nk.load_model(device_map="auto", strict=True)
    assert spy_from_pretrained == []  # refused before loading anything


def test_neuron_is_passed_explicitly_and_placement_checked(fake_neuron, spy_from_pretrained):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeviceFallbackWarning)
        with pytest.raises(RuntimeError, match=r"parameters/buffers are not on neuron"):
            nk.load_model(strict=True)  # the spy's model stayed on CPU: every tensor straggles
    assert spy_from_pretrained[0]["device_map"] == "neuron"


def test_distributed_config_means_no_device_map(spy_from_pretrained):
    marker = object()
    nk.load_model(device="cpu", distributed_config=marker)
    assert "device_map" not in spy_from_pretrained[0]
    assert spy_from_pretrained[0]["distributed_config"] is marker
    with pytest.raises(ValueError, match="cannot be combined"):
        nk.load_model(distributed_config=marker, device_map="cpu")


def test_device_and_device_map_must_agree(spy_from_pretrained):
    nk.load_model(device_map="cpu")
    assert spy_from_pretrained[-1]["device_map"] == "cpu"
    with pytest.raises(ValueError, match="disagree"):
        nk.load_model(device="cpu", device_map="meta")


# --------------------------------------------------------------------------- check_placement

@pytest.fixture
def cpu_model(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path)


def test_check_placement_all_on_cpu(cpu_model):
    report = nk.check_placement(cpu_model, "cpu")
    n = len(list(cpu_model.parameters())) + len(list(cpu_model.buffers()))
    assert report.ok and report.checked == n and report.stragglers == {}
    assert str(report) == f"placement ok: all {n} parameters and buffers are on cpu"
    assert nk.check_placement(cpu_model, torch.device("cpu", 0)).ok
    assert nk.check_placement(cpu_model).ok  # None: the device most tensors are on


def test_check_placement_reports_a_straggler(cpu_model):
    cpu_model.model.norm.to("meta")
    report = nk.check_placement(cpu_model)
    assert not report.ok and report.device == "cpu"
    assert report.stragglers == {"model.norm.weight": "meta"}
    assert "1 of" in str(report) and "model.norm.weight on meta" in str(report)


def test_check_placement_wrong_device_lists_everything_briefly(cpu_model):
    report = nk.check_placement(cpu_model, "neuron:1")
    assert len(report.stragglers) == report.checked > 10
    text = str(report)
    assert f"{report.checked} of {report.checked}" in text and "not on neuron:1" in text
    assert f"and {report.checked - 10} more" in text


def test_load_model_warns_on_stragglers(monkeypatch, cpu_model):
    cpu_model.lm_head.to("meta")
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", lambda source, **kw: cpu_model)
    with pytest.warns(PlacementWarning, match="lm_head.weight on meta"):
        assert nk.load_model(device="cpu") is cpu_model
    with pytest.raises(RuntimeError, match="lm_head.weight on meta"):
        nk.load_model(device="cpu", strict=True)


def test_check_placement_bad_device(cpu_model):
    with pytest.raises(ValueError, match="not a device"):
        nk.check_placement(cpu_model, "cpu:x")


# --------------------------------------------------------------------------- pad_token_id

def test_pad_token_id_falls_back_to_eos_and_says_so_only_when_asked(tiny_model_path):
    from neuronkit.setup.models import PadTokenWarning, pad_token_id

    tok = nk.load_tokenizer(tiny_model_path)
    assert pad_token_id(tok) == tok.pad_token_id != tok.eos_token_id
    tok.pad_token = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pad_token_id(tok) == tok.eos_token_id
    with pytest.warns(PadTokenWarning, match=r"no pad token.*eos token"):
        assert pad_token_id(tok, warn=True) == tok.eos_token_id
    tok.eos_token = None
    with pytest.raises(ValueError, match="neither a pad nor an eos token"):
        pad_token_id(tok)
