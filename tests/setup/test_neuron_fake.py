"""The contract of the torch-neuronx fake in tests/neuron_fake (checked against the real source)."""
from __future__ import annotations

import re
import sys
import threading
import time

import pytest
import torch

from neuron_fake import NativeCacheWriter, NeuronCompilationMetrics, installed_fake, keys

GRAPH_EXT = "_trn2_2_O2_--model-type_transformer_--auto-cast-none"
EAGER_EXT = "_trn2_2_O1_--model-type_transformer_--auto-cast-none"


def test_install_is_complete_and_leaves_no_trace(clean_env):
    from torch._dynamo.backends import registry

    import neuronkit as nk

    before = set(sys.modules)
    with installed_fake(device_count=3) as fake:
        import torch_neuronx

        assert torch_neuronx is fake.module and torch.neuron is fake.neuron
        assert sys.modules["torch.neuron"] is fake.neuron
        assert (torch.neuron.is_available(), torch.neuron.device_count()) == (True, 3)
        assert "neuron" in torch.compiler.list_backends(exclude_tags=())
        assert not hasattr(torch_neuronx, "metrics")  # tn/__init__.py does not import it
        import torch_neuronx.metrics as met

        assert torch_neuronx.metrics is met and met.is_enabled() is False
        report = nk.detect()
        assert (report.device, report.device_count) == ("neuron", 3)
        assert report.compile_backend == "neuron"
        assert report.versions["torch-neuronx"] == "0.1.0"
        torch.neuron.set_device(torch.device("cpu", 2))  # an int or a torch.device with an index
        assert torch.neuron.current_device() == 2
        with pytest.raises(ValueError, match="Invalid device id"):
            torch.neuron.set_device(3)
        fake.count = 0
        assert torch.neuron.is_available() is False
    added = set(sys.modules) - before
    assert not {n for n in added if n.startswith(("torch_neuronx", "torch.neuron"))}
    assert "torch_neuronx" not in sys.modules and not hasattr(torch, "neuron")
    assert "neuron" not in registry._BACKENDS and "neuron" not in registry._COMPILER_FNS
    assert "torch_neuronx_compile" not in torch._dynamo.utils.compilation_time_metrics
    with installed_fake():  # a second install registers again: no "duplicate name"
        assert "neuron" in registry._BACKENDS


def test_neff_compile_time_exists_only_after_synchronize(clean_env):
    with installed_fake(build_type="DEV", metrics_enabled=True) as fake:
        C = fake.C
        fake.plan("compiled", duration_s=1.25)
        submitted = time.monotonic_ns()
        key = C.compile_graph("ab" * 32, b"module {}", False)
        assert key == "ab" * 32 + GRAPH_EXT
        assert fake.pending == 1
        assert C._get_compilation_cache_entries() == [] and C._get_all_cache_keys() == set()
        assert C._neuron_metric_data("CompilationCache.CompilationTime") is None
        fake.module.synchronize()
        assert fake.pending == 0
        (entry,) = C._get_compilation_cache_entries()
        assert entry == {"cache_key": key, "neff_size_bytes": 1024, "access_count": 0,
                         "compilation_time_ms": 1250}
        data = C._neuron_metric_data("CompilationCache.CompilationTime")
        assert data["total_samples"] == 1 and data["accumulator"] == 1.25e9
        (sample,) = data["samples"]
        assert sample["value"] == 1.25e9
        assert sample["timestamp_ns"] - sample["value"] >= submitted  # stamped at the end
        stats = C._get_compilation_cache_stats()
        assert stats["total_compilations"] == 1 and stats["total_entries"] == 1
        assert stats["total_compilation_time_ms"] == 1.25e6  # the source's ns/1000 (really µs)


def test_synchronize_reraises_and_clears_the_first_error_once(clean_env):
    with installed_fake() as fake:
        fake.inject_async_error("first")
        fake.inject_async_error("second")  # only the first pending error is kept
        fake.inject_async_error("other device", device=1)
        with pytest.raises(RuntimeError, match="^first$"):
            torch.neuron.synchronize()
        fake.module.synchronize()  # cleared: nothing left for device 0
        with pytest.raises(RuntimeError, match="other device"):
            fake.module.synchronize("neuron:1")
        fake.module.synchronize(1)
        worker = threading.Thread(target=fake.module.synchronize, name="feeder")
        worker.start()
        worker.join()
        calls = fake.sync_calls
        assert fake.sync_count == 5
        assert [c.raised for c in calls] == ["first", None, "other device", None, None]
        assert [c.device for c in calls] == [0, 0, 1, 1, 0]
        assert calls[0].thread == "MainThread" and calls[-1].thread == "feeder"
        assert calls[0].caller.startswith(f"{__name__}:test_synchronize_reraises")
        assert calls[0].via == calls[1].via == "synchronize"  # torch.neuron / torch_neuronx


def test_get_dynamo_metrics_synchronizes_and_fills_compile_times(clean_env):
    with installed_fake(compile_duration_s=0.5) as fake:
        import torch_neuronx

        fn = torch.compile(lambda x: torch.cos(x) + 1, backend="neuron", dynamic=False)
        fn(torch.ones(2))
        (live,) = fake.dynamo.compilation_metrics
        assert fake.sync_count == 0 and live.torch_neuronx_compile_us == 0
        metrics = torch_neuronx.get_dynamo_metrics()
        assert fake.sync_count == 1 and fake.sync_calls[0].via == "get_dynamo_metrics"
        assert metrics == [live] and metrics[0] is live  # a shallow copy of live objects
        assert live.torch_neuronx_compile_us == 500_000
        assert torch.neuron.get_dynamo_metrics() == [live] and fake.sync_count == 2
        torch._dynamo.utils.compile_times()  # the LazyTimingList synchronizes too
        assert fake.sync_count == 3 and fake.sync_calls[-1].via == "__iter__"


def test_backend_compiles_and_a_new_shape_adds_an_entry(clean_env):
    from torch._dynamo.utils import counters

    with installed_fake(build_type="DEV", compile_duration_s=3.0) as fake:
        import torch_neuronx

        fn = torch.compile(lambda x: torch.sin(x) * 2, backend="neuron", dynamic=False)
        for n in (3, 3, 4):
            x = torch.arange(float(n))
            assert torch.equal(fn(x), torch.sin(x) * 2)
        assert fake.sync_count == 0  # the backend never synchronizes
        assert fake.pending == 5  # 2 compiles + 3 executions, all queued
        assert counters["neuron"]["compiled_graphs"] == 2
        assert "graphs_with_collectives" not in counters["neuron"]
        fake.plan("disk_hit")
        fn(torch.ones(5, 2))
        first, second, third = torch_neuronx.get_dynamo_metrics()
        assert counters["neuron"]["compiled_graphs"] == 3
        assert all(isinstance(m, NeuronCompilationMetrics) for m in (first, second, third))
        assert re.fullmatch(r"model_default_\d+_inference_\d+", first.graph_name)
        assert first.graph_name != second.graph_name  # model_name + get_aot_graph_name()
        assert first.model_name == "model_default" and first.graph_node_count >= 3
        assert re.fullmatch(r"[0-9a-f]{64}" + re.escape(GRAPH_EXT), first.graph_id)
        assert first.graph_id != second.graph_id
        assert re.fullmatch(r"\d{8}_\d{6}_\d{6}", first.timestamp)
        assert (first.torch_neuronx_compile_us, second.torch_neuronx_compile_us,
                third.torch_neuronx_compile_us) == (3_000_000, 3_000_000, 0)  # 0: disk hit
        entries = {e["cache_key"]: e for e in torch_neuronx._C._get_compilation_cache_entries()}
        assert entries[first.graph_id]["access_count"] == 2  # each execution is a memory hit
        torch_neuronx.reset_dynamo_metrics()
        assert torch_neuronx.get_dynamo_metrics() == [] and not counters["neuron"]


def test_memory_hit_repeats_the_original_time_and_failures_cache_nothing(clean_env):
    with installed_fake(build_type="DEV", metrics_enabled=True) as fake:
        C = fake.C
        fake.plan("memory_hit", duration_s=7.0)  # compiled earlier in this process
        key = C.compile_graph("cd" * 32, b"ir", False)
        fake.plan("failed", error="neuronx-cc exit 70")
        bad = C.compile_graph("ef" * 32, b"ir", False)
        fake.advance_worker()  # the worker got there before any sync
        assert fake.pending == 0
        assert {e["cache_key"]: e["compilation_time_ms"]
                for e in C._get_compilation_cache_entries()} == {key: 7000}
        assert C._neuron_counter_value("CompilationCache.InMemoryHits") == 1
        assert C._neuron_counter_value("CompilationCache.TotalCompilations") is None
        with pytest.raises(RuntimeError, match=f"{bad}.*neuronx-cc exit 70"):
            fake.module.synchronize()


def test_eager_ops_add_cache_keys_in_the_real_format(clean_env, monkeypatch):
    a, b = torch.ones(2, 3), torch.ones(2, 3)
    assert keys.eager_python_key("aten::add.Tensor", a, b, kwargs={"alpha": 1}) == \
        "aten::add.Tensor_t0_(2, 3)_torch.float32_t1_(2, 3)_torch.float32_alpha_int"
    with installed_fake(build_type="DEV", metrics_enabled=True) as fake:
        C = fake.C
        key = fake.run_eager_op("aten::mul.Tensor", a, 2.0)
        assert key == "aten::mul.Tensor_t0_(2, 3)_torch.float32_s1_float" + EAGER_EXT
        assert C._get_all_cache_keys() == set()  # still queued on the worker
        fake.module.synchronize()
        assert C._get_all_cache_keys() == {key}
        fake.run_eager_op("aten::mul.Tensor", a, 3.0)  # same key: a memory hit
        monkeypatch.setenv("NEURON_CC_FLAGS", "--verbose=info")
        other = fake.run_eager_op("aten::mul.Tensor", torch.ones(4), 2.0)
        assert other.endswith("_O1_--model-type_transformer_--auto-cast-none_--verbose-info")
        torch.neuron.synchronize()
        assert C._get_all_cache_keys() == {key, other}
        assert C._neuron_counter_value("CompilationCache.InMemoryHits") == 1
        assert C._neuron_counter_value("CompilationCache.TotalCompilations") == 2
        assert fake.module.get_executed_ops() == ["aten::mul.Tensor"]
    with installed_fake(build_type="DEV", launch_blocking=True) as fake:  # sync mode: the Python path only
        fake.run_eager_op("aten::mul.Tensor", a, 2.0)
        assert fake.C._get_all_cache_keys() == set() and len(fake.python_cache) == 1


def test_metrics_module_follows_the_env_flag_and_keeps_names(clean_env, monkeypatch):
    with installed_fake(build_type="DEV") as fake:
        import torch_neuronx.metrics as met

        fake.run_eager_op("aten::relu", torch.ones(2))
        fake.module.synchronize()
        assert met.is_enabled() is False and met.get_counter_names() == []
    monkeypatch.setenv("TORCH_NEURONX_METRICS_ENABLED", "yes")
    with installed_fake(build_type="DEV", compile_duration_s=0.25) as fake:
        import torch_neuronx.metrics as met

        fake.run_eager_op("aten::relu", torch.ones(2))
        fake.module.synchronize()
        assert met.is_enabled() is True
        assert met.get_counter_value("CompilationCache.TotalCompilations") == 1
        assert met.get_metric_names() == ["CompilationCache.CompilationTime",
                                          "CompilationCache.NeffSize"]
        data = met.get_metric_data("CompilationCache.CompilationTime")
        assert data["repr"] == "250ms000.000us" and data["samples"][0]["value"] == 2.5e8
        assert "Counter: CompilationCache.TotalCompilations\n  Value: 1\n" in met.report()
        assert met.get_compilation_metrics()["CompilationCache.CompilationTime"]["formatted"] == \
            "250ms000.000us"
        met.clear_all()
        assert met.get_counter_value("CompilationCache.TotalCompilations") == 0  # still listed
        assert met.report() == "=== Neuron Metrics Report ===\n"


def test_disk_cache_writer_makes_both_layouts(tmp_path):
    writer = NativeCacheWriter.under(tmp_path)
    assert writer.env() == {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "neff_cache"),
                            "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": str(tmp_path / "local_cache")}
    assert NativeCacheWriter.from_env(writer.env()) == writer
    assert NativeCacheWriter.from_env({"TORCH_NEURONX_NEFF_CACHE_DIR": ""}).cache_dir.as_posix() \
        == "/tmp/neff_cache"  # an empty value means the default on the C++ side
    now = time.time()
    made = writer.populate(now)
    rel = lambda p: p.relative_to(writer.cache_dir).as_posix()  # noqa: E731
    for path in made["native"] + made["zero"]:
        assert re.fullmatch(r"([0-9a-f]{2})/([0-9a-f]{2})/\1\2[0-9a-f]{28}\.neff", rel(path))
    for path in made["python"]:
        assert re.fullmatch(r"([0-9a-f]{64})/\1\.neff", rel(path))
    assert made["zero"][0].stat().st_size == 0 and made["native"][1].stat().st_size == 2048
    native_tmp, python_tmp = made["tmp"]
    assert re.fullmatch(r"\.tmp\.[0-9a-f]{6}", native_tmp.name)
    assert re.fullmatch(r"tmp[0-9a-f]{8}\.tmp", python_tmp.name)
    locks = [p.relative_to(writer.local_cache_dir).as_posix() for p in made["locks"]]
    assert sum(bool(re.fullmatch(r"locks/[0-9a-f]{32}\.lock", p)) for p in locks) == 4
    assert sum(bool(re.fullmatch(r"[0-9a-f]{64}/locks/compile\.lock", p)) for p in locks) == 2
    assert abs(made["locks"][0].stat().st_mtime - (now - 3600)) < 1


def test_fake_runtime_writes_and_clears_the_native_layout(tmp_path, clean_env, monkeypatch):
    writer = NativeCacheWriter.under(tmp_path)
    for name, value in writer.env().items():
        monkeypatch.setenv(name, value)
    with installed_fake(use_disk=True, metrics_enabled=True) as fake:
        key = fake.C.compile_graph("01" * 32, b"ir", False)
        fake.module.synchronize()
        pkey = fake.C.get_neff_info(key)[0]
        assert writer.neff_path(pkey).is_file()
        assert (writer.local_cache_dir / "locks" / f"{pkey}.lock").is_file()
        fake.C._clear_compilation_memory_cache()
        fake.C.compile_graph("01" * 32, b"ir", False)  # same graph: now found on disk
        fake.module.synchronize()
        assert fake.C._get_compilation_cache_entries()[0]["compilation_time_ms"] == 0
        assert fake.C._get_compilation_cache_stats()["persistent_hits"] == 1
        fake.C._clear_compilation_cache()  # ⚠ also deletes every *.neff on disk
        assert not list(writer.cache_dir.rglob("*.neff"))
