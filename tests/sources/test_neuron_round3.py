"""True on Trainium, round 3, through the contract fake (tests/neuron_fake): a recorder creates
nothing in torch-neuronx, sync mode (the RELEASE build's default) is recorded right, CPU fallbacks
are explained as the source says, eager kernel keys name their op."""
from __future__ import annotations

import pytest
import torch

import neuronkit as nk
from neuron_fake import installed_fake
from neuronkit.sources.neuron_state import op_of_key


def compiled(fn=None):
    return torch.compile(fn or (lambda x: (x * 2).sum()), backend="neuron", dynamic=False)


def neff_files(folder):
    return sorted(p.name for p in folder.rglob("*.neff"))


@pytest.mark.parametrize("build_type", ["DEV", "RELEASE"])
def test_a_cache_folder_set_after_recording_began_is_where_the_neffs_go(clean_env, tmp_path,
                                                                        monkeypatch, build_type):
    # neuronkit record starts the recorder right after `import torch`; the job sets its shared
    # cache folder after that. The resource manager reads the folder once, when first created.
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "tmp-default"))
    with installed_fake(use_disk=True, build_type=build_type) as fake:
        with nk.CompileRecorder() as rec:
            assert fake.manager_created_by is None          # the recorder created nothing
            monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "shared"))
            compiled()(torch.ones(3))
            fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))
            rec.safe_point()
    assert fake.manager_created_by == "submit graph"        # the job's own first compile
    assert fake.configured_cache_dir == tmp_path / "shared"
    assert neff_files(tmp_path / "shared") and not neff_files(tmp_path / "tmp-default")
    assert rec.events[0].neff_cache == "compiled"


def test_a_recorder_started_after_the_job_used_the_device_still_baselines(clean_env):
    with installed_fake(build_type="DEV") as fake:
        fake.run_eager_op("aten::mul.Tensor", torch.ones(2), 2.0)
        fake.synchronize()
        with nk.CompileRecorder() as rec:
            fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))
            rec.safe_point()
    kernels = [e for e in rec.events if e.kind == "kernels"]
    assert [(e.kernels, e.ops) for e in kernels] == [(1, {"aten::add.Tensor": 1})]


def test_sync_mode_a_graph_traced_again_after_a_reset_is_no_neff_build(clean_env):
    with installed_fake() as fake:                           # RELEASE: sync mode by default
        assert fake.launch_blocking
        fake.plan("compiled", duration_s=40.0)
        compiled()(torch.ones(3))                             # built before recording
        torch._dynamo.reset()
        with nk.compile_budget(max_neff_builds=0) as budget:
            compiled()(torch.ones(3))                         # the same graph: a memory hit
    assert budget.ok, budget.report()
    event = budget.events[0]
    assert event.neff_cache == "memory_hit" and event.neff_compile_s == 0.0
    assert len(event.metrics["neff_keys"]) == 1


def test_sync_mode_an_eager_kernel_build_fails_max_neff_builds(clean_env):
    with installed_fake() as fake:
        with pytest.raises(nk.CompileBudgetExceeded):
            with nk.compile_budget(max_neff_builds=0):
                fake.run_eager_op("aten::add.Tensor", torch.ones(5), torch.ones(5))
    assert fake.python_builds                                # neuronx-cc ran (Python path)


def test_sync_mode_kernels_read_from_the_disk_cache_are_not_builds(clean_env):
    with installed_fake() as fake:
        with nk.CompileRecorder() as rec:
            fake.plan("disk_hit")                            # another process built it before
            fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))
            fake.plan("compiled")
            fake.run_eager_op("aten::cat", [torch.ones(2), torch.ones(3)])
            rec.safe_point()
    assert len(fake.python_builds) == 1
    kernels = next(e for e in rec.events if e.kind == "kernels")
    assert kernels.kernels == 2 and kernels.ops == {"aten::add.Tensor": 1, "aten::cat": 1}
    assert kernels.metrics == {"compiled": 1, "loaded": 1, "sync_mode": True}
    assert "sync mode" in kernels.reasons[0] and "at most 1 built" in kernels.reasons[0]


def test_an_op_without_a_neuron_kernel_is_not_called_a_failed_compile(clean_env):
    with installed_fake(build_type="DEV") as fake:
        with nk.CompileRecorder() as rec:
            fake.run_unimplemented_op("aten::linalg_eigh")
            rec.safe_point()
    event = next(e for e in rec.events if e.kind == "cpu_fallback")
    assert "to the host and back" in event.reasons[0] and "retr" not in event.reasons[0]
    advice = next(a for a in nk.diagnose(rec.events) if "CPU" in a.title)
    text = advice.title + advice.detail + advice.fix
    assert "no Neuron kernel" in text and "retries" not in text
    assert "NEURON_FALLBACK_ENABLED=0" not in advice.fix.split(";")[0]


@pytest.mark.parametrize(("key", "op"), [
    ("aten::add.Tensor_t0_(2, 3)_torch.float32_t1_(2, 3)_torch.float32", "aten::add.Tensor"),
    ("aten::cat_sub_arg0_0_t0_(2,)_torch.float32_sub_arg0_1_t0_(3,)_torch.float32_s1_int",
     "aten::cat"),
    ("aten::zeros_sub_arg0_0_s0_int_sub_arg0_1_s0_int_trn2_2_O1_--model-type_transformer",
     "aten::zeros"),
    ("aten::arange_trn2_2_O1_--model-type_transformer_--auto-cast-none", "aten::arange"),
    ("aten::_softmax_t0_(2, 3)_torch.float32_static1_-1", "aten::_softmax"),
    ("aten::native_layer_norm_t0_(3, 4)_torch.float32", "aten::native_layer_norm"),
    ("aten::empty", "aten::empty"),
    ("k1f3a9", "?"),
])
def test_eager_kernel_keys_name_their_op(key, op):
    assert op_of_key(key) == op


def test_the_fake_sets_the_release_builds_default_at_import(clean_env):
    import os

    with installed_fake():
        assert os.environ["NEURON_LAUNCH_BLOCKING"] == "1"
    with installed_fake(build_type="DEV"):
        assert os.environ["NEURON_LAUNCH_BLOCKING"] == "0"
    assert "NEURON_LAUNCH_BLOCKING" not in os.environ


def test_a_lock_wait_is_a_persistent_miss_then_a_hit(clean_env):
    with installed_fake(build_type="DEV", metrics_enabled=True) as fake:
        fake.plan("disk_hit", wait_s=30.0)
        compiled()(torch.ones(3))
        fake.synchronize()
        value = fake.arena.counter_value
        assert (value("CompilationCache.PersistentMisses"),
                value("CompilationCache.PersistentHits")) == (1, 1)


def test_a_worker_on_its_own_thread_builds_without_a_sync_and_is_counted_once(clean_env):
    with installed_fake(build_type="DEV", threaded=True) as fake:
        fn = compiled()
        with nk.CompileRecorder() as rec:
            fake.plan("compiled", duration_s=12.0)
            fn(torch.ones(3))
            fake.plan("compiled", duration_s=1.5)
            fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))
            assert fake.worker.idle()                       # built with no synchronize
            assert fake.worker.ran >= 2 and fake.sync_count == 0
            rec.safe_point()
            rec.safe_point()
        assert fake.worker.thread.is_alive()
    assert rec.events[0].neff_cache == "compiled" and rec.events[0].neff_compile_s == 12.0
    kernels = [e for e in rec.events if e.kind == "kernels"]
    assert [(e.kernels, e.duration_s) for e in kernels] == [(1, 1.5)]


def test_under_neuronkit_record_a_job_sets_its_cache_folder_after_import_torch(
        clean_env, tmp_path, monkeypatch):
    import atexit

    from neuronkit.apps import record_process

    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "tmp-default"))
    with installed_fake(use_disk=True, build_type="DEV") as fake:
        recorder = record_process.start(tmp_path / "logs")  # what the startup hook runs
        atexit.unregister(record_process._stop)
        try:
            assert recorder is not None and fake.manager_created_by is None
            monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "fsx"))
            compiled()(torch.ones(3))
        finally:
            recorder.stop()
    assert fake.configured_cache_dir == tmp_path / "fsx" and neff_files(tmp_path / "fsx")
    assert recorder.events[0].neff_cache == "compiled"


def test_the_report_says_once_what_sync_mode_cannot_show(clean_env):
    with installed_fake() as fake:
        with nk.CompileRecorder() as rec:
            for n in (2, 3):
                fake.run_eager_op("aten::add.Tensor", torch.ones(n), torch.ones(n))
                compiled()(torch.ones(n))
                rec.safe_point()
    said = [a for a in nk.diagnose(rec.events) if "sync mode" in a.title]
    assert len(said) == 1
    assert "build times are not recorded" in said[0].detail
    assert "inside Dynamo's compile time" in said[0].detail
    with installed_fake(build_type="DEV") as fake:
        with nk.CompileRecorder() as rec:
            fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))
            compiled()(torch.ones(2))
    assert not [a for a in nk.diagnose(rec.events) if "sync mode" in a.title]
