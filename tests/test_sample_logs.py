"""The sample logs shipped with the notebooks are what the current code records: each header is
the current log format version, and regenerating a sample with its script
(``notebooks/data/make_sample_log.py``, ``make_neuron_sample.py``) gives the same events
(functions, kinds, input shapes, what changed; not the times)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.paths import ROOT
from neuronkit.events.schema import FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog

DATA = ROOT / "notebooks" / "data"
SAMPLES = {"sample_compile_log.jsonl": "make_sample_log.py",
           "sample_neuron_log.jsonl": "make_neuron_sample.py"}


def _events(path) -> list[tuple]:
    """What a regeneration must reproduce: no times, no compile ids."""
    return [(e.kind, e.function, json.dumps(e.input_shapes, sort_keys=True), e.changed,
             e.context, e.neff_cache) for e in CompileLog.load(path).events]


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_sample_header_is_the_current_log_format(sample):
    header = json.loads((DATA / sample).read_text(encoding="utf-8").splitlines()[0])
    assert header["format"] == "neuronkit-compile-log"
    assert header["version"] == FORMAT_VERSION, f"regenerate it: python notebooks/data/{SAMPLES[sample]}"


def test_compile_sample_shows_recompiles_and_no_forced_limit_hit():
    """Notebook 6's replay: a new prefill and decode graph per prompt length, each recompile
    naming the dimension that changed; nk.generate fitted the limit, so no limit was hit."""
    log = CompileLog.load(DATA / "sample_compile_log.jsonl")
    kinds = [e.kind for e in log.events]
    assert kinds[0] == "first" and set(kinds[1:]) == {"recompile"}
    assert all(e.changed for e in log.events[1:])
    assert "no padding" in log.header["description"] and "not Trainium" in log.header["description"]


@pytest.mark.slow
@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_regenerating_a_sample_gives_the_same_events(sample, tmp_path, tiny_model_path):
    """In a process of its own, as a maintainer runs it: what a recompile "changed" is read from
    torch's guards, which an earlier test's graphs in this process would change."""
    done = subprocess.run([sys.executable, str(DATA / SAMPLES[sample]), str(tmp_path)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NEURONKIT_CPU_BACKEND": "eager"})
    assert done.returncode == 0, done.stderr[-3000:]
    fresh, shipped = tmp_path / sample, DATA / sample
    assert _events(fresh) == _events(shipped), f"regenerate it: python notebooks/data/{SAMPLES[sample]}"
    assert CompileLog.load(fresh).header["description"] == CompileLog.load(shipped).header["description"]
