"""``neuronkit record --as-neuron -- CMD``: an unchanged Trainer script (notebook 04's dynamic
padding, a tiny random Qwen3) recorded with Neuron's compile rules compiles one forward graph per
batch shape, each with its backward graph, as the neuron backend does (here through the contract
fake); a plain record compiles fewer."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import neuronkit as nk
from neuron_fake import installed_fake
from neuronkit.apps import record as record_app
from neuronkit.apps import record_process
from neuronkit.apps.cli import main as cli_main
from neuronkit.sources.kernel_forecast import reset_forecast

BIN = Path(sys.executable).parent
FORWARDS = ("first", "recompile")
# notebook 04's dynamic-padding run as a plain script: no neuronkit code in it
SCRIPT = textwrap.dedent('''
    import os, sys, tempfile
    import torch
    import transformers
    from transformers import (AutoTokenizer, DataCollatorForLanguageModeling, Qwen3Config,
                              Qwen3ForCausalLM, Trainer, TrainingArguments)

    SENTENCES = [
        "Trainium compiles a graph.",
        "Every new input shape is a new graph to compile.",
        "Short batches.",
        "A batch padded to its own longest sentence has its own length, and so its own shape.",
        "Static shapes compile once.",
        "The compiler sees the shape of every tensor that goes into the model.",
        "Pad every batch to one length.",
        "Drop the last batch when it is short.",
        "Neuron compiles each new shape ahead of time, and that takes minutes for a real model.",
        "One graph, many steps.",
        "Fixed shapes keep the compile cache warm from one run to the next.",
    ]
    BATCH = 2


    def main(tokenizer_path, backend="eager"):
        transformers.logging.set_verbosity_error()
        torch.manual_seed(0)
        tok = AutoTokenizer.from_pretrained(tokenizer_path)
        config = Qwen3Config(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                             head_dim=8, pad_token_id=tok.pad_token_id)
        model = Qwen3ForCausalLM(config).train()
        data = [{"input_ids": tok(s)["input_ids"]} for s in SENTENCES]
        args = TrainingArguments(tempfile.mkdtemp(), per_device_train_batch_size=BATCH,
                                 num_train_epochs=1, torch_compile=True,
                                 torch_compile_backend=backend, use_cpu=True, report_to=[],
                                 save_strategy="no", train_sampling_strategy="sequential",
                                 dataloader_drop_last=True, disable_tqdm=True)
        trainer = Trainer(model=model, args=args, train_dataset=data,
                          data_collator=DataCollatorForLanguageModeling(tok, mlm=False))
        trainer.train()


    if __name__ == "__main__":
        main(sys.argv[1], os.environ.get("BACKEND", "eager"))
''')


@pytest.fixture
def script(tmp_path) -> Path:
    path = tmp_path / "train_script.py"
    path.write_text(SCRIPT)
    return path


def load(path: Path):
    spec = importlib.util.spec_from_file_location("train_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected_graphs(module, tokenizer_path) -> int:
    """The distinct batch shapes with dynamic=False: sequential batches, each padded to its
    longest sentence, the short last batch dropped."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_path)
    lengths = [len(tok(s)["input_ids"]) for s in module.SENTENCES]
    n = module.BATCH
    return len({max(lengths[i:i + n]) for i in range(0, len(lengths) - n + 1, n)})


def counts(events) -> tuple[int, int]:
    forwards = [e for e in events if e.kind in FORWARDS]
    backwards = {e.compile_id for e in events if e.kind == "backward"}
    assert backwards <= {e.compile_id for e in forwards}
    return len(forwards), len(backwards)


def recorded(folder: Path) -> nk.CompileLog:
    [path] = folder.glob("*.jsonl")
    return nk.CompileLog.load(path)


def _torch_defaults() -> dict[str, str]:
    """This environment without what would change torch.compile's defaults in the script: an
    earlier test's ``nk.fixed_shape_args`` leaves ``$ACCELERATE_DYNAMO_USE_DYNAMIC`` set (by
    design: it is how Trainer's accelerate gets dynamic=False), and neuronkit's own switches."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("ACCELERATE_DYNAMO_", "NEURONKIT_AS_NEURON", "NEURONKIT_RECORD",
                                 "NEURONKIT_PRECOMPILE", "TORCHDYNAMO_"))}


@pytest.mark.slow  # two fresh Pythons training the tiny model with torch.compile (~70 s)
def test_record_as_neuron_gives_the_static_graphs_and_their_backwards(tmp_path, script,
                                                                       tiny_model_path):
    want = expected_graphs(load(script), tiny_model_path)
    runs = {}
    for name, flags in (("plain", []), ("as_neuron", ["--as-neuron"])):
        folder = tmp_path / name
        done = subprocess.run([str(BIN / "neuronkit"), "record", *flags, "--log-dir", str(folder),
                               "--", sys.executable, str(script), str(tiny_model_path)],
                              env={**_torch_defaults(), "BACKEND": "eager"}, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        runs[name] = recorded(folder)
    assert counts(runs["as_neuron"].events) == (want, want)
    plain_forwards, plain_backwards = counts(runs["plain"].events)
    assert plain_forwards < want and plain_backwards == 0   # automatic dynamic shapes, eager
    assert runs["as_neuron"].header["as_neuron"]["device"] == "cpu"
    assert "as_neuron" not in runs["plain"].header
    kernels = [e for e in runs["as_neuron"].events if e.kind == "kernels"]
    assert kernels and all(e.forecast for e in kernels)
    assert kernels[0].context == "step 1"


@pytest.mark.slow  # the tiny model trained through the fake's neuron backend (~15 s)
def test_the_same_script_through_the_neuron_fake_gives_the_same_counts(script, tiny_model_path):
    module = load(script)
    want = expected_graphs(module, tiny_model_path)
    reset_forecast()
    with installed_fake():
        with nk.CompileRecorder(as_neuron=True) as rec:
            module.main(str(tiny_model_path), backend="neuron")
    assert counts(rec.events) == (want, want)
    assert not [e for e in rec.events if "as_neuron_backend" in e.metrics]   # neuron has AOT
    assert not [e for e in rec.events if "refused_on_neuron" in e.metrics]


def test_the_flag_reaches_every_recorded_process(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(record_app, "record",
                        lambda command, log_dir, as_neuron=False: calls.append(as_neuron) or 0)
    assert cli_main(["record", "--as-neuron", "--", "true"]) == 0
    assert cli_main(["record", "--", "true"]) == 0
    assert calls == [True, False]
    env = record_app._environment(tmp_path, "site", as_neuron=True)
    assert env[record_process.AS_NEURON_ENV] == "1"
    assert record_process.AS_NEURON_ENV not in record_app._environment(tmp_path, "site")

    made = []

    class Recorder:
        def __init__(self, *args, **kwargs):
            made.append(kwargs.get("as_neuron"))

        def start(self):
            return self

    monkeypatch.setattr(record_process, "CompileRecorder", Recorder)
    for name in ("after_import", "_note_clock_at_init"):
        monkeypatch.setattr(record_process, name, lambda *a, **k: None)
    monkeypatch.setattr(record_process.atexit, "register", lambda *a, **k: None)
    monkeypatch.setattr(record_process, "is_launcher", lambda: False)
    monkeypatch.delenv(record_process.AS_NEURON_ENV, raising=False)
    record_process.start(tmp_path / "a")
    monkeypatch.setenv(record_process.AS_NEURON_ENV, "1")
    record_process.start(tmp_path / "b")
    assert made == [False, True]
    torch.compiler.reset()
