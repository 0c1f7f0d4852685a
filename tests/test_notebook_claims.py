"""What the notebooks say about Neuron is what was measured there, or is labelled as an assumption:
notebook 03's cost cell prints measured Dynamo / NEFF / wall seconds on Neuron (nothing added to
the wall, no projection) and a labelled projection elsewhere; notebooks 01 and 06 draw no
conclusion about Trainium from numbers that were assumed or synthetic."""
from __future__ import annotations

import contextlib
import io
import re
from types import SimpleNamespace

import nbformat

from helpers.paths import ROOT
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog


def _notebook(number: str) -> nbformat.NotebookNode:
    [path] = sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    return nbformat.read(path, as_version=4)


def _cell(number: str, cell_id: str) -> str:
    [cell] = [c for c in _notebook(number).cells if c.get("id") == cell_id]
    return cell.source


def _prose(number: str) -> str:
    """The notebook's markdown, one space between words."""
    text = " ".join(c.source for c in _notebook(number).cells if c.cell_type == "markdown")
    return " ".join(text.split())


def _run(log: CompileLog, wall: float) -> SimpleNamespace:
    log.set_wall_time(wall)
    return SimpleNamespace(log=log)


def _cost_cell(device: str) -> str:
    """Notebook 03's cost cell run on two recorded runs whose NEFF builds took 400 s and 60 s."""
    naive = _run(CompileLog([
        CompileEvent(kind="first", duration_s=1.5, neff_compile_s=100.0, neff_cache="compiled"),
        CompileEvent(kind="recompile", duration_s=0.5, neff_compile_s=300.0,
                     neff_cache="compiled")]), 450.0)
    bucketed = _run(CompileLog([
        CompileEvent(kind="first", duration_s=1.0, neff_compile_s=60.0, neff_cache="compiled")]),
        80.0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(_cell("03", "cell-21"), {"naive": naive, "bucketed": bucketed,
                                      "report": SimpleNamespace(device=device)})
    return out.getvalue()


def test_notebook_03_on_neuron_prints_what_was_measured_and_adds_nothing_to_the_wall():
    out = _cost_cell("neuron")
    assert "projected" not in out and "NEURON_COMPILE_S" not in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith(("naive", "bucketed"))}
    # graphs, Dynamo s, NEFF s, compile s (each second once), the wall as measured
    assert rows["naive"][1:] == ["2", "2.00", "400.00", "402.00", "450.00"]
    assert rows["bucketed"][1:] == ["1", "1.00", "60.00", "61.00", "80.00"]
    assert "measured on Neuron" in out


def test_notebook_03_off_neuron_labels_its_projection():
    out = _cost_cell("cpu")
    assert "projected on Neuron s" in out
    flat = " ".join(out.split())
    assert "an assumed cost per Neuron compile, not a measurement" in flat


def test_notebook_03_says_what_a_neuron_run_measures_without_counting_a_build_twice():
    prose = _prose("03")
    assert "the projection in the last section becomes a measurement" not in prose
    assert "(a Neuron compile of a small graph)" not in prose
    assert "in a minute or more on Trainium" not in prose
    on_trainium = prose.split("On Trainium, run this", 1)[1]
    assert "no projection" in on_trainium and "`log.total_neff_s`" in on_trainium
    assert "nothing is added to it" in on_trainium


def test_notebook_06_calls_its_60_s_an_assumption():
    prose = _prose("06")
    assert "what a Trainium compile costs" not in prose
    assert "about a minute on Neuron" not in prose
    compare = prose.split("## Compare the two runs", 1)[1].split("##", 1)[0]
    assert "assumed 60 s per graph, not measured" in compare


def test_notebook_01_draws_no_conclusion_from_its_synthetic_log():
    prose = _prose("01")
    assert "would hide nearly all of the cost" not in prose
    assert "matters as much as compiling few graphs" not in prose
    after = prose.split("Its header says so:", 1)[1].split("## The compile cache", 1)[0]
    assert "planned, not measured" in after


def test_notebook_01_says_when_monitoring_waits_for_the_device():
    prose = _prose("01")
    assert "costs nothing" not in prose
    assert ("adds no synchronize in steady state" in prose
            and "logging steps, epoch ends and `rec.stop()`" in prose)


def test_notebook_01_uses_torch_neuronx_meaning_of_a_stale_lock():
    prose = _prose("01")
    assert not re.search(r"that no compile holds is stale", prose)
    assert "held past `TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT`" in prose
