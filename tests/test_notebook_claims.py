"""What the notebooks say about Neuron is what was measured there, or is labelled as an assumption:
notebook 03's cost cell prints measured Dynamo / NEFF / wall seconds on Neuron (nothing added to
the wall, no projection) and a labelled projection elsewhere; notebooks 01 and 06 draw no
conclusion about Trainium from numbers that were assumed or synthetic."""
from __future__ import annotations

import base64
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


def test_notebooks_05_to_07_choose_their_model_one_way():
    """``MODEL = "Qwen/Qwen3-0.6B"`` and ``nk.model_or_tiny(MODEL)``, whose note says when the
    embedded tiny model stands in (notebook 08 loads no model: it records the reader's own job)."""
    for number in ("05", "06", "07"):
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


def _code_cells(number: str) -> list:
    return [c for c in _notebook(number).cells if c.cell_type == "code"]


def test_notebook_05_records_a_torchrun_job_and_stores_what_watch_and_report_say():
    """It leads with ``neuronkit record -- torchrun ...`` (each job sized for Trainium: one
    NeuronCore per worker), then stores the text of ``neuronkit watch`` and ``neuronkit report``,
    then the rank groups. A live widget stored nothing (refresh.py drops widget views)."""
    cells = _code_cells("05")
    code = _code("05")
    assert "RecompileDashboard" not in code and "nk.launch(" not in code
    jobs = [i for i, c in enumerate(cells) if "torchrun" in c.source and "Popen(" in c.source]
    assert jobs and '"neuronkit", "record", "--log-dir", "logs", "--",' in cells[jobs[0]].source
    assert "env={**os.environ, **workers_env}" in cells[jobs[0]].source
    assert '{"NEURON_RT_VISIBLE_CORES": "", "NEURON_RT_NUM_CORES": "1"}' in code
    order = {cid: i for i, c in enumerate(cells) for cid in [c.get("id")]}
    assert order["watch-fsdp"] < order["6680bc0f"] < order["d3b10dbc"]  # watch, report, groups
    watch = _outputs("05", "watch-fsdp")
    assert watch.startswith("neuronkit watch logs\n") and "Ranks" in watch and "Advice" in watch
    report = _outputs("05", "6680bc0f")
    assert report.startswith("neuronkit compile report: device ")
    assert "Per function" in report and "graph breaks:" in report
    assert "tp group [0, 1] (fsdp shard 0): 17 graphs each" in _outputs("05", "d3b10dbc")
    for cell in cells:
        kinds = [k for o in cell.outputs for k in o.get("data", {})]
        assert "application/vnd.jupyter.widget-view+json" not in kinds, cell.get("id")
        assert cell.outputs, f"cell {cell.get('id')} stores nothing"
    [chart] = [c for c in cells if "timeline(" in c.source]
    assert any("image/png" in o.get("data", {}) for o in chart.outputs)


def test_notebook_05_prints_no_bare_label():
    """A printed label is followed by what it labels ("the run: (groups from ...)" said nothing)."""
    for line in _all_outputs("05").splitlines():
        assert not re.match(r"[\w' ]+: \(", line), line


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


def _pictures(cell: nbformat.NotebookNode) -> list[bytes]:
    return [base64.b64decode(o["data"]["image/png"]) for o in cell.get("outputs", [])
            if "image/png" in o.get("data", {})]


def test_notebook_06_keeps_a_picture_of_each_dashboard_state():
    """A widget draws only in a running kernel (not on GitHub, nor on Binder before the notebook
    runs): each cell that changes what the dashboard shows (a generate, a sweep, a comparison, a
    replay) stores the chart it shows then as a picture, in itself or in the cell after it, and
    the pictures of the whole widget that the prose embeds are in the repository."""
    cells = [c for c in _notebook("06").cells if c.cell_type == "code"]
    changes = re.compile(r"\bdash\.(?:generate|sweep)\(|\.compare\(|\.from_log\(")
    steps = [i for i, c in enumerate(cells) if changes.search(c.source)]
    assert len(steps) >= 5, "load and generate, two sweeps, a comparison, a replay"
    for i in steps:
        pictures = [p for c in cells[i:i + 2] for p in _pictures(c)]
        assert pictures, f"06 cell {cells[i].get('id')}: no picture of the dashboard's state"
        assert all(p.startswith(b"\x89PNG") and len(p) > 5000 for p in pictures)
    embedded = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", _prose("06"))
    assert "images/06_dashboard_live.png" in embedded
    assert "images/06_dashboard_replay.png" in embedded
    for path in embedded:
        picture = (ROOT / "notebooks" / path).resolve()
        assert picture.is_file() and picture.read_bytes().startswith(b"\x89PNG"), path


def test_notebook_08_records_an_unchanged_script_and_reads_the_latest_run():
    """Bring your own job: a script that knows nothing of neuronkit, recorded as it is; its report
    read with no path (the latest run); the fix the advice names, applied; a rerun that passes
    the budget the first run failed."""
    from neuronkit.apps.record import default_log_dir

    code = {c.get("id"): c.source for c in _notebook("08").cells if c.cell_type == "code"}
    script = code["write-script"]
    assert script.startswith("%%writefile train.py") and "neuronkit" not in script
    assert "torch.compile(" in script and "pad_sequence(rows, batch_first=True)" in script
    assert code["record-1"] == code["record-2"] == 'run("neuronkit record -- python train.py")'
    assert code["report-1"] == 'run("neuronkit report")'
    # the run folders' names, <date>-<time>, are what the notebook's helper hides in its output
    assert re.fullmatch(r"\d{8}-\d{6}", default_log_dir().name)
    assert r'DATED = re.compile(r"\b\d{8}-\d{6}\b")' in code["setup"]
    assert "1 log(s) in neuronkit-logs/<date>-<time>" in _outputs("08", "record-1")
    report = _outputs("08", "report-1")
    assert "no path given: reading the latest run, neuronkit-logs/<date>-<time>" in report
    assert "[warning] forward: tokens dim 1 took 7 values" in report
    [length] = re.findall(r"fix: pad to one length, (\d+):", report)
    assert f"LENGTH = {length}" in code["fix"] and f"length, {length} (" in _prose("08")
    rerun = _outputs("08", "record-2")
    assert rerun.count(f"batch (4, {length})") == 7 and "exit code: 0" in rerun
    budget = _outputs("08", "budget")
    assert "--fail-on warning" in code["budget"]
    assert re.findall(r"exit code: (\d+)", budget) == ["3", "0"], budget
    assert "compiled 1 graph instead of 7" in _outputs("08", "compare")


def test_notebook_08_keeps_the_logs_it_tells_the_reader_to_keep():
    """The notebook deleted the log it had just told the reader to keep: it deletes nothing now,
    and says where the runs are."""
    code = _code("08")
    for deleting in ("unlink(", "rmtree(", "remove(", "rm "):
        assert deleting not in code, deleting
    prose = _prose("08")
    assert "Nothing here deletes them" in prose and "`neuronkit-logs/`" in prose
    assert _outputs("08", "keep").count("<date>-<time>") == 2   # both runs are there


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


TRN2_SETUP = "## On Trainium: set up first"


def test_notebook_01_catches_the_missing_device_and_starts_with_a_trn2_setup():
    cell = [c for c in _notebook("01").cells if c.get("id") == "cell-10"][0]
    assert "raises-exception" not in cell.metadata.get("tags", [])
    assert _outputs("01", "cell-10").startswith("NeuronNotFoundError: device 'neuron' asked for")
    cells = _notebook("01").cells
    setup = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and TRN2_SETUP in c.source)
    first_code = next(i for i, c in enumerate(cells) if c.cell_type == "code")
    assert setup < first_code, "the trn2 setup comes before the CPU walkthrough"
    on_trainium = _prose("01").split(TRN2_SETUP, 1)[1].split("## What torch-neuronx registers", 1)[0]
    for step in ("pip install --dry-run -e \".[notebooks]\"", "**without** `-c constraints.txt`",
                 "neuronkit doctor", "export TORCH_NEURONX_NEFF_CACHE_DIR=$HOME/neff-cache",
                 "jupyter lab --no-browser --port 8888",
                 "ssh -N -L 8888:localhost:8888 ubuntu@<instance>", "HF_TOKEN",
                 "(../docs/trainium.md)"):
        assert step in on_trainium, step


def test_notebook_01_says_one_process_owns_a_neuroncore():
    setup = _prose("01").split(TRN2_SETUP, 1)[1].split("## What torch-neuronx registers", 1)[0]
    assert "NEURON_RT_VISIBLE_CORES" in setup and "NEURON_RT_NUM_CORES" in setup
    assert "torchrun" in setup and "restart" in setup.lower()
    anchor = "neuroncores-belong-to-one-process"
    assert f"(../docs/trainium.md#{anchor})" in setup
    docs = (ROOT / "docs" / "trainium.md").read_text()
    assert "\n## NeuronCores belong to one process\n" in docs, "the linked section"


def test_notebooks_02_to_04_point_to_the_setup_where_it_is():
    for number in ("02", "03", "04"):
        prose = _prose(number)
        assert "(01_check_your_setup.ipynb)'s last section" not in prose, number
        assert "(01_check_your_setup.ipynb)'s first section" in prose, number


def _chart_cells(number: str) -> list:
    return [c for c in _notebook(number).cells
            if c.cell_type == "code" and "timeline(" in c.source]


def test_notebooks_03_and_04_store_the_charts_they_describe():
    """A chart drawn under a non-interactive backend (CI's MPLBACKEND=Agg) or shown only in a
    widget (refresh.py drops widget views) is not in the notebook: the prose would describe
    nothing. Each chart cell stores a picture."""
    for number in ("03", "04"):
        cells = _chart_cells(number)
        assert cells, number
        for cell in cells:
            kinds = [k for o in cell.outputs for k in o.get("data", {})]
            assert "image/png" in kinds, f"{number} cell {cell.get('id')}: no stored figure"
            assert "application/vnd.jupyter.widget-view+json" not in kinds, number


def test_notebook_02_shows_plain_generate_recompiling_before_nk_generate():
    cells = _notebook("02").cells
    [at] = [i for i, c in enumerate(cells) if c.cell_type == "code" and "for prompt in" in c.source
            and ".generate(" in c.source and "nk.CompileRecorder()" in c.source]
    code = cells[at].source
    assert 'cache_implementation="static"' in code and "compile_config=" in code
    assert "nk.generate(" not in code
    first_nk_generate = next(i for i, c in enumerate(cells)
                             if c.cell_type == "code" and "nk.generate(" in c.source)
    assert at < first_nk_generate
    out = _outputs("02", cells[at].get("id"))
    rows = [line for line in out.splitlines() if line[:1].isdigit()]  # the event table's rows
    assert [row.split()[3] for row in rows] == ["first", "recompile"], out
    assert "keys dim 2:" in rows[1], out   # the static cache's length, which follows the prompt's


def test_plain_generate_keeps_its_longest_static_cache_as_notebooks_02_and_03_say(model, tok):
    """transformers sizes generate()'s static cache for the prompt plus ``max_new_tokens`` and
    keeps the longest length it used on a model (``_prepare_static_cache``): a shorter prompt
    reuses the cache and its graph, only a longer one recompiles. Notebook 03 said that plain
    ``model.generate`` compiled a decode graph for every new prompt length."""
    def cache_length(prompt: str) -> int:
        inputs = tok(prompt, return_tensors="pt")
        out = model.generate(**inputs, do_sample=False, max_new_tokens=2, disable_compile=True,
                             cache_implementation="static", return_dict_in_generate=True)
        cache = out["cache"] if "cache" in out else out["past_key_values"]
        return cache.layers[0].keys.shape[2]

    short = cache_length("one two")
    longer = cache_length("one two three four five six seven eight nine ten")
    assert longer > short and cache_length("one two") == longer
    prose = _prose("03")
    assert "a decode graph for each of the first eight cache lengths" not in prose
    assert "a prompt longer than any before" in prose and "longer than any before" in _prose("02")


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
