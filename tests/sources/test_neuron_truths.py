"""What native Neuron must not hide, through the contract fake (tests/neuron_fake): backward
graphs are events of their own, steady safe points cost no synchronize, graphs built before
recording are memory hits, CPU fallbacks show, loaded is not compiled, renamed internals are said."""
from __future__ import annotations

import threading

import pytest
import torch

import neuronkit as nk
from neuron_fake import installed_fake
from neuronkit.views.text import format_events


def compiled(fn=None):
    return torch.compile(fn or (lambda x: (x * 2).sum()), backend="neuron", dynamic=False)


def test_a_backward_graph_is_its_own_event_with_its_forwards_step(compiler_reset):
    fn = torch.compile(torch.nn.Linear(4, 2), backend="aot_eager")
    with nk.CompileRecorder() as rec:
        with rec.context("step 1"):
            loss = fn(torch.ones(3, 4)).sum()
        worker = threading.Thread(target=loss.backward)   # autograd's own thread: no step set
        worker.start()
        worker.join()
    forward, backward = rec.events
    assert (forward.kind, backward.kind) == ("first", "backward")
    assert backward.context == "step 1" and backward.compile_id == forward.compile_id
    assert backward.function == forward.function and backward.input_shapes == forward.input_shapes
    assert nk.CompileLog(rec.events).graph_counts() == {forward.function: 1}  # not a new graph


def test_a_steady_step_end_does_not_synchronize(clean_env):
    with installed_fake() as fake:
        fn = compiled()
        with nk.CompileRecorder() as rec:
            fn(torch.ones(3))
            rec.safe_point(wait=False)                    # a build is pending: resolve it
            assert fake.sync_count == 1 and rec.events[0].neff_cache == "compiled"
            for _ in range(100):
                fn(torch.ones(3))
                rec.safe_point(wait=False)
            assert fake.sync_count == 1                   # 100 steady steps: none
            fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))
            fake.advance_worker()                         # the worker compiled it meanwhile
            rec.safe_point(wait=False)
            assert fake.sync_count == 1                   # its key was read without a sync
            assert [e.kernels for e in rec.events if e.kind == "kernels"] == [1]


def test_a_graph_built_before_recording_is_a_memory_hit(clean_env):
    with installed_fake() as fake:
        fake.plan("compiled", duration_s=40.0)
        compiled()(torch.ones(4))
        fake.synchronize()
        torch._dynamo.reset()                             # traced again: the same NEFF key
        with nk.CompileRecorder() as rec:
            compiled()(torch.ones(4))
        assert [(e.neff_cache, e.neff_compile_s) for e in rec.events] == [("memory_hit", 0.0)]
        assert nk.CompileLog(rec.events).total_neff_s == 0.0


def test_a_cpu_fallback_is_an_event_with_advice(clean_env):
    with installed_fake() as fake:
        fake.plan("failed")
        fake.run_eager_op("aten::_foreach_norm.Scalar", torch.ones(2))  # before: not ours
        fake.synchronize()
        with nk.CompileRecorder() as rec:
            with rec.context("step 3"):
                fake.plan("failed")
                fake.run_eager_op("aten::cumsum", torch.ones(5))
                rec.safe_point()
            rec.safe_point()                              # nothing new: no second event
    fallbacks = [e for e in rec.events if e.kind == "cpu_fallback"]
    assert [(e.context, e.ops) for e in fallbacks] == [("step 3", {"aten::cumsum": 1})]
    advice = next(a for a in nk.diagnose(rec.events) if "CPU" in a.title)
    assert "aten::cumsum" in advice.detail and "each call" in advice.detail
    assert "NEURON_FALLBACK_ENABLED=0" in advice.fix
    assert "cpu_fallback" in format_events(rec.events)


def test_kernels_loaded_from_disk_are_not_called_compiled(clean_env):
    with installed_fake(build_type="DEV") as fake:
        with nk.CompileRecorder() as rec:
            fake.plan("disk_hit")
            fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))
            fake.plan("compiled", duration_s=3.0)
            fake.run_eager_op("aten::mul.Tensor", torch.ones(2), torch.ones(2))
            rec.safe_point()
    kernels = next(e for e in rec.events if e.kind == "kernels")
    assert kernels.metrics == {"compiled": 1, "loaded": 1} and kernels.duration_s == 3.0
    assert "1 compiled, 1 loaded from the NEFF disk cache or waited for" in kernels.reasons[0]
    advice = next(a for a in nk.diagnose(rec.events) if "eager kernel" in a.title)
    assert "1 compiled" in advice.title and "1 loaded or waited" in advice.title


def test_a_rank_that_waited_on_a_lock_is_not_counted_as_a_saving(clean_env):
    with installed_fake() as fake:
        fake.plan("disk_hit", wait_s=250.0)               # another rank built it meanwhile
        with nk.CompileRecorder() as rec:
            compiled()(torch.ones(3))
    assert rec.events[0].neff_cache == "disk_hit" and rec.events[0].neff_compile_s == 0.0
    advice = next(a for a in nk.diagnose(rec.events) if "NEFF" in a.title)
    assert "saved" not in advice.title + advice.detail
    assert "loaded from the NEFF disk cache or waited" in advice.detail
    assert "disk/wait" in format_events(rec.events)


def test_a_renamed_neuron_counter_is_said_once(clean_env, monkeypatch):
    with installed_fake() as fake:
        def record_without_counter(metrics):             # a torch-neuronx that renamed it
            from torch._dynamo.utils import counters

            fake.dynamo.compilation_metrics.append(metrics)
            counters["neuron"]["graphs_built"] += 1
        monkeypatch.setattr(fake.dynamo, "record_compilation", record_without_counter)
        with pytest.warns(RuntimeWarning, match=r"counters\['neuron'\]\['compiled_graphs'\].*"
                                                r"NEFF build times .* not recorded") as caught:
            with nk.CompileRecorder() as rec:
                compiled()(torch.ones(3))
                rec.safe_point()
                compiled()(torch.ones(5))
                rec.safe_point()
    assert len([w for w in caught if "compiled_graphs" in str(w.message)]) == 1


def test_changed_eager_key_forms_are_said_once(clean_env, monkeypatch):
    with installed_fake(build_type="DEV") as fake:
        fake.module._lazy_init()                          # the job has used the device
        with nk.CompileRecorder() as rec:
            monkeypatch.setattr(fake.C, "_get_all_cache_keys", lambda: {"k1f3a9", "k77b0c"})
            with pytest.warns(RuntimeWarning, match="eager-op cache keys changed form"):
                rec.safe_point()
    assert next(e for e in rec.events if e.kind == "kernels").ops == {"?": 2}
