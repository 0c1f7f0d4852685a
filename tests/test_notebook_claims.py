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


def test_notebook_01_judges_a_lock_by_its_holder_not_its_age():
    prose = _prose("01")
    assert not re.search(r"that no compile holds is stale|stale\* when it is held past", prose)
    assert "whether a process holds it now" in prose
    assert "counted from the start of its own wait" in " ".join(prose.split())


def _outputs(number: str, cell_id: str) -> str:
    [cell] = [c for c in _notebook(number).cells if c.get("id") == cell_id]
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_notebooks_05_to_08_choose_their_model_one_way():
    """``MODEL = "Qwen/Qwen3-0.6B"`` and ``nk.model_or_tiny(MODEL)``, whose note says when the
    embedded tiny model stands in."""
    for number in ("05", "06", "07", "08"):
        code = "\n".join(c.source for c in _notebook(number).cells if c.cell_type == "code")
        assert 'MODEL = "Qwen/Qwen3-0.6B"' in code and "nk.model_or_tiny(MODEL)" in code, number
        assert "print(choice.note)" in code, number


def test_notebook_05_says_its_2x2_cells_run_the_plain_loop():
    import inspect

    from neuronkit.examples import distributed_training

    prose = _prose("05")
    assert "the example trains the 2x2 layout with `Trainer` (`--trainer`)" not in prose
    tp = prose.split("## Tensor parallel x FSDP", 1)[1].split("## Which group", 1)[0]
    assert "**The cells below run that plain loop**" in tp and "add `--trainer`" in tp
    assert "--trainer" not in _cell("05", "09ea644a")         # the cell runs the plain loop
    assert "plain training loop" in _outputs("05", "cell-19b")  # and its run says so
    assert '"--trainer"' in inspect.getsource(distributed_training.main)  # the flag exists
    on_trainium = prose.split("On Trainium, run this", 1)[1]
    assert "add `\"--trainer\"`" in on_trainium and "not run on hardware" in on_trainium


def test_notebook_06_tells_the_sample_and_the_limit_as_they_are():
    prose = _prose("06")
    assert "ten requests" not in prose and "the red row" not in prose
    assert "five requests of growing length" in prose and "no limit was hit" in prose
    sample = CompileLog.load(ROOT / "notebooks" / "data" / "sample_compile_log.jsonl")
    assert "5 requests" in sample.header["description"]
    assert not any(e.kind in ("limit_hit", "eager_fallback") for e in sample.events)
    # the sweep passes the limit of 8 graphs, and nk.generate says it raised it for the call
    assert "fit_recompile_limit=False" in prose
    assert "recompile limit raised 8 -> 10" in _outputs("06", "28f02802")
    assert "-&gt;" not in _outputs("06", "9e410bc8")


def test_notebook_07_serves_in_a_new_process_and_says_what_was_verified_where():
    prose = _prose("07")
    assert "neuronkit.examples.serve_plan" in _cell("07", "run-serve-plan")
    out = _outputs("07", "run-serve-plan")
    assert "NEFF builds: none" in out and "budget max_neff_builds=0: held" in out
    assert "max_graphs=0 would have failed" in out and "exit code: 0" in out
    assert ("verified here through neuronkit's contract fake of torch-neuronx, not on Trainium "
            "hardware") in prose
    assert "`max_neff_builds=0`" in prose and "`TORCH_NEURONX_NEFF_CACHE_DIR`" in prose


def test_notebook_08_names_the_budget_of_a_new_serving_process():
    prose = _prose("08")
    assert "`max_neff_builds=0`" in prose and "neuronkit.examples.serve_plan" in prose


def _code(number: str) -> str:
    return "\n".join(c.source for c in _notebook(number).cells if c.cell_type == "code")


def _all_outputs(number: str) -> str:
    """Every stored stream output of the notebook, nbval-ignored cells included."""
    return "".join(o.get("text", "") for c in _notebook(number).cells if c.cell_type == "code"
                   for o in c.outputs if o.output_type == "stream")


def test_notebooks_02_to_04_choose_their_model_at_the_top_of_their_first_code_cell():
    for number in ("02", "03", "04"):
        [first, *_] = [c.source for c in _notebook(number).cells if c.cell_type == "code"]
        assert first.startswith('MODEL = "Qwen/Qwen3-0.6B"'), number
        assert "nk.model_or_tiny(MODEL)" in first and "print(choice.note)" in first, number
        code = _code(number)
        assert "nk.tiny_model()" not in code and "NEURONKIT_USE_HUB" not in code, number
        assert "_compile_all_devices" not in code, number


def test_notebook_01_catches_the_missing_device_and_ends_with_a_trn2_setup():
    cell = [c for c in _notebook("01").cells if c.get("id") == "cell-10"][0]
    assert "raises-exception" not in cell.metadata.get("tags", [])
    assert _outputs("01", "cell-10").startswith("NeuronNotFoundError: device 'neuron' asked for")
    on_trainium = _prose("01").split("On Trainium, run this", 1)[1]
    for step in ("pip install --dry-run -e \".[notebooks]\"", "**without** `-c constraints.txt`",
                 "neuronkit doctor", "export TORCH_NEURONX_NEFF_CACHE_DIR=$HOME/neff-cache",
                 "jupyter lab --no-browser --port 8888",
                 "ssh -N -L 8888:localhost:8888 ubuntu@<instance>", "HF_TOKEN",
                 "(../docs/trainium.md)"):
        assert step in on_trainium, step


def test_notebook_03_says_what_the_recompile_limit_does_with_and_without_nk_generate():
    prose = _prose("03")
    assert "One more distinct length and torch would stop" not in prose
    assert "Plain `model.generate(..., cache_implementation=\"static\")` does not raise the limit" in prose
    assert "recompile limit raised 8 -> " in _outputs("03", "cell-05")
    assert "ASSUMED_NEFF_BUILD_S = 60  # an assumption, not a measurement" in _cell("03", "cell-21")


def test_notebook_04_says_what_its_count_covers_and_prints_each_fix_once():
    prose = _prose("04")
    assert "the count Trainium will compile" not in prose
    assert "Why the counts here are the counts on Trainium" not in prose
    assert "kind `backward`" in prose and "`kernels` events" in prose
    outputs = _all_outputs("04")
    assert outputs.count("nk.FixedLengthCollator(tokenizer, max_length=48)") == 1
    assert outputs.count("Keep dataloader_drop_last=True") == 1
