"""Why did it compile again, end to end on CPU with inductor's persistent cache: run 1 builds, run
2 (same code) loads, run 3 (one inductor setting changed) builds; ``neuronkit diff`` names the
changed part of the key, and ``neuronkit cache check`` against the cache as it was before run 3
predicted the rebuild. Each run is a real process recorded by ``neuronkit record``."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuronkit.log.open import open_log

pytestmark = pytest.mark.slow


def _neuronkit(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neuronkit", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _record(run: str, env: dict[str, str], cwd: Path) -> None:
    done = _neuronkit("record", "--log-dir", run, "--", sys.executable, "-m",
                      "neuronkit.examples.cache_runs", env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "compiled on cpu / inductor" in done.stdout


def _fx(run: Path) -> list[tuple[str, str]]:
    """(state, key) of each FX graph lookup of the run's graphs."""
    return [(lk["state"], lk["key"]) for e in open_log(run).events if e.kind == "first"
            for lk in e.cache_key if lk["cache"] == "fx_graph"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache-runs")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "NEURON"))}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(root / "inductor"), NEURONKIT_CPU_BACKEND="inductor")
    _record("runs/1", {**env, "TORCH_TRACE": str(root / "trace")}, root)  # torch's trace too
    _record("runs/2", env, root)
    shutil.copytree(root / "inductor", root / "before-3")  # the cache as run 3 found it
    _record("runs/3", {**env, "TORCHINDUCTOR_FREEZING": "1"}, root)
    return root, env


def test_run_1_builds_run_2_loads_run_3_builds(runs):
    root, _ = runs
    (one,), (two,), (three,) = (_fx(root / "runs" / n) for n in "123")
    assert one[0] == "miss" and two == ("hit", one[1])
    assert three[0] == "miss" and three[1] != one[1]


def test_each_key_is_written_once_with_its_parts(runs):
    """Run 1's log: the FX graph lookup on its event, what the key is made of (the graph's code,
    the input's dtype and shape, inductor's settings) in one ``key_parts`` line per key."""
    root, _ = runs
    (log_file,) = (root / "runs" / "1").glob("*.jsonl")
    log = open_log(log_file)
    ((state, key),) = _fx(root / "runs" / "1")
    parts = log.key_parts.described(key)
    assert "torch.Size([4, 32])" in parts["example_inputs[0]"] and "float32" in parts["example_inputs[0]"]
    assert "aten.mm" in parts["gm"] and parts["inductor_config[freezing]"] == "False"
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    written = [line["key_parts"]["key"] for line in lines if "key_parts" in line]
    assert len(written) == len(set(written)) and key in written
    assert [e.metrics["input_dtypes"] for e in log.events if e.kind == "first"] == [
        {"x": "float32", "weight": "float32"}]


def test_a_torch_trace_folder_gives_the_same_lookups_and_parts(runs):
    """The TORCH_TRACE files of run 1 carry the same cache artifacts: read after the fact, the
    build has the same lookup and its key's parts."""
    from neuronkit.log.compile_log import CompileLog

    root, _ = runs
    traced = CompileLog.from_torch_trace(root / "trace")
    (event,) = [e for e in traced.events if e.kind == "first"]
    (fx,) = [(lk["state"], lk["key"]) for lk in event.cache_key if lk["cache"] == "fx_graph"]
    assert [fx] == _fx(root / "runs" / "1")
    assert traced.key_parts.described(fx[1]) == open_log(root / "runs" / "1").key_parts.described(fx[1])


def test_diff_names_the_changed_setting_of_the_rebuilt_graph(runs):
    root, env = runs
    same = _neuronkit("diff", "runs/1", "runs/2", "--json", env=env, cwd=root)
    changed = _neuronkit("diff", "runs/2", "runs/3", env=env, cwd=root)
    assert same.returncode == 0 and changed.returncode == 0, changed.stderr
    assert "freezing False -> True" in changed.stdout
    data = json.loads(same.stdout)
    assert data["format"] == "neuronkit-diff"
    gate = _neuronkit("diff", "runs/2", "runs/3", "--fail-on", "builds", env=env, cwd=root)
    assert gate.returncode == 1 and "builds" in gate.stderr


def test_cache_check_before_run_3_predicted_its_rebuild(runs):
    root, env = runs
    before = str(root / "before-3")
    warm = _neuronkit("cache", "check", "runs/2", "--cache", before, env=env, cwd=root)
    cold = _neuronkit("cache", "check", "runs/3", "--cache", before, "--json", env=env, cwd=root)
    assert warm.returncode == 0, warm.stdout + warm.stderr
    assert cold.returncode == 1, cold.stdout + cold.stderr
    predicted = {g["key"] for g in json.loads(cold.stdout)["graphs"] if g["verdict"] == "build"}
    built = {key for state, key in _fx(root / "runs" / "3") if state == "miss"}
    assert predicted == built and built
    now = _neuronkit("cache", "check", "runs/3", "--cache", "inductor", env=env, cwd=root)
    assert now.returncode == 0, now.stdout  # run 3 stored what it built
