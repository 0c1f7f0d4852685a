"""``neuronkit warmup --manifest M -j N``: build a recorded run's graphs ahead of time, in N
processes that share one cache. Each runs the manifest's command in its folder, recorded into a
scratch folder, with ``NEURONKIT_PRECOMPILE=i/N``: the shard hook
(``sources/precompile_shard.py``) lets it build only the graphs shard i owns and run the others
eagerly, so together they build every graph once, with the job's own code path and keys.

The cache: ``--cache DIR`` is inductor's (``TORCHINDUCTOR_CACHE_DIR``) off Neuron, the NEFF cache
(``TORCH_NEURONX_NEFF_CACHE_DIR``) on Neuron; without it, the caches the job's environment names.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from neuronkit.apps.autorecord import ENV as RECORD_ENV
from neuronkit.apps.autorecord import SITECUSTOMIZE
from neuronkit.setup.cache_native import CACHE_DIR_ENV
from neuronkit.sources.precompile_shard import ENV as SHARD_ENV
from neuronkit.sources.precompile_shard import REPORT_GLOB
from neuronkit.workloads.run_manifest import RunManifest

__all__ = ["INDUCTOR_CACHE_ENV", "Precompile", "ShardRun", "precompile", "shard_environment"]

INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
AS_NEURON_ENV = "NEURONKIT_AS_NEURON"  # ``neuronkit record --as-neuron`` sets it in the job
TAIL_LINES = 20
# the recording hook of ``neuronkit record``, then the shard hook once torch is imported (a
# second install, by record_process.start, is a no-op)
PRECOMPILE_SITE = SITECUSTOMIZE + '''
if os.environ.get("NEURONKIT_PRECOMPILE"):
    def _shard(torch):
        from neuronkit.sources.precompile_shard import install_shard_from_env
        install_shard_from_env()
    from neuronkit.apps.import_hooks import after_import
    after_import("torch", _shard)
'''


@dataclass
class ShardRun:
    """One shard's process: its exit code, seconds, the graphs it built and left to others."""

    index: int
    shards: int
    code: int | None = None
    seconds: float = 0.0
    built: list[str] = field(default_factory=list)
    skipped: int = 0
    reports: int = 0  # processes of the command that said what they built
    stderr_tail: str = ""
    folder: Path = Path()

    @property
    def ok(self) -> bool:
        return self.code == 0

    def line(self) -> str:
        head = f"shard {self.index + 1}/{self.shards}:"
        if not self.ok:
            return f"{head} FAILED (exit {self.code}) after {self.seconds:.1f} s"
        if not self.reports:
            return (f"{head} done in {self.seconds:.1f} s, but no process of the command said "
                    "what it built (did it import torch?)")
        return (f"{head} built {len(self.built)} forward graph(s) in {self.seconds:.1f} s, "
                f"left {self.skipped} to other shards")


@dataclass
class Precompile:
    """The warm-up of every shard; ``seconds``: wall time, first start to last exit."""

    shards: list[ShardRun]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.shards)

    @property
    def built(self) -> int:
        return sum(len(s.built) for s in self.shards)


def shard_environment(manifest: RunManifest, index: int, shards: int, site: str, scratch: Path,
                      cache: Path | None) -> dict[str, str]:
    """The environment of shard ``index``: this one's, recorded into ``scratch``, the shard hook
    on, ``NEURONKIT_AS_NEURON=1`` where the run was recorded so, the cache named (inductor's, or
    the NEFF cache for a run on Neuron)."""
    env = dict(os.environ)
    env[RECORD_ENV] = str(scratch.resolve())
    env[SHARD_ENV] = f"{index}/{shards}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH", "")) if p)
    if manifest.as_neuron is not None:  # Neuron's compile rules change the graphs: same as recorded
        env[AS_NEURON_ENV] = "1"
    if cache is not None:
        on_neuron = manifest.device.startswith("neuron")
        env[CACHE_DIR_ENV if on_neuron else INDUCTOR_CACHE_ENV] = str(cache.resolve())
    return env


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-TAIL_LINES:])


def _collect(run: ShardRun) -> None:
    """What the shard's processes wrote at exit (``precompile-shard.<pid>.json``)."""
    for path in sorted(run.folder.glob(REPORT_GLOB)):
        try:
            report = json.loads(path.read_text())
            run.built += [str(k) for k in report.get("built", [])]
            run.skipped += len(report.get("skipped", []))
            run.reports += 1
        except (OSError, ValueError, AttributeError, TypeError):
            continue


def precompile(manifest: RunManifest, jobs: int, cache: Path | None = None,
               scratch: Path | None = None,
               on_event: Callable[[str], None] = lambda line: None) -> Precompile:
    """Run the manifest's command ``jobs`` times at once, shard i of ``jobs`` each (see the
    module); ``on_event`` gets a line as each shard starts and ends."""
    if jobs < 1:
        raise ValueError(f"-j must be at least 1, got {jobs}")
    if not Path(manifest.cwd).is_dir():
        raise ValueError(f"the manifest's folder {manifest.cwd} does not exist here")
    with tempfile.TemporaryDirectory(prefix="neuronkit-precompile-") as tmp:
        site = Path(tmp, "site")
        site.mkdir()
        (site / "sitecustomize.py").write_text(PRECOMPILE_SITE)
        scratch = Path(scratch) if scratch is not None else Path(tmp, "runs")
        runs, procs = [], []
        started = time.perf_counter()
        try:
            for i in range(jobs):
                run = ShardRun(i, jobs, folder=scratch / f"shard-{i}")
                run.folder.mkdir(parents=True, exist_ok=True)
                env = shard_environment(manifest, i, jobs, str(site), run.folder, cache)
                with open(run.folder / "stdout.txt", "wb") as out, \
                        open(run.folder / "stderr.txt", "wb") as err:
                    procs.append(subprocess.Popen(manifest.command, cwd=manifest.cwd, env=env,
                                                  stdout=out, stderr=err,
                                                  stdin=subprocess.DEVNULL))
                runs.append(run)
                on_event(f"shard {i + 1}/{jobs}: started (pid {procs[-1].pid})")
            _wait(runs, procs, started, on_event)
        finally:
            for proc in procs:
                if proc.poll() is None:  # Ctrl-C or an error here: no shard outlives the warm-up
                    proc.kill()
                    proc.wait()
        return Precompile(runs, time.perf_counter() - started)


def _wait(runs: list[ShardRun], procs: list[subprocess.Popen[bytes]], started: float,
          on_event: Callable[[str], None]) -> None:
    left = set(range(len(procs)))
    while left:
        for i in sorted(left):
            code = procs[i].poll()
            if code is None:
                continue
            left.discard(i)
            run = runs[i]
            run.code, run.seconds = code, time.perf_counter() - started
            _collect(run)
            if not run.ok:
                run.stderr_tail = _tail(run.folder / "stderr.txt")
            on_event(run.line())
        if left:
            time.sleep(0.05)
