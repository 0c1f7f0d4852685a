"""neuronkit record: any command's Python processes record their compiles, unchanged; followed
live while they run; killed ranks keep what they wrote; exit codes pass through."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
import torch

import neuronkit as nk
from helpers.training import TinyRegression
from neuronkit.apps import record_process
from neuronkit.apps.autorecord import PTH_LINE
from neuronkit.log.rank_logs import merge_logs
from neuronkit.views.text import format_report

BIN = Path(sys.executable).parent
JOB = textwrap.dedent("""
    import os, signal, sys, time
    import torch
    import torch.distributed as dist

    ranked = "MASTER_ADDR" in os.environ
    if ranked:
        dist.init_process_group("gloo")
    def scale(x):
        return (x * 2).sum()
    compiled = torch.compile(scale, backend="eager", dynamic=False)
    for n in (2, 3, 4):
        compiled(torch.ones(n))
        if os.environ.get("KILL_AFTER") == str(n):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(float(os.environ.get("JOB_SLEEP", "0")))
    if ranked:
        dist.barrier()
        dist.destroy_process_group()
    sys.exit(int(os.environ.get("JOB_EXIT", "0")))
""")


def job(tmp_path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(JOB)
    return path


def record(tmp_path, *command: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "neuronkit"), "record", "--log-dir",
                             str(tmp_path / "logs"), "--", *command],
                            env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow  # torchrun and two ranks importing torch (~15 s on 2 cores)
def test_torchrun_ranks_are_recorded_and_followed_live(tmp_path):
    follower = nk.follow(tmp_path / "logs")
    proc = record(tmp_path, str(BIN / "torchrun"), "--nproc_per_node=2", str(job(tmp_path)),
                  JOB_SLEEP="1.5")
    first_while_running, logs_seen = None, set()
    while proc.poll() is None:
        if follower.poll() and first_while_running is None:
            first_while_running = proc.poll() is None
        logs_seen |= {p.name for p in follower.logs}
        time.sleep(0.1)
    assert all(".rank" in name for name in logs_seen)      # torchrun's launcher leaves no log
    ended = time.monotonic()
    while len(follower.log.events) < 6 and time.monotonic() - ended < 1.0:
        follower.poll()
        time.sleep(0.05)
    assert len(follower.log.events) == 6                   # all six, a second after the end
    follower.poll()
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert first_while_running is True                    # seen while the job still ran
    assert len(follower.log.events) == 6 and follower.finished, follower.logs
    logs = sorted((tmp_path / "logs").glob("*.jsonl"))
    assert [p.name.split(".")[-2] for p in logs] == ["rank0", "rank1"]
    for rank, path in enumerate(logs):
        log = nk.CompileLog.load(path)
        assert [e.kind for e in log.events] == ["first", "recompile", "recompile"]
        assert log.header["rank"] == rank and log.header["recorded_by"] == "neuronkit record"
        assert log.header["command"][-1].endswith("job.py") and log.closed
        assert log.clock and log.clock["host"] == log.header["host"]
    clocks = [nk.CompileLog.load(p).clock["barrier_at"] for p in logs]
    assert abs(clocks[0] - clocks[1]) < 1.0                # the ranks left the barrier together
    assert f"2 log(s) in {tmp_path / 'logs'}" in err and "neuronkit watch" in err
    report = subprocess.run([str(BIN / "neuronkit"), "report", str(tmp_path / "logs")],
                            capture_output=True, text=True)
    assert report.returncode == 0 and "ranks 0,1" in report.stdout


@pytest.mark.slow  # two fresh Pythons importing torch
def test_the_exit_code_is_the_commands_and_a_process_without_torch_writes_nothing(tmp_path):
    proc = record(tmp_path, sys.executable, str(job(tmp_path)), JOB_EXIT="3")
    _, err = proc.communicate()
    assert proc.returncode == 3, err
    [log_path] = (tmp_path / "logs").glob("*.jsonl")
    assert log_path.name == f"{os.uname().nodename}.pid{nk.CompileLog.load(log_path).header['pid']}.jsonl"
    assert len(nk.CompileLog.load(log_path).events) == 3
    assert len(nk.open_log(tmp_path / "logs").events) == 3       # the folder opens as its log
    quiet = record(tmp_path / "plain", sys.executable, "-c", "import json; print('no torch')")
    out, _ = quiet.communicate()
    assert quiet.returncode == 0 and out == "no torch\n"
    assert list((tmp_path / "plain" / "logs").glob("*.jsonl")) == []


@pytest.mark.slow  # a fresh Python importing torch
def test_a_sigkilled_rank_keeps_the_events_it_wrote(tmp_path):
    proc = record(tmp_path, sys.executable, str(job(tmp_path)), RANK="1", KILL_AFTER="3")
    proc.communicate()
    assert proc.returncode == 128 + 9 or proc.returncode == -9
    merged = merge_logs(tmp_path / "logs")
    assert [(e.rank, e.kind) for e in merged.events] == [(1, "first"), (1, "recompile")]
    assert merged.header["unclosed_ranks"] == [1]
    assert "rank(s) 1" in format_report(merged)
    assert nk.follow(tmp_path / "logs").poll() and nk.follow(tmp_path / "logs").unclosed_ranks == []


@pytest.mark.slow  # a fresh Python importing torch
def test_the_variable_alone_records_through_the_pth_hook(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "neuronkit-record.pth").write_text(PTH_LINE)
    code = (f"import site; site.addsitedir({str(site)!r}); import torch; "
            "torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "NEURONKIT_RECORD": str(tmp_path / "logs")})
    assert done.returncode == 0, done.stderr
    [path] = (tmp_path / "logs").glob("*.jsonl")
    assert len(nk.CompileLog.load(path).events) == 1


@pytest.mark.parametrize("argv", [["/venv/bin/torchrun", "--nproc_per_node=2", "job.py"],
                                  ["/venv/lib/python3.11/site-packages/torch/distributed/run.py"]])
def test_torchs_launcher_is_not_recorded(argv):
    assert record_process.is_launcher(argv)
    assert not record_process.is_launcher(["job.py"]) and not record_process.is_launcher([])


def test_install_and_remove_hook_write_the_pth_line(tmp_path, monkeypatch):
    from neuronkit.apps import record as record_app

    monkeypatch.setattr(record_app, "hook_path", lambda: tmp_path / "neuronkit-record.pth")
    assert record_app.install_hook().read_text() == PTH_LINE
    assert record_app.remove_hook() is True and record_app.remove_hook() is False


def test_a_trainer_gets_the_callback_and_generate_calls_are_labelled(tmp_path, compiler_reset):
    from transformers import Trainer, TrainingArguments

    class MyTrainer(Trainer):
        pass

    class Generator:
        def generate(self, x):
            return torch.compile(lambda t: t * 3, backend="eager")(x)

    with nk.CompileRecorder() as rec:
        record_process._attach_to_trainer(types.SimpleNamespace(Trainer=MyTrainer), rec)
        record_process._label_generate(types.SimpleNamespace(GenerationMixin=Generator), rec)
        args = TrainingArguments(str(tmp_path), max_steps=2, per_device_train_batch_size=2,
                                 torch_compile=True, torch_compile_backend="eager", use_cpu=True,
                                 report_to=[], save_strategy="no", disable_tqdm=True)
        data = [{"inputs": torch.ones(4), "labels": torch.tensor(1.0)}] * 4
        trainer = MyTrainer(model=TinyRegression(4), args=args, train_dataset=data)
        assert sum(isinstance(c, nk.CompileEventsCallback)
                   for c in trainer.callback_handler.callbacks) == 1
        trainer.train()
        Generator().generate(torch.ones(3))
    contexts = [e.context for e in rec.events if e.kind == "first"]
    assert contexts[0] == "step 1" and contexts[-1] == "generate call 1"


def test_a_find_spec_before_the_import_does_not_use_up_the_hook(tmp_path, monkeypatch):
    """transformers asks importlib.util.find_spec("torch") before importing it: the callback must
    still run at the real import."""
    import importlib.util

    from neuronkit.apps import import_hooks

    (tmp_path / "nk_probe_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    import_hooks.after_import("nk_probe_module", lambda m: seen.append(m.VALUE))
    try:
        assert importlib.util.find_spec("nk_probe_module") is not None and seen == []
        import nk_probe_module  # noqa: F401
        assert seen == [1]
    finally:
        sys.modules.pop("nk_probe_module", None)
        import_hooks._AFTER.waiting.pop("nk_probe_module", None)


def test_a_trainer_with_its_own_callback_gets_ours_without_transformers_warning(tmp_path):
    import logging

    from transformers import Trainer, TrainingArguments

    class MyTrainer(Trainer):
        pass

    with nk.CompileRecorder() as mine, nk.CompileRecorder() as rec:
        record_process._attach_to_trainer(types.SimpleNamespace(Trainer=MyTrainer), rec)
        args = TrainingArguments(str(tmp_path), max_steps=1, use_cpu=True, report_to=[],
                                 save_strategy="no", disable_tqdm=True)
        data = [{"inputs": torch.ones(4), "labels": torch.tensor(1.0)}] * 2
        said: list[str] = []
        handler = logging.Handler(logging.WARNING)
        handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
        callbacks_log = logging.getLogger("transformers.trainer_callback")  # transformers does
        callbacks_log.addHandler(handler)                                   # not propagate
        try:
            trainer = MyTrainer(model=TinyRegression(4), args=args, train_dataset=data,
                                callbacks=[nk.CompileEventsCallback(mine)])
        finally:
            callbacks_log.removeHandler(handler)
    recorders = [c.recorder for c in trainer.callback_handler.callbacks
                 if isinstance(c, nk.CompileEventsCallback)]
    assert recorders == [mine, rec]
    assert not [m for m in said if "there is already one" in m]
