"""%%compile_budget: loaded by %load_ext neuronkit, fails a cell over budget, refuses bad arguments."""
from __future__ import annotations

import pytest
import torch

from neuronkit.apps.budget import CompileBudgetExceeded
from neuronkit.apps.magic import parse_budget_args

IPython = pytest.importorskip("IPython")
from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from traitlets.config import Config  # noqa: E402


def triple(x):
    return x * 3


@pytest.fixture
def shell(compiler_reset):
    """A fresh IPython shell with the extension loaded and a compiled function ``fn``."""
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    ip.run_line_magic("load_ext", "neuronkit")
    ip.user_ns.update(torch=torch, fn=torch.compile(triple, backend="eager", dynamic=False))
    yield ip
    InteractiveShell.clear_instance()


def cell(line: str, body: str) -> str:
    return f"%%compile_budget {line}\n{body}\n"


TWO_SHAPES = "fn(torch.ones(2))\nfn(torch.ones(3))"


def test_a_cell_within_budget_runs_and_shows_its_value(shell):
    result = shell.run_cell(cell("max_graphs=2 max_recompiles=1", TWO_SHAPES + "\nkept = 7\nkept * 6"))
    assert result.success and result.result == 42 and shell.user_ns["kept"] == 7


@pytest.mark.parametrize("line, words", [("max_graphs=1", "2 graphs > max_graphs=1"),
                                         ("max_recompiles=0", "1 recompile > max_recompiles=0")])
def test_a_cell_over_budget_fails(shell, capsys, line, words):
    result = shell.run_cell(cell(line, TWO_SHAPES))
    assert isinstance(result.error_in_exec, CompileBudgetExceeded)
    assert words in str(result.error_in_exec) and "triple" in str(result.error_in_exec)
    assert "CompileBudgetExceeded" in capsys.readouterr().out  # shown, as nbval sees it


def test_the_cells_own_error_is_not_masked(shell):
    result = shell.run_cell(cell("max_graphs=0", TWO_SHAPES + "\nraise KeyError('own')"))
    assert isinstance(result.error_in_exec, KeyError)


def test_a_cell_writes_its_log(shell, tmp_path):
    path = tmp_path / "cell.jsonl"
    assert shell.run_cell(cell(f"max_graphs=2 log_path={path}", TWO_SHAPES)).success
    assert path.read_text().count('"kind": "recompile"') == 1


@pytest.mark.parametrize("line, words", [
    ("max_graphs", "expected key=value"),
    ("max_graphs=", "expected key=value"),
    ("graphs=2", "unknown key 'graphs'"),
    ("max_graphs=two", "max_graphs must be an int or None"),
    ("max_graphs=1.5", "max_graphs must be an int"),
    ("max_compile_s=soon", "max_compile_s must be a number"),
    ("max_graphs=-1", "max_graphs must be >= 0"),
    ("max_compile_s=inf", "max_compile_s must be a finite number"),
    ("max_graphs=1 max_graphs=2", "max_graphs given twice"),
])
def test_bad_arguments_are_a_usage_error(shell, capsys, line, words):
    with pytest.raises(UsageError, match=words):
        parse_budget_args(line)
    result = shell.run_cell(cell(line, "fn(torch.ones(2))"))
    assert isinstance(result.error_in_exec, UsageError)
    assert words in capsys.readouterr().err


def test_max_neff_builds_is_a_cell_argument(shell):
    """On CPU no NEFF is built: a cell that traces graphs still holds ``max_neff_builds=0``."""
    assert parse_budget_args("max_neff_builds=0") == {"max_neff_builds": 0}
    with pytest.raises(UsageError, match="max_neff_builds must be >= 0"):
        parse_budget_args("max_neff_builds=-2")
    assert shell.run_cell(cell("max_neff_builds=0", TWO_SHAPES)).success


def test_arguments_are_parsed_strictly():
    assert parse_budget_args("max_graphs=2 max_recompiles=0 max_compile_s=1.5 max_failures=None "
                             "max_graph_breaks=3 log_path=run.jsonl") == {
        "max_graphs": 2, "max_recompiles": 0, "max_compile_s": 1.5, "max_failures": None,
        "max_graph_breaks": 3, "log_path": "run.jsonl"}
    assert parse_budget_args("") == {}
