"""``neuronkit warmup --manifest M -j 2`` on Neuron, through the contract fake in every process:
the shards build the recorded run's NEFFs into one cache on disk, and the job in a new process
then builds no NEFF (``max_neff_builds=0``'s rule: every graph a disk hit)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronkit.log.open import open_log
from neuronkit.workloads.neff_builds import counted_as_build

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parents[1]
SIZES = (3, 5, 7, 9)
JOB = f"""\
import torch
from neuron_fake import installed_fake

# native torch-neuronx, as the fake has it, loaded until the process ends (as a real one is:
# the recorder reads its NEFF states at exit)
fake = installed_fake(use_disk=True, build_type="DEV")  # kept: a context left open
fake.__enter__()
fn = torch.compile(lambda x: (x * 2).sum(), backend="neuron", dynamic=False)
for n in {SIZES!r}:
    fn(torch.ones(n))
"""


def _run(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON", "TORCH_NEURONX"))}
    env.update(TORCH_NEURONX_NEFF_CACHE_DIR=str(cache),
               TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=str(cache.parent / f"{cache.name}-locks"),
               PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "neuronkit", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def _builds(run: Path) -> list[str | None]:
    return [e.neff_cache for e in open_log(run).events if e.kind in ("first", "recompile")]


def test_after_a_parallel_warmup_the_job_builds_no_neff(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    job = ["--", sys.executable, "job.py"]
    _run(["record", "--log-dir", "recorded", *job], tmp_path, tmp_path / "first-cache")
    assert _builds(tmp_path / "recorded") == ["compiled"] * len(SIZES)

    warm = tmp_path / "warm-cache"   # a fresh cache: only the warm-up fills it
    _run(["warmup", "--manifest", "recorded/manifest.json", "-j", "2"], tmp_path, warm)
    assert len(list(warm.rglob("*.neff"))) == len(SIZES)

    _run(["record", "--log-dir", "after", *job], tmp_path, warm)
    after = [e for e in open_log(tmp_path / "after").events if e.kind in ("first", "recompile")]
    assert [e.neff_cache for e in after] == ["disk_hit"] * len(SIZES)
    assert not any(counted_as_build(e) for e in after)   # max_neff_builds=0 holds
