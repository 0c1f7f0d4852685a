"""A contract fake of native torch-neuronx ("TorchNeuron") for tests without Trainium.

Every faked name was checked against the public snapshot ``parmoham-aws/test-repo-parmoham``
at 98154b86 (see each module's docstring for the source paths). Use::

    from neuron_fake import installed_fake   # tests/ is on sys.path under pytest

    with installed_fake(device_count=2, metrics_enabled=True) as fake:
        fn = torch.compile(f, backend="neuron", dynamic=False)
        fn(x)
        fake.module.get_dynamo_metrics()   # synchronizes first, as the real one does

Across processes (warm up in one, serve in another): ``installed_fake(use_disk=True)`` keeps the
persistent cache as files under ``$TORCH_NEURONX_NEFF_CACHE_DIR``, as the source does
(``<k[0:2]>/<k[2:4]>/<k>.neff``, ``PersistentCacheBackend.cpp:22-28,61-65``), and decides a disk hit
from the file alone (present with size > 0, ``:91-94``), so a new process with a copied folder finds
every NEFF. The keys are deterministic: the graph key hashes the FX code and input specs, the
persistent key (in-memory key + IR) is XXH3-128 or, without ``xxhash``, blake2b-128 (``keys.py``).
Without ``use_disk`` the "disk" is a dict of the one fake. Nothing was extended for this.

Disagreements between ``shared/notes/neuron-native.md`` and the source (the source wins):

- ``_get_compilation_cache_stats()["total_compilation_time_ms"]`` is the ``CompilationTime``
  accumulator divided by 1000 (``NeuronBindings.cpp:1084-1085``, commented "µs to ms"), but the
  samples are ns (``NeuronMetrics.h:299-308``), so the value is really in µs. Reproduced.
- ``torch_neuronx.metrics.get_compilation_metrics()`` gives metrics as
  ``{accumulator, total_samples, formatted}`` (not ``repr``) (``tn/metrics.py:125-140``).
- The Python (sync-mode) writer's temp files are ``tmpXXXXXXXX.tmp`` in ``<h>/``
  (``NamedTemporaryFile(suffix=".tmp")``, ``kernels/cache_utils.py:28-38``), not ``.tmp.XXXXXX``,
  which is the C++ writer's name.
- ``torch.neuron.is_bf16_supported()`` returns True unconditionally (``tn/neuron.py:443-447``).
- ``torch.neuron.set_device`` takes an int or ``torch.device``; a string such as ``"neuron:1"``
  fails (``tn/neuron.py:22-33``; ``tn/__init__.py:196-206`` raises ``ValueError`` out of range).
- ``get_dynamo_metrics()`` returns ``NeuronCompilationMetrics`` dataclass objects, not dicts
  (``ndb/metrics.py:153-177,217-227``).
- ``__version__`` is ``"0.1.0"`` in the snapshot (``tn/__init__.py:1``).

The ``fake_neuron`` fixture (``tests/conftest.py``) installs this fake; it replaced an older
hand-made ``FakeNeuron`` that accepted ``"neuron:1"``, fed dicts and never synchronized.
"""
from __future__ import annotations

from . import keys
from .arena import MetricsArena, fmt_bytes, fmt_time, fmt_value
from .disk_cache import NativeCacheWriter, cache_dirs, native_key, python_key
from .dynamo import LazyTimingList, NeuronCompilationMetrics
from .install import installed_fake, make_fake
from .modules import FakeTorchNeuronx
from .runtime import OUTCOMES, CompilePlan, SyncCall

__all__ = ["OUTCOMES", "CompilePlan", "FakeTorchNeuronx", "LazyTimingList", "MetricsArena",
           "NativeCacheWriter", "NeuronCompilationMetrics", "SyncCall", "cache_dirs", "fmt_bytes",
           "fmt_time", "fmt_value", "installed_fake", "keys", "make_fake", "native_key",
           "python_key"]
