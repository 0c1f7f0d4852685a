"""Warm up -> ship the NEFF cache -> serve in a NEW process (``neuronkit.examples.serve_plan``).

The serving process traces every graph again (a graph budget fails there); what it must not do on
Neuron is build a NEFF. On CPU it really runs (no NEFFs). Neuron is the contract fake
(``tests/neuron_fake``) in both processes: the warm-up writes its NEFFs as files under
``TORCH_NEURONX_NEFF_CACHE_DIR``, the folder is copied ("shipped"), and the serving process's fake
finds them there: nothing of the warm-up's memory crosses the process boundary.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import neuronkit as nk
from neuronkit.examples.serve_plan import main
from neuronkit.log.compile_log import CompileLog

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
PLAN = {"buckets": [8], "batch_sizes": [1], "max_new_tokens": 2}   # a prefill + a decode graph

# the serving process with the Neuron fake installed, its NEFF cache read from files on disk
UNDER_FAKE = """
import runpy, sys
from neuron_fake import installed_fake

print("Neuron fake installed (tests/neuron_fake): nothing here runs on Neuron", flush=True)
sys.argv = ["serve_plan", *sys.argv[1:]]
with installed_fake(use_disk=True) as fake:
    try:
        runpy.run_module("neuronkit.examples.serve_plan", run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code
sys.exit(code)
"""


def serve(args: list[str], env: dict[str, str] | None = None,
          fake: bool = False) -> subprocess.CompletedProcess[str]:
    """``python -m neuronkit.examples.serve_plan ARGS`` in a new process (under the fake)."""
    command = ["-c", UNDER_FAKE] if fake else ["-m", "neuronkit.examples.serve_plan"]
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *command, *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


# On CPU for real, a new serving process: notebook 07 runs it (nbval compares its printed lines:
# graphs traced again, no NEFF builds, the budget held, exit code 0). Here: Neuron, through the fake.
@pytest.mark.slow
def test_a_shipped_neff_cache_serves_with_no_neff_build(model, tok, tiny_model_path, tmp_path,
                                                        compiler_reset, clean_env, monkeypatch,
                                                        capsys):
    from neuron_fake import installed_fake

    warm_cache = tmp_path / "warm" / "neff_cache"
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(warm_cache))
    monkeypatch.setenv("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", str(tmp_path / "warm" / "local"))
    with installed_fake(use_disk=True) as fake:   # the warm-up process: neuronx-cc "builds" both
        manifest = nk.warmup(model, tok, **PLAN, backend="neuron")
    assert [g["neff_cache"] for g in manifest.graphs] == ["compiled"]
    keys = manifest.graphs[0]["cache_keys"]
    neffs = sorted(warm_cache.rglob("*.neff"))
    assert len(keys) == len(neffs) == 2 and not fake.queue   # both NEFFs written as files
    path = manifest.save(tmp_path / "warmup.json")

    shipped = tmp_path / "server" / "neff_cache"      # "shipped": copied to the serving machine
    shutil.copytree(warm_cache, shipped)
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(shipped),
           "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": str(tmp_path / "server" / "local")}
    args = ["--manifest", str(path), "--model", str(tiny_model_path), "--device", "cpu",
            "--log", str(tmp_path / "serve.jsonl")]
    done = serve(args, env, fake=True)
    print(capsys.readouterr().out + done.stdout)  # shown with -s; the output below is main()'s
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    out = done.stdout
    assert "compile backend: neuron   torch-neuronx: 0.1.0 (<neuron_fake:torch_neuronx>)" in out
    assert "graphs traced by Dynamo in this process: 2" in out    # max_graphs=0 would fail
    assert "NEFF builds: 0, loaded from the NEFF cache: 2 (2 from disk, 0 already in memory)" in out
    assert "budget max_neff_builds=0: held; max_graphs=0 would have failed: 2 graphs traced" in out
    events = [e for e in CompileLog.load(tmp_path / "serve.jsonl").events
              if e.kind in ("first", "recompile")]
    assert [e.neff_cache for e in events] == ["disk_hit", "disk_hit"]
    assert sorted(p.name for p in shipped.rglob("*.neff")) == sorted(p.name for p in neffs)

    # a server given no cache (an empty folder) builds every NEFF: the budget is exceeded, exit 1
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "empty" / "neff_cache"))
    with installed_fake(use_disk=True):
        assert main(args[:-2]) == 1
    out = capsys.readouterr().out
    assert "NEFF builds: 2, loaded from the NEFF cache: 0" in out
    assert "budget max_neff_builds=0: EXCEEDED, 2 NEFF build(s) in serving:" in out
    built = [line for line in out.splitlines() if line.startswith("  event ")]
    assert len(built) == 2 and all("[serve: batch 1, bucket 8" in line and
                                   line.endswith("NEFF built by neuronx-cc in 2.0 s") for line in built)
    print(out)


@pytest.mark.parametrize("content, words", [
    (None, "no such file"),
    ("{not json", "not valid JSON"),
    ('{"format": "other"}', "is not a neuronkit warm-up manifest"),
])
def test_bad_input_exits_2_with_a_clear_message(tmp_path, capsys, content, words):
    path = tmp_path / "warmup.json"
    if content is not None:
        path.write_text(content)
    assert main(["--manifest", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m neuronkit.examples.serve_plan: error: --manifest") and words in err
