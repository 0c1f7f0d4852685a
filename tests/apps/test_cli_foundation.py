"""``neuronkit doctor`` and ``neuronkit cache`` through the command line."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from neuronkit.apps.cli import main
from neuronkit.log.compile_log import CompileLog


@pytest.fixture
def no_default_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir={tmp_path / 'never-compiled'}")
    monkeypatch.delenv("NEURONKIT_CPU_BACKEND", raising=False)
    return tmp_path / "never-compiled"


@pytest.mark.skipif(torch.cuda.is_available(), reason="describes a CPU-only machine")
def test_doctor_says_no_neuron_and_what_runs_instead(no_neuron, no_default_cache, capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("neuronkit doctor")
    assert "NO - no Neuron device found" in out
    assert ("No Neuron device was found: neuronkit runs on cpu with the 'eager' compile backend"
            in out)
    assert f"{no_default_cache}: not found" in out


def test_doctor_with_a_cache_dir(no_neuron, neuron_cache, capsys):
    assert main(["doctor", "--cache-dir", str(neuron_cache)]) == 0
    out = capsys.readouterr().out
    assert "6 graphs (3 ok, 1 failed, 1 locked, 1 empty)" in out
    assert "[warn] failed compiles" in out


def test_doctor_with_fake_neuron(fake_neuron, no_default_cache, capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "yes, 2 device(s)" in out and "Neuron found: neuronkit runs on neuron" in out


def test_cache_command_lists_failed_entries(neuron_cache, capsys):
    assert main(["cache", str(neuron_cache)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Neuron compile cache: {neuron_cache}")
    assert "block recompiling" in out and "MODULE_" in out and "code 70" in out


def test_cache_command_default_folder(neuron_cache, monkeypatch, capsys):
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir {neuron_cache}")
    assert main(["cache"]) == 0
    assert "from NEURON_CC_FLAGS --cache_dir" in capsys.readouterr().out


def test_cache_command_missing_folder_is_a_message_and_exit_2(tmp_path, capsys):
    assert main(["cache", str(tmp_path / "nope")]) == 2
    captured = capsys.readouterr()
    assert "no folder at" in captured.out and "Traceback" not in captured.out + captured.err


def test_cache_command_on_a_file_is_an_error(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["cache", str(tmp_path / "f")]) == 2
    assert "neuronkit cache: error:" in capsys.readouterr().err


@pytest.mark.slow  # a fresh interpreter importing torch: several seconds on a busy machine
def test_python_dash_m_neuronkit_doctor(no_default_cache):
    env = {**os.environ, "PYTHONWARNINGS": "error::DeprecationWarning:neuronkit"}
    proc = subprocess.run([sys.executable, "-m", "neuronkit", "doctor"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "neuronkit doctor" in proc.stdout and "known traps" in proc.stdout
    if not torch.cuda.is_available():
        assert "No Neuron device was found" in proc.stdout
    assert proc.stderr == ""


# ---- demo: the side-by-side table --------------------------------------------------------------

@pytest.fixture
def quick_demo(monkeypatch, tmp_path, tiny_model_path):
    """The demo with loading and generating replaced: naive builds 2 graphs, bucketed 1, each
    taking 1 s, and each run takes 5 s of wall time."""
    from types import SimpleNamespace

    import neuronkit.setup.models
    import neuronkit.workloads.generation
    from neuronkit.events.event import CompileEvent

    def fake_generate(model, tok, prompts, *, buckets, recorder, **kw):
        for i in range(2 if buckets is None else 1):
            recorder.log.append(CompileEvent(function="forward", kind="first" if i == 0
                                             else "recompile", duration_s=1.0))
        return SimpleNamespace(wall_s=5.0, texts=["a reply"])

    monkeypatch.setattr(neuronkit.setup.models, "load_model", lambda *a, **k: object())
    monkeypatch.setattr(neuronkit.workloads.generation, "generate", fake_generate)
    return ["demo", "--requests", "3", "--model", str(tiny_model_path),
            "--log-dir", str(tmp_path / "logs")]


def _side_by_side(out: str) -> str:
    return out.split("=== side by side ===", 1)[1]


def test_demo_off_neuron_projects_the_neuron_compile_cost(no_neuron, quick_demo, capsys):
    from neuronkit.examples.demo import NEURON_COMPILE_COST_S

    assert main(quick_demo) == 0
    table = _side_by_side(capsys.readouterr().out)
    assert "projected on Neuron s" in table and "it was not run on Neuron" in table
    naive = next(ln for ln in table.splitlines() if ln.startswith("naive"))
    # execution (5 s wall - 2 s compiling) + 2 graphs at the assumed Neuron compile cost
    assert naive.split()[-1] == f"{5.0 - 2.0 + 2 * NEURON_COMPILE_COST_S:.1f}"


def test_demo_buckets_with_what_its_own_advice_suggested(no_neuron, monkeypatch, tmp_path,
                                                         tiny_model_path, capsys):
    """The naive run's advice suggests buckets for the prompt length (nk.plan_buckets at the
    stated price); the bucketed run pads to exactly those, and says where they came from."""
    from types import SimpleNamespace

    import neuronkit.setup.models
    import neuronkit.workloads.generation
    from neuronkit.advice.diagnose import diagnose
    from neuronkit.events.event import CompileEvent

    used = []

    def fake_generate(model, tok, prompts, *, buckets, recorder, **kw):
        used.append(buckets)
        for i, n in enumerate([5, 40, 90] if buckets is None else [max(buckets)]):
            recorder.log.append(CompileEvent(
                function="M.forward[prefill]", kind="first" if i == 0 else "recompile",
                input_shapes={"input_ids": [1, n], "attention_mask": [1, 1, n, n + 8]},
                duration_s=1.0, started_at=100.0 + i))
        return SimpleNamespace(wall_s=5.0, texts=["a reply"])

    monkeypatch.setattr(neuronkit.setup.models, "load_model", lambda *a, **k: object())
    monkeypatch.setattr(neuronkit.workloads.generation, "generate", fake_generate)
    assert main(["demo", "--requests", "3", "--model", str(tiny_model_path),
                 "--log-dir", str(tmp_path / "logs")]) == 0
    naive = CompileLog.load(tmp_path / "logs" / "naive.jsonl")
    finding = next(a for a in diagnose(naive) if a.numbers.get("cause") == "the prompt length")
    assert used[0] is None and list(used[1]) == finding.numbers["buckets"]
    out = capsys.readouterr().out
    assert f"bucketed: pad to {finding.numbers['buckets']} (the buckets the naive run's advice" in out


@pytest.fixture
def neuron_demo(quick_demo, monkeypatch, clean_env):
    """quick_demo on the contract fake of torch-neuronx: each run compiles through the fake's
    ``neuron`` backend (naive: inputs of 3 and 5, two graphs; bucketed: 8, one graph), its NEFF
    builds take what the test plans, and ``walls`` holds the wall time each run measured."""
    import time
    from types import SimpleNamespace

    import neuronkit.workloads.generation

    walls: list[float] = []

    def fake_generate(model, tok, prompts, *, buckets, recorder, backend, **kw):
        start = time.perf_counter()
        fn = torch.compile(lambda x: (x * 2).sum(), backend=backend, dynamic=False)
        for n in ((3, 5) if buckets is None else (8,)):
            fn(torch.ones(n))
        recorder.safe_point()  # as nk.generate does after each batch
        walls.append(time.perf_counter() - start)
        return SimpleNamespace(wall_s=walls[-1], texts=["a reply"])

    monkeypatch.setattr(neuronkit.workloads.generation, "generate", fake_generate)
    return quick_demo, walls


def _neuron_rows(out: str, log_dir: Path) -> dict[str, tuple[list[str], float]]:
    """The side-by-side rows by run, and the Dynamo seconds each run's saved log holds."""
    from neuronkit.log.compile_log import CompileLog

    lines = _side_by_side(out).strip().splitlines()
    assert lines[0].split() == ["run", "graphs", "dynamo", "s", "neff", "s", "compile", "s",
                                "wall", "s"], lines[0]
    rows = {}
    for line in lines[1:3]:
        name = line.split()[0]
        log = CompileLog.load(log_dir / f"{name}.jsonl")
        rows[name] = (line.split(), sum(e.duration_s for e in log.events))
    return rows


def test_demo_on_neuron_reports_measured_times_without_a_projection(neuron_demo, capsys):
    from neuron_fake import installed_fake

    argv, walls = neuron_demo
    with installed_fake(build_type="DEV") as fake:
        for seconds in (100.0, 300.0, 60.0):  # naive's two builds, then bucketed's one
            fake.plan("compiled", duration_s=seconds)
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "device: neuron   compile backend: neuron" in out
    table = _side_by_side(out)
    assert "projected" not in table and "not run on Neuron" not in table
    assert "measured on Neuron" in table and "neuronx-cc's own times" not in table
    rows = _neuron_rows(out, Path(argv[-1]))
    for (name, graphs, neff), wall in zip((("naive", 2, 400.0), ("bucketed", 1, 60.0)), walls,
                                          strict=True):
        row, dynamo = rows[name]
        assert 0 < dynamo < neff
        assert row == [name, str(graphs), f"{dynamo:.2f}", f"{neff:.2f}", f"{dynamo + neff:.2f}",
                       f"{wall:.2f}"]  # the wall time as measured: nothing added to it


def test_demo_on_neuron_in_sync_mode_counts_each_build_once(neuron_demo, capsys, monkeypatch):
    """NEURON_LAUNCH_BLOCKING=1: the builds run inside Dynamo's time, so compile s is Dynamo's
    seconds, and the NEFF column shows how much of them the builds were."""
    from neuron_fake import installed_fake

    argv, _ = neuron_demo
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "1")
    with installed_fake(launch_blocking=True) as fake:
        for seconds in (100.0, 300.0, 60.0):
            fake.plan("compiled", duration_s=seconds)
        assert main(argv) == 0
    out = capsys.readouterr().out
    rows = _neuron_rows(out, Path(argv[-1]))
    row, dynamo = rows["naive"]
    assert row[2:5] == [f"{dynamo:.2f}", "400.00", f"{dynamo:.2f}"]
    assert "NEURON_LAUNCH_BLOCKING=1" in _side_by_side(out)


def test_side_by_side_on_neuron_gives_eager_kernels_their_own_column():
    """A ``kernels`` event's seconds are eager-op kernel builds, not Dynamo's: their own column,
    counted once in compile s."""
    from neuronkit.events.event import CompileEvent
    from neuronkit.examples.demo import side_by_side
    from neuronkit.log.compile_log import CompileLog

    log = CompileLog([
        CompileEvent(kind="first", duration_s=0.5, neff_compile_s=100.0, neff_cache="compiled"),
        CompileEvent(kind="kernels", function="eager kernels", kernels=3, duration_s=4.0)])
    lines = side_by_side({"naive": (log, 120.0)}, on_neuron=True)
    assert lines[0].split() == ["run", "graphs", "dynamo", "s", "neff", "s", "kernel", "s",
                                "compile", "s", "wall", "s"]
    assert lines[1].split() == ["naive", "1", "0.50", "100.00", "4.00", "104.50", "120.00"]
    assert "kernel s = the eager-op kernels built" in " ".join(lines)


# ---- what the command line cannot do is one line and exit 2, never a traceback -----------------

def _one_clear_line(capsys, *words: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err
    return err


@pytest.mark.parametrize("home", ["a file", "under a file"])
def test_demo_with_neuronkit_home_on_a_file_is_a_clear_error(no_neuron, monkeypatch, tmp_path,
                                                             capsys, home):
    (tmp_path / "f").write_text("not a folder")
    folder = tmp_path / "f" if home == "a file" else tmp_path / "f" / "home"
    monkeypatch.setenv("NEURONKIT_HOME", str(folder))
    assert main(["demo", "--requests", "1", "--max-new-tokens", "1",
                 "--log-dir", str(tmp_path / "logs")]) == 2
    _one_clear_line(capsys, "neuronkit demo: error:", f"{folder}", "NEURONKIT_HOME")


@pytest.mark.skipif(not Path("/sys").is_dir(), reason="needs Linux's read-only /sys")
def test_demo_with_a_read_only_neuronkit_home_is_a_clear_error(no_neuron, monkeypatch, tmp_path,
                                                               capsys):
    """A home nobody can write, root included (chmod does not stop root; /sys refuses mkdir)."""
    folder = Path("/sys/neuronkit-test-home")
    monkeypatch.setenv("NEURONKIT_HOME", str(folder))
    assert main(["demo", "--requests", "1", "--max-new-tokens", "1",
                 "--log-dir", str(tmp_path / "logs")]) == 2
    _one_clear_line(capsys, "neuronkit demo: error:", f"{folder}", "NEURONKIT_HOME")


def test_tiny_model_in_a_home_that_refuses_writes_is_a_clear_error(monkeypatch, tmp_path):
    """What a read-only home does, for root too (chmod does not stop root): the build's writes
    fail with PermissionError."""
    from neuronkit.setup import tiny

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr(tiny.tempfile, "mkdtemp", refused)
    with pytest.raises(ValueError, match=r"cannot write the tiny model into .*Permission denied.*"
                                         r"NEURONKIT_HOME"):
        tiny.tiny_model(tmp_path / "home")


def test_demo_log_dir_on_a_file_is_a_clear_error(no_neuron, tmp_path, capsys):
    (tmp_path / "f").write_text("not a folder")
    (tmp_path / "logs" / "naive.jsonl").mkdir(parents=True)  # where the first log goes
    for log_dir in (tmp_path / "f", tmp_path / "f" / "logs", tmp_path / "logs"):
        assert main(["demo", "--requests", "1", "--log-dir", str(log_dir)]) == 2
        _one_clear_line(capsys, "neuronkit demo: error:", f"--log-dir {log_dir}")


@pytest.mark.parametrize("where", ["/dev/full", "under a file"])
def test_warmup_log_that_cannot_be_written_is_a_clear_error(no_neuron, tiny_model_path, tmp_path,
                                                            capsys, where):
    if where == "/dev/full" and not os.path.exists(where):
        pytest.skip("/dev/full: Linux")
    (tmp_path / "f").write_text("not a folder")
    log = where if where == "/dev/full" else str(tmp_path / "f" / "log.jsonl")
    assert main(["warmup", str(tiny_model_path), "--buckets", "8", "--batch-sizes", "1",
                 "--max-new-tokens", "1", "--dtype", "float32", "--log", log]) == 2
    said = ("--log /dev/full is not a file (a device or a pipe): name a file" if log == where
            else f"cannot write the compile log to {log}: ")
    _one_clear_line(capsys, f"neuronkit warmup: error: {said}")
    if where == "/dev/full":  # refused before any write: the device is still a device
        assert stat.S_ISCHR(os.stat(where).st_mode)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGPIPE and pipes: POSIX")
@pytest.mark.parametrize("how", [[], ["--json"], ["--fail-on", "warning"]],
                         ids=["text", "json", "fail-on"])
def test_report_into_a_pipe_closed_early_exits_quietly(tmp_path, how):
    """`neuronkit report LOG | head -1`: the reader has what it wanted; no traceback, and the
    exit code is still the report's own (--fail-on: 3 for the findings)."""
    from neuronkit.events.event import CompileEvent
    from neuronkit.log.compile_log import CompileLog

    path = tmp_path / "log.jsonl"
    CompileLog([CompileEvent(seq=i, function="forward", started_at=float(i), duration_s=0.5,
                             kind="first" if i == 0 else "recompile", reasons=["x" * 200],
                             input_shapes={"x": [2, i]}) for i in range(2000)],
               header={"format": "neuronkit-compile-log", "version": 2}, path=path)
    proc = subprocess.Popen([sys.executable, "-m", "neuronkit", "report", str(path), "--limit",
                             "all", *how], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # then the reader goes away, as head -1 does
    proc.stdout.close()
    err = proc.stderr.read().decode()
    if "--fail-on" in how:
        assert proc.wait(120) == 3 and err.startswith("neuronkit report: ") and err.count("\n") == 1
    else:
        assert proc.wait(120) == 0 and err == ""
    assert first.strip()
