"""The fake native runtime: one FIFO compile worker, the C++ ``CompilationCache``, streams' errors.

Checked against (snapshot 98154b86): ``csrc/core/compilation/CompilationCache.cpp`` (lookup order
memory -> disk -> lock -> compile, counters, ``compilation_time`` in ms, 0 for a disk hit,
nothing cached on failure), ``csrc/core/OperationExecutionEngine.cpp`` (one FIFO worker),
``csrc/c10/neuron/NeuronStream.cpp:251-299`` (``synchronize`` of one device; launch-blocking
waits on submit), ``csrc/core/streams/StreamImpl.cpp:133-155`` and
``csrc/core/utils/ErrorHandler.cpp:361-371`` (first error kept, raised and cleared by sync),
``csrc/core/utils/ErrorRecovery.cpp`` (CPU fallback of failed eager ops, on by default).

Simplification: the worker runs when ``synchronize()`` or ``advance_worker()`` (the real worker
getting ahead without a sync) drains the FIFO queue. Compile time is virtual: a compile starts
at ``max(submit, previous end)``, its ``CompilationTime`` sample stamped at its virtual end
(``time.monotonic_ns`` clock); ``real_sleep=True`` makes ``synchronize`` wait until that end really passed.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import keys
from .arena import MetricsArena, fmt_bytes, fmt_time
from .sync_calls import SyncCall, sync_record

OUTCOMES = ("compiled", "disk_hit", "memory_hit", "failed")
ENTRY_OVERHEAD = 128  # stands in for sizeof(CacheEntry) in CalculateMemoryUsage
C = "CompilationCache."
_HERE = str(Path(__file__).resolve().parent)


@dataclass
class CompilePlan:
    """How the next compile turns out; used only when the key is not in memory.

    ``memory_hit`` for a new key seeds an entry "compiled earlier" with ``duration_s``;
    ``disk_hit`` puts the NEFF on disk first (a compile when the persistent cache is disabled);
    ``failed`` caches nothing and raises at the next sync (eager ops fall back to CPU instead).
    ``wait_s`` with ``disk_hit``: another process held the key's lock (``CompilationCache.cpp``
    505-594: memory, disk, ``flock``, disk again) and built it first; the worker waits that long,
    then stores the NEFF with 0 ms like any disk hit, so nothing but wall time shows the wait.
    """

    outcome: str = "compiled"
    duration_s: float = 2.0
    error: str = "neuronx-cc failed (fake)"
    wait_s: float = 0.0

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")


@dataclass
class CacheEntry:
    neff: bytes
    persistent_key: str
    compilation_time_ms: int
    access_count: int = 0
    last_used: int = 0


@dataclass
class Task:
    kind: str  # "eager" | "graph" | "execute"
    key: str
    op_name: str
    device: int
    submit_ns: int
    ir: bytes = b""
    plan: CompilePlan | None = None


@dataclass
class Runtime:
    """State of one fake torch-neuronx process. ``count``/``bf16``/``current`` as in conftest."""

    count: int = 2
    bf16: bool = True
    current: int = 0
    instance_type: str = "trn2"
    compile_duration_s: float = 2.0
    compile_outcome: str = "compiled"
    neff_size: int = 1024
    launch_blocking: bool = False
    fallback_enabled: bool = True
    persistent_enabled: bool = True
    cache_dir: Path | None = None  # real files only when set (``use_disk``)
    local_cache_dir: Path | None = None
    real_sleep: bool = False
    max_cache_entries: int = 0
    max_cache_size_bytes: int = 0
    arena: MetricsArena = field(default_factory=MetricsArena)
    entries: dict[str, CacheEntry] = field(default_factory=dict)
    disk: dict[str, bytes] = field(default_factory=dict)  # persistent cache, by persistent key
    python_cache: dict[str, bytes] = field(default_factory=dict)  # sync-mode eager NEFFs
    queue: deque[Task] = field(default_factory=deque)
    plans: deque[CompilePlan] = field(default_factory=deque)
    errors: dict[int, BaseException] = field(default_factory=dict)
    sync_calls: list[SyncCall] = field(default_factory=list)
    executed_ops: set[str] = field(default_factory=set)
    fallback_ops: set[str] = field(default_factory=set)
    initialized: bool = False
    use_disk: bool = False
    fixed: dict = field(default_factory=dict)   # cache options a test fixed (manager.py)
    env: object = None                          # the mapping the manager reads (None: os.environ)
    manager_created_by: str | None = None       # the call that created the resource manager
    configured_cache_dir: Path | None = None    # the NEFF cache folder the manager read
    python_builds: list[str] = field(default_factory=list)  # sync-mode eager neuronx-cc runs
    worker: Any = None                          # a WorkerThread (make_fake(threaded=True))
    _worker_free_ns: int = 0
    _tick: int = 0
    _lock: threading.RLock = field(default_factory=threading.RLock)

    # ------------------------------------------------------------------ planning
    def plan(self, outcome: str = "compiled", duration_s: float | None = None,
             error: str = "neuronx-cc failed (fake)", wait_s: float = 0.0) -> CompilePlan:
        """Queue how the next submitted compile (eager or graph) turns out."""
        plan = CompilePlan(outcome, self.compile_duration_s if duration_s is None else duration_s,
                           error, wait_s)
        self.plans.append(plan)
        return plan

    def _next_plan(self) -> CompilePlan:
        return self.plans.popleft() if self.plans else CompilePlan(self.compile_outcome,
                                                                   self.compile_duration_s)

    # ------------------------------------------------------------------ submission
    def submit_graph(self, base_key: str, ir: bytes, has_collectives: bool = False) -> str:
        """``_C.compile_graph``: queue a compile-only op and return ``base + "_" + ext``."""
        key = keys.final_key(base_key, self.instance_type, keys.GRAPH_OPT)
        self._submit(Task("graph", key, "torch_compile", self.current, time.monotonic_ns(),
                          bytes(ir), self._next_plan()))
        return key

    def submit_execute(self, graph_name: str, key: str) -> None:
        """``_C.execute_compiled_graph``: a lookup that must hit (``NeffDirectKernelExecution``)."""
        self._submit(Task("execute", key, graph_name, self.current, time.monotonic_ns()))

    def submit_eager(self, op_name: str, python_key: str, ir: bytes) -> str:
        """``_C._submit_xla_task_to_pipeline``: queue an eager op; returns its C++ key."""
        key = keys.final_key(python_key, self.instance_type, keys.EAGER_OPT)
        self._submit(Task("eager", key, op_name, self.current, time.monotonic_ns(), bytes(ir),
                          self._next_plan()))
        return key

    def manager(self, by: str) -> None:
        """``NeuronResourceManager::Instance()``: the first call creates it (manager.py)."""
        if self.manager_created_by is None:
            from .manager import configure_cache

            self.manager_created_by = by
            configure_cache(self, self.env)  # type: ignore[arg-type]

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.stop()

    def _submit(self, task: Task) -> None:
        self.manager(f"submit {task.kind}")
        with self._lock:
            self.queue.append(task)
            if self.worker is not None:  # worker.py: the thread takes it when it can
                self.worker.kick()
            if self.launch_blocking:  # SubmitOperationContext waits, raises, keeps the error
                error = self._drain(len(self.queue), collect=True)
                if error:
                    raise RuntimeError(error)

    # ------------------------------------------------------------------ worker
    def advance_worker(self, n: int | None = None) -> int:
        """Let the worker finish ``n`` (default: all) queued ops without a sync; returns n."""
        with self._lock:
            n = len(self.queue) if n is None else min(n, len(self.queue))
            self._drain(n)
            return n

    def _drain(self, n: int, collect: bool = False) -> str | None:
        last_error = None
        for _ in range(n):
            task = self.queue.popleft()
            error = self._run_execute(task) if task.kind == "execute" else self._run_compile(task)
            if error:
                last_error = error
                self._record_error(task.device, RuntimeError(error))
        return last_error if collect else None

    def _hit_memory(self, key: str) -> bool:
        entry = self.entries.get(key)
        if entry is not None:
            self.arena.counter(C + "InMemoryHits")
            entry.access_count += 1
            self._tick += 1
            entry.last_used = self._tick
            return True
        self.arena.counter(C + "InMemoryMisses")
        return False

    def _run_compile(self, task: Task) -> str | None:
        plan = task.plan or CompilePlan()
        duration_ns = int(plan.duration_s * 1e9)
        pkey = keys.persistent_key(task.key, task.ir)
        if plan.outcome == "memory_hit" and task.key not in self.entries:  # compiled earlier
            self._store(task.key, pkey, self._neff(task.key), duration_ns // 1_000_000)
        if self._hit_memory(task.key):
            return self._ran(task)
        if self.persistent_enabled:
            if plan.outcome == "disk_hit" and self._disk_get(pkey) is None:
                self._disk_put(pkey, self._neff(task.key))  # as written by another process
            if plan.wait_s:  # another process builds it: a miss, the lock, then its file
                self.arena.counter(C + "PersistentMisses")   # CompilationCache.cpp:211-222
                start = max(task.submit_ns, self._worker_free_ns)
                self._worker_free_ns = start + int(plan.wait_s * 1e9)
                self._touch_lock(pkey)                        # :517-553, hit after the lock
            neff = self._disk_get(pkey)
            if neff is not None:
                self.arena.counter(C + "PersistentHits")
                self._store(task.key, pkey, neff, 0)
                return self._ran(task)
            self.arena.counter(C + "PersistentMisses")
        self._touch_lock(pkey)
        start = max(task.submit_ns, self._worker_free_ns)
        end = start + duration_ns
        self._worker_free_ns = end
        if plan.outcome == "failed":  # nothing cached, no counters; eager ops may fall back
            if task.kind == "eager" and self.fallback_enabled:
                self.fallback_ops.add(task.op_name)
                return None
            return f"Compilation failed for cache key '{task.key}': {plan.error}"
        neff = self._neff(task.key)
        self.arena.counter(C + "TotalCompilations")
        self.arena.metric(C + "NeffSize", len(neff), fmt_bytes, timestamp_ns=end)
        self.arena.metric(C + "CompilationTime", duration_ns, fmt_time, timestamp_ns=end)
        self._store(task.key, pkey, neff, duration_ns // 1_000_000)
        if self.persistent_enabled:
            self._disk_put(pkey, neff)
        return self._ran(task)

    def _ran(self, task: Task) -> None:
        if task.kind == "eager":  # NeuronOpTracking: a de-duplicated set of op names
            self.executed_ops.add(task.op_name)

    def _run_execute(self, task: Task) -> str | None:
        if self._hit_memory(task.key):
            return None
        if self.persistent_enabled:
            self.arena.counter(C + "PersistentMisses")
        return (f"Compilation failed for cache key '{task.key}': "
                "NeffDirectKernelExecution expects pre-compiled graphs.")

    def _store(self, key: str, pkey: str, neff: bytes, ms: int) -> None:
        self._tick += 1
        self.entries[key] = CacheEntry(neff, pkey, int(ms), last_used=self._tick)
        self._evict_if_needed()

    def _evict_if_needed(self) -> None:
        """``CheckAndEvictIfNeeded``: LRU down to the entry limit / 80 % of the size limit."""
        usage, count = self.memory_usage(), len(self.entries)
        over_mem = self.max_cache_size_bytes > 0 and usage >= self.max_cache_size_bytes
        over_count = self.max_cache_entries > 0 and count >= self.max_cache_entries
        if not (over_mem or over_count):
            return
        target = count
        if over_mem and count:
            avg = usage // count
            if avg:
                target = max(0, count - -(-(usage - int(self.max_cache_size_bytes * 0.8)) // avg))
        if over_count:
            target = min(target, self.max_cache_entries)
        victims = sorted(self.entries, key=lambda k: self.entries[k].last_used)[:count - target]
        for key in victims:
            del self.entries[key]
        if victims:
            self.arena.counter(C + "Evictions", len(victims))

    def _neff(self, key: str) -> bytes:
        head = b"NEFF" + keys.persistent_key(key, b"neff").encode()
        return (head * (self.neff_size // len(head) + 1))[: max(self.neff_size, 1)]

    # ------------------------------------------------------------------ persistent cache
    def neff_path(self, pkey: str) -> Path | None:
        """``GetShardedPath``: ``<dir>/<k[0:2]>/<k[2:4]>/<k>.neff`` (None without ``use_disk``)."""
        if self.cache_dir is None:
            return None
        return self.cache_dir / pkey[:2] / pkey[2:4] / f"{pkey}.neff"

    def _disk_get(self, pkey: str) -> bytes | None:
        path = self.neff_path(pkey)
        if path is None:
            return self.disk.get(pkey) or None
        return path.read_bytes() or None if path.is_file() else None  # size <= 0: a miss

    def _disk_put(self, pkey: str, neff: bytes) -> bool:
        self.disk[pkey] = neff
        path = self.neff_path(pkey)
        if path is not None:
            from .disk_cache import atomic_write

            atomic_write(path, neff)
        return True

    def _touch_lock(self, pkey: str) -> None:
        if self.local_cache_dir is not None:  # flock files are left behind after use
            lock = self.local_cache_dir / "locks" / f"{pkey}.lock"
            lock.parent.mkdir(parents=True, exist_ok=True)
            lock.touch()

    def clear_memory_cache(self) -> None:
        """``ClearInMemoryCache``: entries and the in-memory counters."""
        self.manager("clear memory cache")
        with self._lock:
            self.entries.clear()
            for name in ("InMemoryHits", "InMemoryMisses", "Evictions"):
                self.arena.clear_counter(C + name)
            self.arena.clear_metric(C + "MemoryUsage")

    def clear_cache(self) -> None:
        """``CompilationCache::Clear``: memory, every ``*.neff`` on disk, and the totals."""
        self.manager("clear cache")
        with self._lock:
            self.clear_memory_cache()
            if self.persistent_enabled:
                self.disk.clear()
                if self.cache_dir is not None:
                    from .disk_cache import clear_neffs

                    clear_neffs(self.cache_dir)
                self.arena.clear_counter(C + "PersistentHits")
                self.arena.clear_counter(C + "PersistentMisses")
            self.arena.clear_counter(C + "TotalCompilations")
            self.arena.clear_metric(C + "CompilationTime")

    def memory_usage(self) -> int:
        return sum(len(e.neff) + ENTRY_OVERHEAD + len(k) for k, e in self.entries.items())

    # ------------------------------------------------------------------ errors and sync
    def inject_async_error(self, error: str | BaseException = "Async execution error (fake)",
                           device: int | None = None) -> None:
        """Record an async error as a failed op would; only the first per device is kept."""
        exc = RuntimeError(error) if isinstance(error, str) else error
        self._record_error(self.current if device is None else device, exc)

    def _record_error(self, device: int, exc: BaseException) -> None:
        with self._lock:
            self.errors.setdefault(device, exc)

    def synchronize(self, device_index: int = -1) -> None:
        """``at::neuron::synchronize``: finish the device's queued ops, then raise-and-clear."""
        device = self.current if device_index < 0 else device_index
        call = self._sync_record(device)
        with self._lock:
            last = max((i for i, t in enumerate(self.queue) if t.device == device), default=-1)
            self._drain(last + 1)
            if self.real_sleep and self._worker_free_ns > time.monotonic_ns():
                time.sleep((self._worker_free_ns - time.monotonic_ns()) / 1e9)
            exc = self.errors.pop(device, None)
        if exc is not None:
            call.raised = str(exc)
            raise exc

    def _sync_record(self, device: int) -> SyncCall:
        return sync_record(self.sync_calls, self.queue, device)

    @property
    def sync_count(self) -> int:
        return len(self.sync_calls)

    @property
    def pending(self) -> int:
        return len(self.queue)
