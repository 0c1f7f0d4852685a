"""Training on native Neuron, through the contract fake (tests/neuron_fake): the backward graph's
NEFF build lands on the step that built it, and monitoring adds no synchronize in steady state."""
from __future__ import annotations

import pytest
import torch
from transformers import Trainer, TrainingArguments

import neuronkit as nk
from helpers.training import TinyRegression
from neuron_fake import installed_fake


def dataset(n: int) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    return [{"inputs": torch.randn(8, generator=gen), "labels": torch.randn((), generator=gen)}
            for _ in range(n)]


class SyncsPerStep(nk.CompileEventsCallback.__mro__[1]):   # a plain TrainerCallback
    """Notes the fake's synchronize count at every step end (after neuronkit's callback)."""

    def __init__(self, fake) -> None:
        self.fake, self.at_step_end = fake, []

    def on_step_end(self, args, state, control, **kwargs):
        self.at_step_end.append(self.fake.sync_count)


def train(tmp_path, fake, steps: int, rec: nk.CompileRecorder, **extra) -> SyncsPerStep:
    args = TrainingArguments(str(tmp_path), max_steps=steps, per_device_train_batch_size=2,
                             torch_compile=True, torch_compile_backend="neuron", use_cpu=True,
                             report_to=[], save_strategy="no", dataloader_drop_last=True,
                             disable_tqdm=True, **extra)
    counts = SyncsPerStep(fake)
    trainer = Trainer(model=TinyRegression(), args=args, train_dataset=dataset(2 * steps),
                      callbacks=[nk.CompileEventsCallback(rec, quiet=True), counts])
    trainer.train()
    return counts


def test_the_backward_build_lands_on_the_step_that_built_it(clean_env, tmp_path):
    with installed_fake(build_type="DEV") as fake:
        fake.plan("compiled", duration_s=100.0)      # the forward graph's NEFF
        fake.plan("compiled", duration_s=300.0)      # the backward graph's, at the first backward
        with nk.CompileRecorder() as rec:
            train(tmp_path, fake, 3, rec, logging_steps=1000)
    graphs = [e for e in rec.events if e.kind in ("first", "recompile", "backward")]
    assert [(e.kind, e.context) for e in graphs] == [("first", "step 1"), ("backward", "step 1")]
    assert graphs[1].function == graphs[0].function and graphs[1].compile_id == graphs[0].compile_id
    assert [e.neff_compile_s for e in graphs] == [100.0, 300.0]
    per_step = {f"step {n}": sum(e.neff_s for e in rec.events if e.context == f"step {n}")
                for n in (1, 2, 3)}
    assert per_step == {"step 1": 400.0, "step 2": 0.0, "step 3": 0.0}
    assert nk.CompileLog(rec.events).total_neff_s == 400.0


def test_steady_steps_add_no_synchronize(clean_env, tmp_path):
    with installed_fake() as fake:
        with nk.CompileRecorder() as rec:
            counts = train(tmp_path, fake, 100, rec, logging_steps=1000)
        assert [e.neff_cache for e in rec.events if e.kind in ("first", "backward")] == [
            "compiled", "compiled"]
    at = counts.at_step_end
    assert len(at) == 100
    assert at[-1] - at[0] == 0                      # steps 2-100: no synchronize at all
    assert at[0] <= 1                               # step 1 resolves its pending builds once


def test_a_logging_step_is_where_kernels_are_read_after_a_synchronize(clean_env, tmp_path):
    with installed_fake() as fake:
        with nk.CompileRecorder() as rec:
            counts = train(tmp_path, fake, 6, rec, logging_steps=3)
    steps = counts.at_step_end
    # the Trainer reads the loss at a logging step (it waits there): one synchronize after it
    assert steps[-1] - steps[0] <= 2
    assert fake.sync_count >= steps[-1]


def test_the_logged_compile_seconds_include_the_neff_builds(clean_env, tmp_path):
    with installed_fake(build_type="DEV") as fake:
        fake.plan("compiled", duration_s=100.0)
        fake.plan("compiled", duration_s=300.0)
        with nk.CompileRecorder() as rec:
            callback = nk.CompileEventsCallback(rec, quiet=True)
            args = TrainingArguments(str(tmp_path), max_steps=2, per_device_train_batch_size=2,
                                     torch_compile=True, torch_compile_backend="neuron",
                                     use_cpu=True, report_to=[], save_strategy="no",
                                     logging_steps=1, disable_tqdm=True)
            trainer = Trainer(model=TinyRegression(), args=args, train_dataset=dataset(4),
                              callbacks=[callback])
            trainer.train()
    logged = [h for h in trainer.state.log_history if "compile_s" in h]
    assert logged[0]["compile_s"] >= 400.0            # Dynamo's seconds + both NEFF builds
    assert callback.compile_s == pytest.approx(400.0 + sum(e.duration_s for e in rec.events))
