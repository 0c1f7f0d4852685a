"""The recorder on transformers' own compile: generate() with a static cache, forced on CPU."""
from __future__ import annotations

import re

import pytest

import neuronkit as nk
from neuronkit.sources.torch_text import input_name

pytestmark = pytest.mark.slow  # two real compiles of the tiny model's decode step (~2 s each)


def test_generate_decode_graph_compiles_are_recorded(tiny_model_path, compiler_reset, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    tokenizer = nk.load_tokenizer(tiny_model_path)
    config = nk.compile_config("eager")  # compiles on the CPU too (transformers: only accelerators)

    def generate(prompt: str) -> int:
        ids = tokenizer(prompt, return_tensors="pt")
        model.generate(**ids, max_new_tokens=3, do_sample=False, cache_implementation="static",
                       compile_config=config)
        return ids["input_ids"].shape[1]

    with nk.CompileRecorder() as rec:
        lengths = []
        for i, prompt in enumerate(["a short prompt", "a longer prompt " * 4, "short again"]):
            with rec.context(f"prompt {i}"):
                lengths.append(generate(prompt))
    assert lengths[1] > lengths[0] and lengths[2] <= lengths[1]

    # Prefill runs eagerly; only the one-token decode step is compiled, once per static-cache
    # length. The third prompt fits the grown cache, so it compiles nothing.
    events = rec.events
    assert [e.kind for e in events] == ["first", "recompile"], [e.to_dict() for e in events]
    first, second = events
    assert first.function == second.function and first.location == second.location
    assert "transformers" in first.location
    assert [e.context for e in events] == ["prompt 0", "prompt 1"]
    assert [e.graph_count for e in events] == [1, 2]
    assert all(e.backend == "eager" and e.device == "cpu" and e.duration_s > 0 for e in events)

    # The KV cache is an input of the decode graph: its length (dim 2) grew.
    cache_key = next(name for name in first.input_shapes if re.search(r"layers\[0\]\.keys$", name))
    old_len = first.input_shapes[cache_key][2]
    new_len = second.input_shapes[cache_key][2]
    assert old_len >= lengths[0] and new_len >= lengths[1] and new_len > old_len
    assert first.input_shapes["input_ids"] == [1, 1]  # decode: one new token per step
    assert f"{cache_key} dim 2: {old_len} -> {new_len}" in second.changed
    # the reason stays torch's verbatim text, whose source name cleans to the recorded input name
    (reason,) = second.reasons
    match = re.fullmatch(rf"{first.compile_id}: tensor '(.+)' size mismatch at index 2\. "
                         rf"expected {old_len}, actual {new_len}", reason)
    assert match and input_name(match[1]) == cache_key


def test_plain_generate_compiles_on_cpu_with_nk_compile_config(tiny_model_path, compiler_reset,
                                                                monkeypatch, no_neuron):
    """``nk.compile_config()`` (no private flag in user code) makes transformers' own generate()
    compile its decode step on the CPU, with the backend ``nk.detect()`` picks here."""
    monkeypatch.delenv("NEURONKIT_CPU_BACKEND", raising=False)
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    tokenizer = nk.load_tokenizer(tiny_model_path)
    config = nk.compile_config()
    assert (config.backend, config.mode, config.dynamic) == (nk.detect().compile_backend, "default",
                                                             False) == ("eager", "default", False)
    ids = tokenizer("a short prompt", return_tensors="pt")
    with nk.CompileRecorder() as rec:
        model.generate(**ids, max_new_tokens=2, do_sample=False, cache_implementation="static",
                       compile_config=config)
    assert [(e.kind, e.backend, e.device) for e in rec.events] == [("first", "eager", "cpu")]


def test_compile_config_checks_its_backend():
    with pytest.raises(ValueError, match="unknown compile backend 'no-such-backend'; choose one of"):
        nk.compile_config("no-such-backend")
    with pytest.raises(TypeError, match="backend must be a backend name, a callable or None"):
        nk.compile_config(3)  # type: ignore[arg-type]

    def my_backend(gm, example_inputs):
        return gm.forward

    config = nk.compile_config(my_backend, dynamic=True)
    assert config.backend is my_backend and config.dynamic is True and config.mode == "default"
    assert nk.compile_config("aot_eager").backend == "aot_eager"
