"""The graphs torch holds for a model's decode step, and the limit it allows.

Dynamo keeps at most ``torch._dynamo.config.recompile_limit`` (8) graphs per *code object*, and
transformers routes the decode step of most models through one shared wrapper function (the
events name it ``wrapped_func``): graphs of every model and plan in the process count against
one limit. Past it torch marks the code run-only and runs every new shape eager, silently, until
``torch.compiler.reset()``. ``load_model`` warns when the function is full already; the workloads
fit the limit to a plan (``workloads/recompile_limit.py``); :func:`codes_at_limit` finds every
code that holds the limit's graphs (``nk.compile_budget`` lets them check again, so torch records
its refusal in the block). Reads (and, in :func:`compile_again`, clears) Dynamo's per-code state.
"""
from __future__ import annotations

import sys
import warnings
from types import CodeType
from typing import Any

__all__ = ["RecompileLimitWarning", "codes_at_limit", "compile_again", "decode_code", "held_graphs",
           "location_of", "recompile_limits", "room_left", "warn_if_full"]


class RecompileLimitWarning(UserWarning):
    """The decode function has no room left under torch's recompile limit: new shapes run eager."""


def decode_code(model: Any) -> CodeType | None:
    """The code object Dynamo compiles for ``model``'s decode step: its outermost ``forward``
    (often transformers' shared ``wrapped_func``)."""
    forward = getattr(model, "forward", None)
    return getattr(getattr(forward, "__func__", forward), "__code__", None)


def held_graphs(code: CodeType | None) -> int:
    """Graphs Dynamo holds for ``code`` now (0 when unknown)."""
    if code is None:
        return 0
    try:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

        return len(_debug_get_cache_entry_list(code))
    except Exception:  # torch moved it: the limit is then sized to the plan alone
        return 0


def recompile_limits() -> tuple[int, int]:
    import torch._dynamo

    config = torch._dynamo.config
    return int(config.recompile_limit), int(config.accumulated_recompile_limit)


def room_left(model: Any) -> tuple[int, int, str]:
    """``(held, limit, function)``: graphs the model's decode function holds, the limit, its name."""
    code = decode_code(model)
    return held_graphs(code), recompile_limits()[0], code.co_name if code else "?"


def location_of(code: CodeType | None) -> str:
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""


def compile_again(code: CodeType) -> bool:
    """Undo torch's run-only mark on ``code`` (set when it hit the limit); False where this torch
    has no such switch."""
    try:
        from torch._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
    except ImportError:
        return False
    set_code_exec_strategy(code, FrameExecStrategy(FrameAction.DEFAULT, FrameAction.DEFAULT))
    return True


def codes_at_limit() -> list[CodeType]:
    """The codes Dynamo compiled that hold as many graphs as its limits allow: run-only since
    their limit hit (torch keeps no list of those), so a new shape runs eager with no record.
    Letting one compile again (:func:`compile_again`) changes nothing but that record: torch
    checks the limit at its next new shape, refuses it again and says so."""
    if "torch._dynamo.convert_frame" not in sys.modules:  # nothing compiled in this process
        return []
    try:
        from torch._dynamo.convert_frame import input_codes
    except ImportError:
        return []
    limit = min(recompile_limits())
    codes = (ref() for ref in list(input_codes.seen))
    return [code for code in codes if code is not None and held_graphs(code) >= limit]


def warn_if_full(model: Any) -> None:
    """Warn when the model's decode function already holds as many graphs as torch allows (it is
    shared: transformers routes most models' decode step through one wrapper)."""
    held, limit, function = room_left(model)
    if held >= limit:
        warnings.warn(f"{type(model).__name__}'s decode function {function} already holds {held} "
                      f"graphs (torch._dynamo.config.recompile_limit = {limit}), shared with the "
                      f"models loaded before: a compiled model.generate would run every new shape "
                      f"eager. nk.generate raises the limit for its calls; elsewhere raise "
                      f"torch._dynamo.config.recompile_limit or call torch.compiler.reset()",
                      RecompileLimitWarning, stacklevel=3)
