"""torch's recompile limit, sized to what a generate plan needs.

The limit counts graphs per code object, and most models share one decode function
(``setup/decode_graphs.py`` reads what it holds); past the limit torch runs every new shape
eager, silently, until ``torch.compiler.reset()``; raising the limit afterwards does not undo that.

:func:`fitted_limit` raises the limit for one ``nk.generate`` call to the graphs the code holds
already plus the graphs the call plans (scoped, restored afterwards, never lowered), and lets a
run-only code compile again. :class:`DecodeLedger` remembers which batch shapes compiled, per
phase (a compiled prefill shares the decode step's code object), so every forward call that ran
eager is counted exactly, the prefill's apart from the decode's (:class:`EagerTally`).
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import asdict, dataclass
from types import CodeType
from typing import Any, Iterator

from neuronkit.setup.decode_graphs import (
    RecompileLimitWarning,
    compile_again,
    decode_code,
    held_graphs,
    location_of,
    recompile_limits,
    room_left,
)

__all__ = ["LEDGER", "PHASES", "DecodeLedger", "EagerTally", "LimitFit", "call_limit", "eager_name",
           "eager_phrase", "fitted_limit", "record_eager_batch", "warn_if_no_room"]

PHASES = ("prefill", "decode")   # a batch's forward calls, in the order they run


@dataclass
class LimitFit:
    """What :func:`fitted_limit` did for one call."""

    function: str          # the decode code object's name
    location: str          # its file:line, as compile events give it
    held: int              # graphs it held before the call (other models and plans included)
    planned: int           # graphs the call may add
    limit_before: int      # torch._dynamo.config.recompile_limit outside the call
    limit: int             # the limit during the call (never lower than limit_before)
    reenabled: bool        # the code had no room left (run-only after a hit): compiling again

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        if self.limit == self.limit_before:
            return (f"recompile limit {self.limit} left as it was ({self.function} holds "
                    f"{self.held} graphs, this call plans at most {self.planned})")
        return (f"recompile limit raised {self.limit_before} -> {self.limit} for this call "
                f"({self.function} holds {self.held} graphs, this call plans at most "
                f"{self.planned})")


@contextlib.contextmanager
def fitted_limit(model: Any, planned: int) -> Iterator[LimitFit]:
    """Raise the recompile limits to ``held + planned`` for the block, then restore them."""
    import torch._dynamo

    code = decode_code(model)
    held = held_graphs(code)
    before, accumulated = recompile_limits()
    limit = max(before, held + planned)
    reenable = code is not None and held >= before and limit > held
    if reenable and code is not None:  # run-only since the limit; with room now, compile again
        reenable = compile_again(code)
        LEDGER.hit.discard(code)
    fit = LimitFit(function=code.co_name if code else "?", location=location_of(code),
                   held=held, planned=planned, limit_before=before, limit=limit,
                   reenabled=reenable)
    with torch._dynamo.config.patch(recompile_limit=limit,
                                    accumulated_recompile_limit=max(accumulated, limit)):
        yield fit


class DecodeLedger:
    """Which shapes compiled, per phase, and which decode codes hit the limit (run-only now).

    After a limit hit torch runs new shapes eager without a trace record; a phase of a batch that
    records no compile ran compiled if its shape compiled before, eager if its code hit the limit.
    ``torch.compiler.reset()`` (the code holds no graph at a call's start) forgets both."""

    def __init__(self) -> None:
        self.compiled: dict[CodeType, set[tuple]] = {}   # code -> {(id(model), phase, *batch key)}
        self.hit: set[CodeType] = set()

    def begin(self, model: Any) -> None:
        """At a call's start: forget what a reset wiped."""
        code = decode_code(model)
        if code is not None and held_graphs(code) == 0:
            self.hit.discard(code)
            self.compiled.pop(code, None)

    def ran_eager(self, model: Any, key: tuple, kinds: list[str], phase: str = "decode") -> bool:
        """Whether ``phase`` of the batch of shape ``key`` ran eager, given the kinds of the
        events the decode code recorded for that phase during the batch; remembers the outcome.
        Ask for the phases in the order they ran (a prefill's limit hit leaves its decode eager)."""
        code = decode_code(model)
        if code is None:
            return False
        keys = self.compiled.setdefault(code, set())
        if "limit_hit" in kinds:
            self.hit.add(code)
            return True
        if any(k in ("first", "recompile") for k in kinds):
            keys.add((id(model), phase, *key))
            return False
        return (id(model), phase, *key) not in keys and code in self.hit


LEDGER = DecodeLedger()


@contextlib.contextmanager
def call_limit(model: Any, planned: int, rec: Any, *, fit: bool) -> Iterator[LimitFit | None]:
    """The recompile limit around one ``nk.generate`` call planning ``planned`` graphs (0: not
    compiling, nothing done): :data:`LEDGER` forgets what a reset wiped, and with ``fit`` the
    limit is fitted (:func:`fitted_limit`) and noted on the events ``rec`` records meanwhile."""
    if not planned:
        yield None
        return
    LEDGER.begin(model)
    if not fit:
        yield None
        return
    with fitted_limit(model, planned) as limit, rec.annotate(recompile_limit=limit.to_dict()):
        yield limit


def warn_if_no_room(model: Any, planned: int) -> None:
    """Warn when ``planned`` more graphs would pass the limit (their calls would run eager)."""
    held, limit, function = room_left(model)
    if held + planned > limit:
        warnings.warn(f"{function} (the decode step) holds {held} graphs and this call plans up "
                      f"to {planned} more, over torch._dynamo.config.recompile_limit = {limit}: "
                      f"the rest will run eager. Leave fit_recompile_limit on, or raise the limit",
                      RecompileLimitWarning, stacklevel=3)


def _raw_location(event: Any) -> str:
    """Where torch compiled: the raw frame under a readable name (``metrics["frame"]``)."""
    frame = event.metrics.get("frame") if isinstance(event.metrics, dict) else None
    return str(frame.get("location", event.location)) if isinstance(frame, dict) else event.location


def eager_name(events: list[Any], raw_name: str, where: str) -> tuple[str, str]:
    """The readable name and place of the decode frame at ``where`` (its raw place), as its
    limit hit (else its decode graphs) was named: the eager calls count under that function."""
    named = [e for e in events if _raw_location(e) == where and e.kind != "eager_fallback"]
    if not named:
        return raw_name, where
    best = max(named, key=lambda e: (e.kind == "limit_hit", e.function.endswith("[decode]"), e.seq))
    return best.function, best.location


def eager_phrase(calls: dict[str, int]) -> str:
    """``4 prefill and 12 decode calls``, ``1 decode call``: the calls of each phase, in order."""
    parts = [f"{n} {phase}" for phase, n in sorted(
        calls.items(), key=lambda item: PHASES.index(item[0]) if item[0] in PHASES else 2) if n]
    total = sum(calls.values())
    return " and ".join(parts) + f" call{'' if total == 1 else 's'}" if parts else "0 calls"


def _phase_of(event: Any) -> str | None:
    """The phase a compile event names (``metrics["phase"]``), None where it names none."""
    phase = event.metrics.get("phase") if isinstance(event.metrics, dict) else None
    return phase if isinstance(phase, str) else None


def record_eager_batch(rec: Any, model: Any, seen: int, key: tuple[int, int, int], prefill: bool,
                       steps: int, backend: str | None, started_at: float) -> dict[str, int]:
    """Record each phase of a batch that torch ran uncompiled (past the recompile limit) as an
    ``eager_fallback`` event naming its phase (``rec.events[seen:]`` are the batch's events);
    returns the calls recorded per phase. ``key``: (rows, bucket, cache length); ``prefill``:
    the batch's prefill ran through the compiled forward (one call); ``steps``: its decode calls."""
    code = decode_code(model)
    if code is None:
        return {}
    where = location_of(code)
    batch = [e for e in rec.events[seen:] if _raw_location(e) == where]
    planned = {"prefill": 1 if prefill else 0, "decode": max(steps, 0)}
    ran = {phase: calls for phase, calls in planned.items() if calls and LEDGER.ran_eager(
        model, key, [e.kind for e in batch if _phase_of(e) in (phase, None)], phase)}
    rows, bucket, cache_len = key
    function, location = eager_name(rec.events, code.co_name, where)
    for phase, calls in ran.items():
        rec.record(kind="eager_fallback", function=function, location=location,
                   metrics={"phase": phase, "frame": {"name": code.co_name, "location": where}},
                   backend=backend or "", started_at=started_at, calls=calls,
                   input_shapes={"input_ids": [rows, bucket if phase == "prefill" else 1],
                                 "cache": [rows, cache_len]},
                   changed=f"bucket {bucket}, cache {cache_len}: no {phase} graph",
                   reasons=[f"{eager_phrase({phase: calls})} ran eager: {code.co_name} is past "
                            "torch._dynamo.config.recompile_limit (run-only for new shapes)"])
    return ran


class EagerTally:
    """The forward calls of one ``nk.generate`` call that ran eager past the recompile limit,
    per phase (:func:`record_eager_batch`, batch by batch)."""

    def __init__(self) -> None:
        self.calls = dict.fromkeys(PHASES, 0)

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    @property
    def prefill(self) -> int:
        return self.calls["prefill"]

    def record(self, rec: Any, model: Any, seen: int, key: tuple[int, int, int],
               prefill: bool, steps: int, backend: str | None, started_at: float) -> None:
        """:func:`record_eager_batch`, its calls added to the tally."""
        for phase, n in record_eager_batch(rec, model, seen, key, prefill, steps, backend,
                                           started_at).items():
            self.calls[phase] += n
