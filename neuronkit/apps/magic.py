"""``%%compile_budget``: a notebook cell that fails when it compiles more than allowed.

    %load_ext neuronkit

    %%compile_budget max_graphs=2 max_recompiles=0
    model.generate(**inputs)

The cell runs under :func:`neuronkit.compile_budget`; over budget it raises
``CompileBudgetExceeded``, so a notebook run by nbval fails at that cell. Arguments are
``key=value`` pairs: ``max_graphs``, ``max_recompiles``, ``max_graph_breaks``, ``max_failures``,
``max_neff_builds`` (ints; NEFFs neuronx-cc built on Neuron, cache loads free), ``max_compile_s``
(seconds), ``log_path`` (a file); ``None`` leaves a limit off.
"""
from __future__ import annotations

import ast
from typing import Any, Callable

__all__ = ["load_ipython_extension", "parse_budget_args"]

MAGIC = "compile_budget"
_INTS = ("max_graphs", "max_recompiles", "max_graph_breaks", "max_failures", "max_neff_builds")
_PARSERS: dict[str, Callable[[str], Any]] = {**{key: int for key in _INTS},
                                             "max_compile_s": float, "log_path": str}


def _usage_error(message: str) -> Exception:
    from IPython.core.error import UsageError

    return UsageError(f"%%{MAGIC}: {message}. Usage: %%{MAGIC} max_graphs=2 max_recompiles=0 "
                      f"(keys: {', '.join(_PARSERS)})")


def parse_budget_args(line: str) -> dict[str, Any]:
    """The keyword arguments of ``compile_budget`` from ``key=value`` pairs; a bad key, a value
    of the wrong type or a repeated key raises a UsageError."""
    from neuronkit.apps.budget import CompileBudget

    kwargs: dict[str, Any] = {}
    for pair in line.split():
        key, sep, text = pair.partition("=")
        if not sep or not key or not text:
            raise _usage_error(f"expected key=value, got {pair!r}")
        if key not in _PARSERS:
            raise _usage_error(f"unknown key {key!r}")
        if key in kwargs:
            raise _usage_error(f"{key} given twice")
        if text == "None":
            kwargs[key] = None
            continue
        try:
            kwargs[key] = _PARSERS[key](text)
        except ValueError:
            kind = "an int" if key in _INTS else "a number" if key == "max_compile_s" else "a path"
            raise _usage_error(f"{key} must be {kind} or None, got {text!r}") from None
    try:
        CompileBudget(**kwargs)  # the same checks as in Python (negative, not finite)
    except (TypeError, ValueError) as exc:
        raise _usage_error(str(exc)) from None
    return kwargs


def _run_cell(shell: Any, cell: str) -> Any:
    """Run the cell in the user's namespace; the value of a last expression is returned."""
    source = shell.transform_cell(cell)
    cache = getattr(getattr(shell, "compile", None), "cache", None)
    filename = cache(source) if callable(cache) else "<cell>"  # tracebacks show the cell's lines
    tree = ast.parse(source, filename)
    last: ast.Expr | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        tree.body.pop()
    if tree.body:
        exec(compile(tree, filename, "exec"), shell.user_ns)  # the user's own cell
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), filename, "eval"), shell.user_ns)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext neuronkit``: registers ``%%compile_budget`` on this shell."""
    from neuronkit.apps.budget import compile_budget

    def compile_budget_magic(line: str, cell: str) -> Any:
        """``%%compile_budget max_graphs=2``: run the cell under a compile budget."""
        kwargs = parse_budget_args(line)
        with compile_budget(**kwargs):
            return _run_cell(ipython, cell)

    ipython.register_magic_function(compile_budget_magic, magic_kind="cell", magic_name=MAGIC)
