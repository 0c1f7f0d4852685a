"""The native Neuron source: NEFF build times and eager-op kernels, read only at safe points.

On native torch-neuronx the ``neuron`` backend only *submits* a graph's neuronx-cc build to one
worker thread; Dynamo's compile ends there and the build's time lands later in
``get_dynamo_metrics()[i].torch_neuronx_compile_us``, whose read calls ``synchronize()`` (it waits
and re-raises the user's first pending async error). So a compile only notes which metric entries
are its own (the counter ``counters["neuron"]["compiled_graphs"]``, no sync); a safe point
(``rec.safe_point()``: ``stop()``, each ``nk.generate`` batch, Trainer logging steps, a dashboard
refresh) resolves them with at most one synchronize, records one ``kernels`` event for the new
eager-op kernels and one ``cpu_fallback`` event for the ops that ran on CPU. Graph keys known
before a recorder starts are memory hits when traced again. Nothing here creates or configures
torch-neuronx (neuron_state.py says when its cache may be read).

Sync mode (``NEURON_LAUNCH_BLOCKING=1``, the RELEASE build's default): the build lies inside
Dynamo's time (``metrics["neff_in_duration"]``), and eager kernels are read from the Python NEFF
dict, built and loaded told apart only as an upper bound. Every private call is guarded: missing
or changed, it degrades to "not available" with one warning.
"""
from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from typing import Any, Callable, Protocol

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.setup.device import loaded_neuronx
from neuronkit.sources import neuron_state as state
from neuronkit.sources.cache_keys import neff_lookup, persistent_reader
from neuronkit.sources.neuron_state import is_graph_key, op_of_key
from neuronkit.sources.sink import say

__all__ = ["NEURON", "NeuronSource", "FALLBACK_FUNCTION", "KERNELS_FUNCTION", "awaits_build",
           "op_of_key", "is_graph_key"]

KERNELS_FUNCTION = "eager kernels"   # the function name of ``kernels`` events
FALLBACK_FUNCTION = "eager ops on CPU"   # the function name of ``cpu_fallback`` events
_BEFORE = (-1, -1)                    # a graph key seen before recording began


class _Settling(Protocol):
    """What a safe point needs of a recorder."""

    @property
    def events(self) -> list[CompileEvent]: ...

    def update(self, seq: int, **fields: Any) -> Any: ...

    def record(self, **fields: Any) -> CompileEvent: ...


def awaits_build(event: CompileEvent) -> bool:
    """Whether the NEFF build of ``event``'s graphs runs after Dynamo returned and is not yet
    resolved (not in sync mode, where the build lies inside Dynamo's time)."""
    return (isinstance(event.metrics.get("neuron_graphs"), list)
            and not event.neff_in_duration
            and event.neff_compile_s is None and event.neff_cache is None)


def _module() -> Any | None:
    """torch_neuronx when already imported (a source never imports it)."""
    return loaded_neuronx()


def _compiled_graphs() -> int | None:
    """torch-neuronx's count of graphs it compiled, without synchronizing; None off Neuron."""
    return None if _module() is None else state.compiled_graphs()


class NeuronSource:
    """Notes each compile's metric entries; resolves them and counts kernels at safe points."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._counted = 0                       # compiled_graphs at the last compile event
        self._entries: list[Any] = []           # get_dynamo_metrics() as of the last sync
        self._first_seen: dict[str, tuple[int, int]] = {}  # graph_id -> (epoch, index) built
        self._epoch = 0                         # bumps when torch-neuronx resets its table
        self._kernel_keys: dict[int, set[str]] = {}   # id(recorder) -> kernel keys it has seen
        self._fallbacks: dict[int, set[str]] = {}     # id(recorder) -> CPU-fallback ops it saw
        self._since: dict[int, float] = {}           # id(recorder) -> its last safe point (wall)
        self._checked = False                   # private names checked (once per process)
        self._warned: set[str] = set()
        self._owner: Any = None                 # the torch_neuronx the state is about
        self.syncs = 0                          # synchronize calls made (tests read it)

    def _same_module(self, module: Any) -> None:
        """Forget everything learnt from another torch_neuronx (a test's fake, a reload)."""
        if module is not self._owner:  # (an id() could be reused by the next fake)
            self._owner = module
            self._counted, self._entries, self._epoch = 0, [], self._epoch + 1
            self._first_seen.clear()
            self._kernel_keys.clear()
            self._fallbacks.clear()
            self._since.clear()
            self._warned.clear()
            self._checked = False

    def begin(self) -> None:
        """Recording starts: graphs compiled before now are nobody's."""
        now = _compiled_graphs()
        if now is not None:
            with self._lock:
                self._same_module(_module())
                self._counted = now

    def baseline(self, recorder: object) -> None:
        """A recorder starts: the graphs and kernels compiled before now are not its own. No
        sync, and nothing that creates torch-neuronx's compilation cache (neuron_state.py):
        while the job has not used it, it holds nothing."""
        module = _module()
        if module is None:
            return
        with self._lock:
            self._same_module(module)
        before = state.graph_keys_before(module)
        kernels: set[str] = set()
        if state.blocking():
            kernels = state.python_kernel_keys() or set()
        elif state.cache_in_use(module):
            kernels = {str(k) for k in self._private(module, "_get_all_cache_keys") or ()}
            if before is None:
                before = {k for k in kernels if is_graph_key(k)}
        with self._lock:
            self._kernel_keys[id(recorder)] = kernels
            self._fallbacks[id(recorder)] = set(self._fallback_ops(module))
            self._since[id(recorder)] = time.time()
            for key in before or ():  # built before recording: traced again, it is a memory hit
                self._first_seen.setdefault(key, _BEFORE)

    # -- during a compile: a dict read, never a sync ------------------------------------------
    def note_compile(self, event: CompileEvent) -> None:
        """Mark which ``get_dynamo_metrics`` entries belong to ``event`` (called by the Dynamo
        tap as the event is assembled)."""
        now = _compiled_graphs()
        if now is None:
            return
        with self._lock:
            self._same_module(_module())
            if now < self._counted:  # reset_dynamo_metrics() cleared the table and counter
                self._counted, self._epoch = 0, self._epoch + 1
                self._entries = []
            lo, self._counted = self._counted, now
        if now > lo:
            event.metrics["neuron_graphs"] = [self._epoch, lo, now]
            keys = state.graph_keys(lo, now)
            if keys:  # the cache keys: ranks sharing a NEFF cache share them (log/rank_logs)
                event.metrics["neff_keys"] = keys
            if state.blocking():
                event.metrics["neff_in_duration"] = True

    # -- at a safe point ----------------------------------------------------------------------
    def settle(self, recorder: _Settling, wait: bool = True) -> None:
        """Resolve ``recorder``'s pending NEFF times (at most one synchronize) and record the
        eager kernels compiled since its last safe point. A user's async error propagates.
        ``wait=False`` (a Trainer step end): synchronize only when a build is pending; the
        kernels then are those the worker has compiled by now (their keys need no sync)."""
        module = _module()
        if module is None:
            return
        with self._lock:
            self._same_module(module)
        pending = [e for e in recorder.events if e.neff_cache is None and e.neff_compile_s is None
                   and isinstance(e.metrics.get("neuron_graphs"), list)]
        # the C++ cache's entries, read at most once per safe point and only if needed
        cache_entries = functools.cache(lambda: self._cache_entries(module))
        if pending:
            entries = self._fetch(module, max(e.metrics["neuron_graphs"][2] for e in pending))
            if entries is not None:
                self._resolve(recorder, pending, entries, cache_entries)
        elif wait:
            self._sync_for_kernels(module)
        self._check_names(recorder)
        self._record_kernels(recorder, module, cache_entries)
        self._record_fallbacks(recorder, module)

    def forget(self, recorder: object) -> None:
        """Drop what a stopped recorder had seen of the kernel cache."""
        with self._lock:
            self._kernel_keys.pop(id(recorder), None)
            self._fallbacks.pop(id(recorder), None)
            self._since.pop(id(recorder), None)

    def _fetch(self, module: Any, needed: int) -> list[Any] | None:
        """The metric entries; calls ``get_dynamo_metrics()`` (one synchronize) only when the
        list read at the last safe point is short of ``needed``. Its synchronize re-raises the
        user's pending async error: that propagates to the caller, as the user's own would."""
        with self._lock:
            if len(self._entries) >= needed:
                return self._entries
            getter = getattr(module, "get_dynamo_metrics", None)
            if getter is None:
                self._warn_once("metrics", "torch_neuronx has no get_dynamo_metrics(): NEFF build "
                                "times are not recorded")
                return None
            self.syncs += 1
            self._entries = list(getter())
            return self._entries

    def _sync_for_kernels(self, module: Any) -> None:
        """One synchronize, so that kernels submitted before the safe point are in the cache."""
        sync = getattr(module, "synchronize", None)
        if sync is not None and self._kernels_readable(module):
            self.syncs += 1
            sync()

    def _resolve(self, recorder: _Settling, pending: list[CompileEvent], entries: list[Any],
                 cache_entries: Callable[[], list[dict[str, Any]] | None]) -> None:
        cache = cache_entries()
        built = None if cache is None else {str(e.get("cache_key", "")) for e in cache}
        persistent = persistent_reader(_module())
        for event in pending:
            epoch, lo, hi = event.metrics["neuron_graphs"]
            if epoch != self._epoch or hi > len(entries):
                continue  # its table was reset before the times were read: unknowable now
            seconds, states, lookups = 0.0, [], []
            for index in range(lo, hi):
                entry = entries[index]
                graph_id = str(getattr(entry, "graph_id", ""))
                if graph_id and not is_graph_key(graph_id):
                    self._warn_once("graph keys", "torch_neuronx's graph cache keys changed form "
                                    f"(e.g. {graph_id[:60]!r}): compiled graphs may be counted "
                                    "as eager kernels")
                us = int(getattr(entry, "torch_neuronx_compile_us", 0) or 0)
                first = self._first_seen.setdefault(graph_id, (epoch, index))
                if first != (epoch, index):
                    states.append("memory_hit")   # the same NEFF again: its time repeats, not cost
                elif us > 0:
                    states.append("compiled")
                    seconds += us / 1e6
                elif built is None or graph_id in built:
                    states.append("disk_hit")     # read from disk: stored with 0 ms
                else:
                    states.append("")             # not built (failed or evicted): unknown
                if graph_id:  # the NEFF key, its file's name and what the key is made of
                    lookups.append(neff_lookup(graph_id, states[-1] or None, persistent))
            state = next((s for s in ("compiled", "disk_hit", "memory_hit") if s in states), None)
            recorder.update(event.seq, neff_compile_s=round(seconds, 6), neff_cache=state,
                            cache_key=[*event.cache_key, *lookups])

    def _cache_entries(self, module: Any) -> list[dict[str, Any]] | None:
        """``_C._get_compilation_cache_entries()`` (in-memory entries, no sync), or None."""
        entries = self._private(module, "_get_compilation_cache_entries")
        return None if entries is None else [e for e in entries if isinstance(e, dict)]

    def _kernels_readable(self, module: Any) -> bool:
        """Async mode, and the job has created the C++ cache (reading it now changes nothing)."""
        if state.blocking() or not state.cache_in_use(module):
            return False
        return self._private_fn(module, "_get_all_cache_keys") is not None

    def _record_kernels(self, recorder: _Settling, module: Any,
                        cache_entries: Callable[[], list[dict[str, Any]] | None]) -> None:
        if state.blocking():
            self._record_python_kernels(recorder, module)
            return
        if not self._kernels_readable(module):
            return
        keys = self._private(module, "_get_all_cache_keys")
        if keys is None:
            return
        with self._lock:
            eager = {str(k) for k in keys
                     if not is_graph_key(str(k)) and str(k) not in self._first_seen}
            seen = self._kernel_keys.setdefault(id(recorder), set())
            new = sorted(eager - seen)
            seen.update(new)
            self._since[id(recorder)] = time.time()
        if not new:
            return
        self._check_op_keys(new)
        times = {str(e.get("cache_key")): float(e.get("compilation_time_ms") or 0.0)
                 for e in cache_entries() or []}
        built = [k for k in new if times.get(k, 0.0) > 0]
        loaded = len(new) - len(built)  # 0 ms: read from the disk cache, or waited for
        how = (f"{len(built)} compiled, {loaded} loaded from the NEFF disk cache or waited for "
               "another process's build (0 ms recorded)" if loaded else "compiled")
        recorder.record(kind="kernels", function=KERNELS_FUNCTION, kernels=len(new),
                        ops=dict(Counter(op_of_key(k) for k in new).most_common()),
                        duration_s=sum(times[k] for k in built) / 1000.0,
                        metrics={"compiled": len(built), "loaded": loaded},
                        reasons=[f"{len(new)} new eager-op kernel(s) since the last safe point: "
                                 f"{how}"])

    def _record_python_kernels(self, recorder: _Settling, module: Any) -> None:
        """Sync mode: the new keys of torch-neuronx's Python NEFF dict. Built or read from the
        disk cache is not told apart per kernel: at most as many were built as NEFF files of
        the Python layout were written to the cache folder since the last safe point."""
        keys = state.python_kernel_keys()
        if keys is None:
            if state.ops_executed(module):
                self._warn_once("python cache", "NEURON_LAUNCH_BLOCKING=1, and this torch_neuronx "
                                "has no python_ops.compilation.cache._GLOBAL_CACHE: eager kernels "
                                "are not recorded")
            return
        now = time.time()
        with self._lock:
            seen = self._kernel_keys.setdefault(id(recorder), set())
            new = sorted(keys - seen)
            seen.update(new)
            since, self._since[id(recorder)] = self._since.get(id(recorder), 0.0), now
        if not new:
            return
        self._check_op_keys(new)
        written = state.python_neffs_written(since)
        built = len(new) if written is None else min(len(new), written)
        how = ("the NEFF disk cache is off, so each was built by neuronx-cc" if written is None
               else f"at most {built} built by neuronx-cc (NEFF files written to the cache folder "
               f"since the last safe point), the rest read from the NEFF disk cache")
        recorder.record(kind="kernels", function=KERNELS_FUNCTION, kernels=len(new),
                        ops=dict(Counter(op_of_key(k) for k in new).most_common()),
                        metrics={"compiled": built, "loaded": len(new) - built,
                                 "sync_mode": True},
                        reasons=[f"{len(new)} new eager-op kernel(s) since the last safe point, "
                                 f"compiled in sync mode (NEURON_LAUNCH_BLOCKING=1): {how}; "
                                 "their build times are not recorded"])

    def _fallback_ops(self, module: Any) -> list[str]:
        """``torch_neuronx.get_fallback_ops()``: the eager ops that fell back to CPU (a set of
        names, no counts, no sync), or [] where missing."""
        getter = getattr(module, "get_fallback_ops", None)
        if getter is None:
            self._warn_once("fallback", "torch_neuronx has no get_fallback_ops(): eager ops that "
                            "fall back to CPU are not recorded")
            return []
        try:
            return sorted(str(op) for op in getter() or ())
        except Exception as exc:
            self._warn_once("fallback", f"torch_neuronx.get_fallback_ops() failed ({exc!r}): eager "
                            "ops that fall back to CPU are not recorded")
            return []

    def _record_fallbacks(self, recorder: _Settling, module: Any) -> None:
        """One ``cpu_fallback`` event for the ops that ran on CPU since the last safe point.
        ``get_fallback_ops()`` names ops without a Neuron kernel (no compile is tried:
        ``csrc/core/NeuronBindings.cpp:232-246,483-484``, ``python_ops/base.py:763-829``) and ops
        whose Neuron compile or run failed (``csrc/core/utils/ErrorRecovery.cpp:40-63``,
        ``CPUFallbackExecutor.cpp:138``), without saying which."""
        ops = self._fallback_ops(module)
        with self._lock:
            seen = self._fallbacks.setdefault(id(recorder), set())
            new = [op for op in ops if op not in seen]
            seen.update(new)
        if new:
            recorder.record(kind="cpu_fallback", function=FALLBACK_FUNCTION,
                            ops=dict.fromkeys(new, 1), reasons=[
                                f"{len(new)} eager op(s) ran on CPU: {', '.join(new)}; each call "
                                "copies their tensors to the host and back (no Neuron kernel "
                                "for the op, or its Neuron compile failed)"])

    def _check_names(self, recorder: _Settling) -> None:
        """Once per process: torch-neuronx's private counter still counts the ``neuron``
        backend's graphs (renamed, NEFF times would vanish without a word)."""
        if self._checked:
            return
        graphs = [e for e in recorder.events if e.kind in GRAPH_KINDS and e.backend == "neuron"]
        if not graphs:
            return
        self._checked = True
        if not any("neuron_graphs" in e.metrics for e in graphs):
            self._warn_once("counter", "torch._dynamo.utils.counters['neuron']['compiled_graphs'] "
                            "did not count the neuron backend's graphs (renamed in this "
                            "torch-neuronx?): NEFF build times and cache states are not recorded")

    def _check_op_keys(self, new: list[str]) -> None:
        """Eager cache keys still start with their op name (``aten::add.Tensor_t0_...``)."""
        if all(op_of_key(k) == "?" for k in new):
            self._warn_once("op keys", "torch_neuronx's eager-op cache keys changed form (e.g. "
                            f"{new[0][:60]!r}): kernels are counted but their ops are not named")

    def _private_fn(self, module: Any, name: str) -> Callable[[], Any] | None:
        """``torch_neuronx._C.<name>``, or None (with one warning) when this version lacks it."""
        fn: Callable[[], Any] | None = getattr(getattr(module, "_C", None), name, None)
        if fn is None:
            self._warn_once(name, f"torch_neuronx._C.{name} is not available in this version: "
                            "eager kernels are not recorded")
        return fn

    def _private(self, module: Any, name: str) -> Any | None:
        """``torch_neuronx._C.<name>()``, or None (with one warning) when missing or failing."""
        fn = self._private_fn(module, name)
        if fn is None:
            return None
        try:
            return fn()
        except Exception as exc:
            self._warn_once(name, f"torch_neuronx._C.{name}() failed ({exc!r}): eager kernels "
                            "are not recorded")
            return None

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            say(f"neuronkit: {message}")


NEURON = NeuronSource()
