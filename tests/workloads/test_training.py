"""fixed_shape_args, FixedLengthCollator and CompileEventsCallback, with real Trainer runs of the
tiny model (eager backend, dynamic=False, a few steps): the graphs the callback records equal the
graphs audit_shapes predicts from the Trainer's own dataloader."""
from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch
from transformers import DataCollatorForLanguageModeling, Trainer

import neuronkit as nk
from helpers.texts import TEXTS, ragged
from helpers.training import TinyRegression
from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.workloads.collate import FixedLengthCollator
from neuronkit.workloads.dataset_shapes import check_static_shapes
from neuronkit.workloads.trainer_args import (
    DYNAMIC_ENV,
    StaticShapeWarning,
    compiles_dynamic,
    fixed_shape_args,
)
from neuronkit.workloads.training import CompileEventsCallback, RecompileWarning, late_compile_message


@pytest.fixture(autouse=True)
def scoped_dynamic_env(monkeypatch):
    """fixed_shape_args sets $ACCELERATE_DYNAMO_USE_DYNAMIC; give it back after each test."""
    monkeypatch.delenv(DYNAMIC_ENV, raising=False)
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "eager")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One CPU thread: the tiny model gains nothing from more, and a busy 2-core machine makes
    several threads spin (a 139k-parameter AdamW step took 0.14 s with 2 threads, ms with 1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def words(n: int) -> str:
    return " ".join(["word"] * n)


# ---- fixed_shape_args ------------------------------------------------------------------------

def test_fixed_shape_args_defaults_compile_like_neuron(tmp_path, capsys):
    report = nk.detect()
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaticShapeWarning)      # the defaults warn about nothing
        args = fixed_shape_args(str(tmp_path))
    assert args.torch_compile and args.torch_compile_backend == report.compile_backend == "eager"
    assert args.dataloader_drop_last is True
    assert args.bf16 is report.bf16_supported
    assert args.use_cpu is True and args.device.type == "cpu"
    assert compiles_dynamic(args) is False
    out = capsys.readouterr().out
    assert "dynamic=False" in out and "the way Neuron compiles" in out and "cpu" in out


def test_caller_values_win_and_static_shape_breakers_warn(tmp_path):
    with pytest.warns(StaticShapeWarning, match=r"dataloader_drop_last=False.*one extra graph"):
        args = fixed_shape_args(str(tmp_path), dataloader_drop_last=False, bf16=False,
                                torch_compile_backend="aot_eager", quiet=True)
    assert args.dataloader_drop_last is False and args.bf16 is False
    assert args.torch_compile_backend == "aot_eager"
    with pytest.warns(StaticShapeWarning, match=r"torch_compile=False.*stay hidden"):
        args = fixed_shape_args(str(tmp_path), torch_compile=False, quiet=True)
    assert args.torch_compile is False


def test_dynamic_none_gives_back_torch_default_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(DYNAMIC_ENV, "false")
    with pytest.warns(StaticShapeWarning, match=r"dynamic=None.*fewer graphs than Neuron"):
        args = fixed_shape_args(str(tmp_path), dynamic=None, quiet=True)
    assert compiles_dynamic(args) is None
    import os
    assert DYNAMIC_ENV not in os.environ


def test_on_neuron_the_neuron_backend_and_no_cpu(tmp_path, fake_neuron, monkeypatch):
    """Under a fake torch-neuronx: backend 'neuron', no use_cpu, and the Neuron wording.
    (TrainingArguments itself would try to place tensors on the fake device, so it is captured.)"""
    seen = {}

    def capture(**kw):
        seen.update(kw)
        return type("Args", (), {"torch_compile": kw["torch_compile"],
                                 "torch_compile_backend": kw.get("torch_compile_backend")})()

    monkeypatch.setattr("neuronkit.workloads.trainer_args.TrainingArguments", capture)
    args = fixed_shape_args(str(tmp_path))
    assert seen["torch_compile_backend"] == "neuron" and "use_cpu" not in seen
    assert seen["dataloader_drop_last"] is True and seen["bf16"] is True
    with pytest.warns(StaticShapeWarning, match="on Neuron the model then runs without"):
        fixed_shape_args(str(tmp_path), torch_compile=False)
    assert args.torch_compile_backend == "neuron"


def test_check_static_shapes_names_the_partial_batch(tmp_path):
    with pytest.warns(StaticShapeWarning):
        args = fixed_shape_args(str(tmp_path), dataloader_drop_last=False,
                                per_device_train_batch_size=2, quiet=True)
    with pytest.warns(StaticShapeWarning, match=r"7 examples / batch 2 leaves a last batch of 1 "
                                                r"-> one extra graph"):
        found = check_static_shapes(args, list(range(7)))
    assert len(found) == 1
    assert check_static_shapes(args, list(range(8))) == []
    strict = fixed_shape_args(str(tmp_path), per_device_train_batch_size=2, quiet=True)
    assert check_static_shapes(strict, list(range(7))) == []


# ---- check_static_shapes: examples tokenized without padding="max_length" ------------------

@pytest.fixture
def strict_args(tmp_path):
    return fixed_shape_args(str(tmp_path), per_device_train_batch_size=2, quiet=True)


def lengths_of(data) -> tuple[int, int, int]:
    """(shortest, longest, the max_length the fix names: the longest rounded up to 8)."""
    lengths = [len(e["input_ids"]) for e in data]
    return min(lengths), max(lengths), -(-max(lengths) // 8) * 8


def collators(tok) -> dict:
    from transformers import DataCollatorWithPadding, default_data_collator

    return {"lm": DataCollatorForLanguageModeling(tok, mlm=False),
            "with_padding": DataCollatorWithPadding(tok),
            "default": default_data_collator,
            "short_fixed": FixedLengthCollator(tok, max_length=16),
            "with_padding_max_length": DataCollatorWithPadding(tok, padding="max_length",
                                                               max_length=48),
            "fixed": FixedLengthCollator(tok, max_length=48),
            "buckets": FixedLengthCollator(tok, buckets=[16, 64])}


@pytest.mark.parametrize("name, says", [
    ("lm", "the data collator (DataCollatorForLanguageModeling) pads each batch to its own longest"),
    ("with_padding", "the data collator (DataCollatorWithPadding) pads each batch to its own"),
    ("default", "the data collator (default_data_collator) fails on a batch of the shortest and "
                "the longest: ValueError"),
    ("short_fixed", "(FixedLengthCollator) fails on a batch of the shortest and the longest: "
                    "ValueError: example 0 has"),
])
def test_check_static_shapes_finds_unpadded_examples_and_a_pad_to_longest_collator(
        strict_args, tok, name, says):
    data = ragged(tok)
    short, long, n = lengths_of(data)
    with pytest.warns(StaticShapeWarning, match="train: input_ids: the examples have 4 different"):
        [found] = check_static_shapes(strict_args, data, data_collator=collators(tok)[name])
    assert found.startswith(f"train: input_ids: the examples have 4 different lengths, {short} to "
                            f"{long} tokens")
    assert says in found
    assert (f'Fix: tokenize with tokenizer(texts, padding="max_length", max_length={n}, '
            f"truncation=True) ({n}: the longest example seen, {long} tokens, rounded up to a "
            f"multiple of 8), or keep the examples and collate with "
            f"nk.FixedLengthCollator(tokenizer, max_length={n}).") in found
    if name in ("lm", "with_padding"):
        assert f"batches of {short} or {long} tokens" in found


@pytest.mark.parametrize("name", ["with_padding_max_length", "fixed", "buckets"])
def test_check_static_shapes_accepts_a_collator_that_pads_to_fixed_lengths(strict_args, tok, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaticShapeWarning)
        assert check_static_shapes(strict_args, ragged(tok), data_collator=collators(tok)[name]) == []


def test_check_static_shapes_accepts_examples_tokenized_to_max_length(strict_args, tok):
    enc = tok(TEXTS, padding="max_length", max_length=48, truncation=True)
    data = [{"input_ids": ids} for ids in enc["input_ids"]]
    lm = collators(tok)["lm"]
    assert check_static_shapes(strict_args, data, data_collator=lm, warn=False) == []
    assert check_static_shapes(strict_args, data, warn=False) == []
    # and the same texts unpadded, with no collator to check: a finding that says so
    [found] = check_static_shapes(strict_args, ragged(tok), warn=False)
    assert 'tokenized without padding="max_length"' in found
    assert "No data_collator was given to check" in found


def test_check_static_shapes_reads_eval_and_column_datasets_and_the_partial_batch(tmp_path, tok):
    class Columns:
        """A datasets.Dataset as check_static_shapes reads it: column_names, slices, rows."""

        def __init__(self, rows):
            self.rows, self.column_names = rows, ["input_ids"]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            if isinstance(i, slice):
                return {"input_ids": [r["input_ids"] for r in self.rows[i]]}
            return self.rows[i]

    with pytest.warns(StaticShapeWarning):
        args = fixed_shape_args(str(tmp_path), dataloader_drop_last=False,
                                per_device_train_batch_size=2, quiet=True)
    data = ragged(tok) + ragged(tok)[:1]                        # 5 examples, batches of 2
    found = check_static_shapes(args, data, Columns(ragged(tok)), warn=False,
                                data_collator=collators(tok)["lm"])
    assert [f.split(":")[0] for f in found] == ["train", "train", "eval"]
    assert "leaves a last batch of 1" in found[0]
    assert "pads each batch to its own longest" in found[1] and found[2].endswith(found[1][7:])


def test_check_static_shapes_with_a_datasets_dataset(strict_args, tok):
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_dict({"text": TEXTS}).map(
        lambda b: tok(b["text"]), batched=True, remove_columns=["text"])
    lm = collators(tok)["lm"]
    assert "4 different lengths" in check_static_shapes(strict_args, data, data_collator=lm,
                                                        warn=False)[0]
    padded = datasets.Dataset.from_dict({"text": TEXTS}).map(
        lambda b: tok(b["text"], padding="max_length", max_length=48, truncation=True),
        batched=True, remove_columns=["text"])
    assert check_static_shapes(strict_args, padded, data_collator=lm, warn=False) == []


def test_check_static_shapes_leaves_the_rng_and_the_examples_as_they_were(strict_args, tok):
    """Probing the collator draws no random number training would have drawn, mutates nothing."""
    import random

    inner = collators(tok)["lm"]

    def noisy(examples):
        torch.rand(3), random.random()                 # a collator that draws random numbers
        for e in examples:
            e["input_ids"].append(0)                   # and changes its examples in place
        return inner(examples)

    data = ragged(tok)
    before = [list(e["input_ids"]) for e in data]
    torch.manual_seed(0), random.seed(0)
    expected = torch.rand(2), random.random()
    torch.manual_seed(0), random.seed(0)
    assert check_static_shapes(strict_args, data, data_collator=noisy, warn=False)
    assert torch.equal(torch.rand(2), expected[0]) and random.random() == expected[1]
    assert [e["input_ids"] for e in data] == before


# ---- FixedLengthCollator ---------------------------------------------------------------------

def test_collator_pads_right_to_max_length_with_labels_masked(tok):
    collate = FixedLengthCollator(tok, max_length=16)
    ids = tok(words(3))["input_ids"]
    batch = collate([{"input_ids": ids}, words(5), {"text": words(2)}])
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert all(t.shape == (3, 16) and t.dtype == torch.long for t in batch.values())
    n = len(ids)
    assert batch["input_ids"][0, :n].tolist() == ids                      # right padding
    assert (batch["input_ids"][0, n:] == tok.pad_token_id).all()
    assert batch["attention_mask"][0].tolist() == [1] * n + [0] * (16 - n)
    assert batch["labels"][0].tolist() == ids + [-100] * (16 - n)
    lengths = batch["attention_mask"].sum(1).tolist()
    assert lengths == [n, len(tok(words(5))["input_ids"]), len(tok(words(2))["input_ids"])]
    assert ((batch["labels"] == -100) == (batch["attention_mask"] == 0)).all()


def test_collator_keeps_given_labels_and_pads_them(tok):
    collate = FixedLengthCollator(tok, max_length=8)
    batch = collate([{"input_ids": [5, 6, 7], "labels": [-100, 6, 7]}])
    assert batch["labels"][0].tolist() == [-100, 6, 7] + [-100] * 5


def test_collator_buckets_pad_each_batch_to_its_bucket(tok):
    collate = FixedLengthCollator(tok, buckets=[8, 16, 32])
    assert collate([{"input_ids": [1] * 3}, {"input_ids": [1] * 7}])["input_ids"].shape == (2, 8)
    assert collate([{"input_ids": [1] * 9}])["input_ids"].shape == (1, 16)
    assert collate([{"input_ids": [1] * 32}])["input_ids"].shape == (1, 32)


def test_collator_over_long_example_is_a_clear_error_unless_truncation(tok):
    with pytest.raises(ValueError, match=r"example 1 has 20 tokens, longer than max_length=16.*"
                                         r"truncation=True"):
        FixedLengthCollator(tok, max_length=16)([{"input_ids": [1] * 4}, {"input_ids": [1] * 20}])
    with pytest.raises(ValueError, match=r"has 40 tokens, longer than the largest bucket \(32\)"):
        FixedLengthCollator(tok, buckets=[16, 32])([{"input_ids": [1] * 40}])
    cut = FixedLengthCollator(tok, max_length=16, truncation=True)(
        [{"input_ids": list(range(1, 21))}])
    assert cut["input_ids"][0].tolist() == list(range(1, 17))
    assert cut["attention_mask"].sum() == 16


@pytest.mark.parametrize("limit", [{"max_length": 16}, {"buckets": [8, 16]}])
def test_collator_truncation_keeps_the_start_of_ids_and_labels_alike(tok, limit):
    ids = list(range(1, 21))
    labels = [-100] * 5 + list(range(106, 121))          # a masked prompt, then the targets
    cut = FixedLengthCollator(tok, truncation=True, **limit)(
        [{"input_ids": ids, "labels": labels}, {"input_ids": [7, 8], "labels": [-100, 8]}])
    assert cut["input_ids"].shape == (2, 16)
    assert cut["input_ids"][0].tolist() == ids[:16]       # the first 16 tokens, not the last
    assert cut["labels"][0].tolist() == labels[:16]       # the same positions as the ids
    assert cut["attention_mask"][0].tolist() == [1] * 16
    assert cut["labels"][1].tolist() == [-100, 8] + [-100] * 14


def test_collator_bad_arguments(tok):
    with pytest.raises(ValueError, match="exactly one of max_length"):
        FixedLengthCollator(tok)
    with pytest.raises(ValueError, match="exactly one of max_length"):
        FixedLengthCollator(tok, max_length=8, buckets=[8])
    with pytest.raises(ValueError, match="positive int"):
        FixedLengthCollator(tok, max_length=0)
    with pytest.raises(ValueError, match=r"keys \['label'\].*remove_unused_columns=False"):
        FixedLengthCollator(tok, max_length=8)([{"label": 1}])


# ---- argument checks -------------------------------------------------------------------------

@pytest.mark.parametrize("name, value", [("per_device_train_batch_size", 0),
                                         ("per_device_train_batch_size", -2),
                                         ("per_device_train_batch_size", 2.0),
                                         ("per_device_train_batch_size", True),
                                         ("per_device_eval_batch_size", 0)])
def test_fixed_shape_args_rejects_a_batch_size_that_is_not_a_positive_int(tmp_path, name, value):
    with pytest.raises(ValueError, match=rf"{name} must be a positive int, got {value!r}.*"
                                         rf"Pass e\.g\. {name}=8"):
        fixed_shape_args(str(tmp_path / "out"), quiet=True, **{name: value})
    args = fixed_shape_args(str(tmp_path / "out"), quiet=True, **{name: 3})
    assert getattr(args, name) == 3


@pytest.mark.parametrize("recorder, hint", [("x", "pass log_path='x' instead"),
                                            (object(), "got a object"),
                                            ([], "got a list")])
def test_callback_rejects_a_recorder_that_is_not_a_compile_recorder(recorder, hint):
    with pytest.raises(TypeError, match="recorder must be a neuronkit CompileRecorder or None") \
            as err:
        CompileEventsCallback(recorder=recorder)
    assert hint in str(err.value)
    rec = nk.CompileRecorder()
    assert CompileEventsCallback(recorder=rec).recorder is rec


# ---- the callback's own recorder when train() raises ------------------------------------------

def test_callback_recorder_is_stopped_after_a_train_that_raised(tmp_path, compiler_reset):
    from transformers import TrainerControl, TrainerState

    args = fixed_shape_args(str(tmp_path / "out"), quiet=True)
    state, control = TrainerState(), TrainerControl()
    callback = CompileEventsCallback(quiet=True)
    callback.on_train_begin(args, state, control)
    rec = callback.recorder
    assert rec.active
    # train() raised here: Trainer never calls on_train_end; the next train() starts over
    callback.on_train_begin(args, state, control)
    assert callback.recorder is rec and rec.active

    @torch.compile(backend="eager", dynamic=False)
    def double(x):
        return x * 2

    double(torch.ones(3))
    assert len(callback.events) == 1                  # listened to once, not once per train()
    assert callback.summary().startswith("neuronkit: 1 graph(s) compiled during training "
                                         "(double 1)")
    callback.close()                                  # what to call after a train() that raised
    assert not rec.active
    callback.close()                                  # safe to repeat
    double(torch.ones(4))
    assert len(callback.events) == 1                  # no longer listening


# ---- the late-compile warning, from events ---------------------------------------------------

@pytest.mark.parametrize("changed, reasons, hint", [
    ("kwargs['input_ids'] dim 0: 4 -> 2", [], "partial last batch"),
    ("kwargs['input_ids'] dim 1: 28 -> 26", [], "FixedLengthCollator"),
    ("", ["0/0: tensor 'x' size mismatch at index 1. expected 4, actual 7"], "sequence length"),
    ("", ["0/0: GLOBAL_STATE changed: grad_mode "], "evaluation"),
])
def test_late_compile_message_names_the_dimension_and_fix(changed, reasons, hint):
    event = CompileEvent(function="forward", kind="recompile", changed=changed, reasons=reasons)
    text = late_compile_message(event, 5)
    assert text.startswith("step 5: forward compiled a new graph") and hint in text
    assert (changed or reasons[0]) in text


def test_late_compile_warning_starts_after_warn_after_step():
    """A recompile at step ``warn_after_step`` is expected (no warning); one a step later warns,
    once. The callback is driven as the recorder and the Trainer drive it: no training run."""
    callback = CompileEventsCallback(warn_after_step=3, quiet=True)
    recompile = CompileEvent(function="forward", kind="recompile",
                             changed="kwargs['input_ids'] dim 1: 28 -> 26")
    hit = CompileEvent(function="forward", kind="limit_hit", changed="kwargs['input_ids'] dim 1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback.on_step_begin(None, SimpleNamespace(global_step=2), None)   # step 3
        callback._seen(recompile)
        callback._seen(hit)
        assert [w for w in caught if w.category is RecompileWarning] == []
        assert callback.late_warning is None
        callback.on_step_begin(None, SimpleNamespace(global_step=3), None)   # step 4
        callback._seen(recompile)
        callback._seen(hit)
    late = [str(w.message) for w in caught if w.category is RecompileWarning]
    assert len(late) == 1 and late[0].startswith("step 4: forward compiled a new graph")
    assert callback.late_warning == late[0] and len(callback.events) == 4


# ---- Trainer runs: recorded graphs == audited graphs -----------------------------------------

def train(tmp_path, tiny_model_path, data, collator, callback, **kw):
    """A real Trainer run of the tiny model; returns (trainer, audit of its train dataloader)."""
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32").train()
    args = fixed_shape_args(str(tmp_path / "out"), per_device_train_batch_size=2, logging_steps=1,
                            save_strategy="no", train_sampling_strategy="sequential",
                            disable_tqdm=True, quiet=True, **kw)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collator,
                      callbacks=[callback])
    assert trainer.accelerator.state.dynamo_plugin.dynamic is (kw.get("dynamic", False))
    audit = nk.audit_shapes(trainer.get_train_dataloader())
    trainer.train()
    return trainer, audit


def graphs(callback) -> int:
    assert {e.function for e in callback.events} <= {"forward"}   # eager: forward graphs only
    return sum(1 for e in callback.events if e.kind in GRAPH_KINDS)


@pytest.mark.slow
def test_dynamic_padding_one_graph_per_distinct_length_as_audited(tmp_path, tiny_model_path, tok,
                                                                   compiler_reset):
    data = [{"input_ids": tok(words(n))["input_ids"]} for n in (10, 13, 12, 11, 8, 11)]
    callback = CompileEventsCallback(quiet=True)
    unpadded = (r"the data collator \(DataCollatorForLanguageModeling\) pads each batch to its "
                r'own longest.*padding="max_length", max_length=')
    with pytest.warns(StaticShapeWarning, match=unpadded), \
            pytest.warns(RecompileWarning, match=r"step 2: forward compiled a new graph.*dim 1") as w:
        trainer, audit = train(tmp_path, tiny_model_path, data,
                               DataCollatorForLanguageModeling(tok, mlm=False), callback)
    assert len([x for x in w if x.category is RecompileWarning]) == 1          # warned once
    assert audit.predicted_graphs == 3 and audit.varying_dims["input_ids"] == [1]
    assert 'tokenized without padding="max_length"' in audit.findings[0]
    assert graphs(callback) == audit.predicted_graphs
    assert [e.context for e in callback.events] == ["step 1", "step 2", "step 3"]
    assert trainer.state.log_history[-1]["compile_graphs"] == 3
    assert trainer.state.log_history[0]["compile_graphs"] == 1
    assert trainer.state.log_history[-1]["compile_s"] == pytest.approx(callback.compile_s, abs=1e-3)
    assert not callback.recorder.active                       # it started it, so it stopped it


@pytest.mark.slow
def test_without_dynamic_false_torch_hides_the_recompiles(tmp_path, tiny_model_path, tok,
                                                          compiler_reset):
    """The same data with torch's automatic dynamic shapes: fewer graphs than Neuron would build,
    which is why fixed_shape_args compiles with dynamic=False."""
    data = [{"input_ids": tok(words(n))["input_ids"]} for n in (10, 13, 12, 11, 8, 11)]
    callback = CompileEventsCallback(quiet=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _, audit = train(tmp_path, tiny_model_path, data,
                         DataCollatorForLanguageModeling(tok, mlm=False), callback, dynamic=None)
    said = [str(x.message) for x in w if x.category is StaticShapeWarning]
    assert any("dynamic=None" in m and "lower than on Neuron" in m for m in said)   # at train()
    assert graphs(callback) < audit.predicted_graphs == 3


@pytest.mark.slow
def test_fixed_length_one_graph_as_audited_with_a_shared_recorder(tmp_path, tiny_model_path, tok,
                                                                  compiler_reset):
    data = [{"input_ids": tok(words(n))["input_ids"]} for n in (10, 13, 12, 11, 8, 11, 9, 14)]
    with nk.CompileRecorder() as rec:
        callback = CompileEventsCallback(rec)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RecompileWarning)
            warnings.simplefilter("error", StaticShapeWarning)    # ragged, but padded: no finding
            trainer, audit = train(tmp_path, tiny_model_path, data,
                                   FixedLengthCollator(tok, max_length=32), callback)
        assert rec.active                                    # the caller's recorder stays on
    assert audit.predicted_graphs == 1 and audit.shapes["input_ids"] == [(2, 32)]
    assert audit.findings == []
    assert graphs(callback) == 1 and len(rec.events) == 1
    assert rec.events[0].context == "step 1" and callback.events == rec.events
    assert trainer.state.log_history[-1]["compile_graphs"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("drop_last", [True, False])
def test_drop_last_and_the_partial_last_batch(tmp_path, tiny_model_path, tok, compiler_reset,
                                              drop_last):
    data = [{"input_ids": tok(words(n))["input_ids"]} for n in (10, 13, 12, 11, 8)]  # 5 / 2
    callback = CompileEventsCallback(quiet=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _, audit = train(tmp_path, tiny_model_path, data, FixedLengthCollator(tok, max_length=32),
                         callback, dataloader_drop_last=drop_last, num_train_epochs=1)
    messages = [str(x.message) for x in w]
    assert graphs(callback) == audit.predicted_graphs == (1 if drop_last else 2)
    partial = [m for m in messages if "leaves a last batch of 1 -> one extra graph" in m]
    late = [m for m in messages if m.startswith("step 3: forward compiled a new graph")]
    if drop_last:
        assert not partial and not late and audit.batches == 2
    else:
        assert partial and "5 examples / batch 2" in partial[0]
        assert len(late) == 1 and "dim 0: 2 -> 1" in late[0] and "dataloader_drop_last" in late[0]
        assert callback.events[-1].context == "step 3"


@pytest.mark.slow
def test_callback_counts_the_steps_torch_ran_eager_after_a_limit_hit(tmp_path, tiny_model_path,
                                                                     tok, compiler_reset):
    """Dynamic padding with the limit at 2: the 3rd length hits it, and from then on every step
    of a new length runs eager; the callback records each such step as an eager_fallback event
    with its exact call count and shape, and lengths compiled before still run compiled."""
    lengths = (10, 13, 12, 12, 10, 13, 8, 8)         # 3 new lengths after the limit
    data = [{"input_ids": tok(words(n))["input_ids"]} for n in lengths for _ in range(2)]
    seq = [len(tok(words(n))["input_ids"]) for n in lengths]
    callback = CompileEventsCallback(quiet=True)
    with torch._dynamo.config.patch(recompile_limit=2), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(tmp_path, tiny_model_path, data, DataCollatorForLanguageModeling(tok, mlm=False),
              callback, num_train_epochs=1)
    kinds = [e.kind for e in callback.events]
    assert kinds.count("first") + kinds.count("recompile") == 2 and kinds.count("limit_hit") == 1
    eager = [e for e in callback.events if e.kind == "eager_fallback"]
    compiled = set(seq[:2])
    expected = [(f"step {i + 1}", [2, n]) for i, n in enumerate(seq) if n not in compiled]
    assert [(e.context, e.input_shapes["input_ids"]) for e in eager] == expected
    assert all(e.calls == 1 and e.function == "forward" for e in eager)
    advice = next(a for a in nk.diagnose(callback.events) if "recompile limit hit" in a.title)
    assert advice.numbers["exact"] and advice.numbers["eager_calls"] == len(expected)


def test_the_step_label_ends_with_training(tmp_path, compiler_reset):
    """After train() the recorder's label is what it was before: later compiles (a generate, an
    evaluation loop of the user's) are not filed under the last training step."""
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(str(tmp_path), max_steps=2, per_device_train_batch_size=2,
                             use_cpu=True, report_to=[], save_strategy="no", disable_tqdm=True)
    data = [{"inputs": torch.ones(4), "labels": torch.tensor(1.0)}] * 4
    with nk.CompileRecorder(context="notebook cell 3") as rec:
        Trainer(model=TinyRegression(4), args=args, train_dataset=data,
                callbacks=[nk.CompileEventsCallback(rec, quiet=True)]).train()
        assert rec.current_context == "notebook cell 3"
