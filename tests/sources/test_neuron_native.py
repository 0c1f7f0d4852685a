"""The native Neuron path through the contract fake (tests/neuron_fake): NEFF build times and cache
states land on the right events at safe points, never a synchronize inside a compile, at most one
per safe point, the user's async error reaches the user, eager kernels counted exactly."""
from __future__ import annotations

import json

import pytest
import torch

import neuronkit as nk
from neuron_fake import installed_fake
from neuronkit.events.facts import neff_seconds, total_seconds
from neuronkit.events.schema import FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog
from neuronkit.workloads.padding_check import left_padding_verdict


def compiled(fn=None):
    return torch.compile(fn or (lambda x: (x * 2).sum()), backend="neuron", dynamic=False)


def test_neff_times_resolve_at_the_safe_point_with_one_synchronize(clean_env, tmp_path):
    with installed_fake(build_type="DEV") as fake:
        fake.plan("compiled", duration_s=95.5)
        fake.plan("disk_hit")
        fn = compiled()
        with nk.CompileRecorder(tmp_path / "log.jsonl") as rec:
            fn(torch.ones(3))
            fn(torch.ones(5))
            assert fake.sync_count == 0                     # nothing synchronized while compiling
            assert [e.neff_compile_s for e in rec.events] == [None, None]
            assert [e.metrics["neuron_graphs"][1:] for e in rec.events] == [[0, 1], [1, 2]]
            rec.safe_point()
            assert fake.sync_count == 1
            assert [(e.neff_compile_s, e.neff_cache) for e in rec.events] == [
                (95.5, "compiled"), (0.0, "disk_hit")]
            rec.safe_point()                                # nothing pending, nothing to wait for
            assert fake.sync_count == 2                     # one per safe point (kernels)
        assert fake.sync_count == 3                         # stop() is a safe point too
    assert total_seconds(rec.events) == pytest.approx(95.5 + sum(e.duration_s for e in rec.events))
    lines = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert lines[0]["version"] == FORMAT_VERSION
    updates = [line for line in lines if "update" in line]
    assert [{k: v for k, v in u.items() if k != "cache_key"} for u in updates] == [
        {"update": 0, "neff_compile_s": 95.5, "neff_cache": "compiled"},
        {"update": 1, "neff_compile_s": 0.0, "neff_cache": "disk_hit"}]
    assert [[lk["state"] for lk in u["cache_key"]] for u in updates] == [["compiled"], ["disk_hit"]]
    loaded = CompileLog.load(tmp_path / "log.jsonl")
    assert [(e.neff_compile_s, e.neff_cache) for e in loaded.events] == [
        (95.5, "compiled"), (0.0, "disk_hit")]
    assert loaded.total_neff_s == 95.5
    row = loaded.summary()[0]
    assert row["neff_s"] == 95.5 and row["graphs"] == 2


def test_the_same_graph_again_is_a_memory_hit_and_costs_nothing(clean_env):
    with installed_fake(build_type="DEV") as fake:
        fake.plan("compiled", duration_s=40.0)
        with nk.CompileRecorder() as rec:
            compiled()(torch.ones(4))
            rec.safe_point()
            torch._dynamo.reset()                            # traced again: same NEFF key
            compiled()(torch.ones(4))
        assert [(e.neff_compile_s, e.neff_cache) for e in rec.events] == [
            (40.0, "compiled"), (0.0, "memory_hit")]         # not 40 s twice
        assert neff_seconds(rec.events) == 40.0


def test_an_async_error_reaches_the_user_not_the_recorder(clean_env):
    with installed_fake() as fake:
        fn = compiled()
        with nk.CompileRecorder() as rec:
            fake.inject_async_error("device fault in the user's step")
            fn(torch.ones(3))                                # compiles and records, no raise
            assert len(rec.events) == 1 and fake.sync_count == 0
            with pytest.raises(RuntimeError, match="device fault in the user's step"):
                rec.safe_point()                             # raised where the user waits
            rec.safe_point()                                 # cleared: now it resolves
            assert rec.events[0].neff_cache == "compiled"
        with nk.CompileRecorder() as rec2:
            fn(torch.ones(6))
            fake.inject_async_error("the user's own error")
            with pytest.raises(RuntimeError, match="the user's own error"):
                torch.neuron.synchronize()                   # the user's sync sees it: not eaten
        assert rec2.events[0].neff_cache == "compiled"


def test_a_failed_build_is_not_called_a_disk_hit(clean_env):
    with installed_fake(build_type="DEV") as fake:
        fake.plan("failed")
        with nk.CompileRecorder() as rec:
            compiled()(torch.ones(3))
            with pytest.raises(RuntimeError, match="neuronx-cc failed"):
                rec.safe_point()
            rec.safe_point()
        assert (rec.events[0].neff_compile_s, rec.events[0].neff_cache) == (0.0, None)


def test_launch_blocking_is_not_counted_twice(clean_env, monkeypatch):
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "1")
    with installed_fake() as fake:
        fake.plan("compiled", duration_s=30.0)
        with nk.CompileRecorder() as rec:
            compiled()(torch.ones(3))
    event = rec.events[0]
    assert event.metrics["neff_in_duration"] is True and event.neff_compile_s == 30.0
    assert event.total_s == event.duration_s                 # the build is inside Dynamo's time


def test_eager_kernels_are_counted_exactly_once_per_safe_point(clean_env):
    with installed_fake(build_type="DEV") as fake:
        fake.run_eager_op("aten::mul.Tensor", torch.ones(2), 2.0)  # before recording: not ours
        fake.synchronize()
        with nk.CompileRecorder() as rec:
            with rec.context("batch 0"):
                fake.plan("compiled", duration_s=1.5)
                fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))
                fake.run_eager_op("aten::add.Tensor", torch.ones(3), torch.ones(3))
                fake.run_eager_op("aten::native_layer_norm", torch.ones(3, 4))
                fake.run_eager_op("aten::mul.Tensor", torch.ones(2), 2.0)  # cached already
                compiled()(torch.ones(3))                    # a graph key: not an eager kernel
                rec.safe_point()
            with rec.context("batch 1"):
                fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))  # seen
                rec.safe_point()
            with rec.context("batch 2"):
                fake.run_eager_op("aten::add.Tensor", torch.ones(7), torch.ones(7))
                rec.safe_point()
    kernels = [e for e in rec.events if e.kind == "kernels"]
    assert [(e.context, e.kernels) for e in kernels] == [("batch 0", 3), ("batch 2", 1)]
    assert kernels[0].ops == {"aten::add.Tensor": 2, "aten::native_layer_norm": 1}
    assert kernels[0].duration_s == pytest.approx(1.5 + 2 * 2.0)  # planned 1.5 s, default 2 s
    assert kernels[0].function == "eager kernels" and not kernels[0].forecast
    assert nk.CompileLog(rec.events).summary()[-1]["kernels"] == 4


def test_a_missing_private_call_degrades_with_one_warning(clean_env):
    with installed_fake(build_type="DEV") as fake:
        del fake.C._get_all_cache_keys
        with pytest.warns(RuntimeWarning, match="_get_all_cache_keys is not available") as caught:
            with nk.CompileRecorder() as rec:
                compiled()(torch.ones(3))
                rec.safe_point()
                rec.safe_point()
        assert len([w for w in caught if "_get_all_cache_keys" in str(w.message)]) == 1
        assert rec.events[0].neff_cache == "compiled"        # the NEFF times still resolve


def test_version_one_logs_still_load(tmp_path):
    path = tmp_path / "v1.jsonl"
    path.write_text(json.dumps({"format": "neuronkit-compile-log", "version": 1}) + "\n"
                    + json.dumps({"seq": 0, "function": "forward", "kind": "first",
                                  "duration_s": 1.5}) + "\n")
    log = CompileLog.load(path)
    assert log.events[0].neff_compile_s is None and log.events[0].total_s == 1.5


def test_an_update_for_an_unknown_event_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"format": "neuronkit-compile-log", "version": 2}) + "\n"
                    + json.dumps({"seq": 0, "function": "forward"}) + "\n"
                    + json.dumps({"update": 7, "neff_compile_s": 3.0}) + "\n")
    with pytest.warns(UserWarning, match="updates event 7"):
        log = CompileLog.load(path)
    assert log.events[0].neff_compile_s is None
    with pytest.raises(ValueError, match="may set only"):
        log.update(0, function="other")


# ---- workloads and views through the fake ---------------------------------------------------

@pytest.mark.slow
def test_generate_resolves_neff_times_and_kernels_per_batch(clean_env, tiny_model_path):
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    tok = nk.load_tokenizer(tiny_model_path)
    # nk.generate's padding probe (eager, on a CPU model only) before the fake: on Neuron it
    # does not run, the verdict is read off the model
    assert left_padding_verdict(model, tok("hi")["input_ids"], tok.pad_token_id) is None
    with installed_fake(build_type="DEV") as fake:
        fake.plan("compiled", duration_s=5.0)       # the first prefill's kernel is submitted first
        fake.plan("compiled", duration_s=120.0)     # then the decode graph

        @torch.compiler.disable
        def prefill_kernels(module, args, kwargs):  # stands for the eager ops of the prefill
            ids = kwargs.get("input_ids")
            if ids is not None and ids.shape[1] > 1:
                fake.run_eager_op("aten::embedding", model.model.embed_tokens.weight, ids)
        handle = model.register_forward_pre_hook(prefill_kernels, with_kwargs=True)
        syncs_in_compile = []
        with nk.CompileRecorder() as rec:
            rec.subscribe(lambda e: syncs_in_compile.append(fake.sync_count))
            results = [nk.generate(model, tok, [prompt], max_new_tokens=3,
                                   buckets=nk.Buckets([8, 64]), backend="neuron", recorder=rec)
                       for prompt in ("hi", "a somewhat longer prompt", "hi")]
        handle.remove()
    built = [e for e in rec.events if "neuron_graphs" in e.metrics]
    assert built and (built[0].neff_cache, built[0].neff_compile_s) == ("compiled", 120.0)
    assert all(e.neff_cache is not None for e in built)
    # events arrive inside the compile: the count then equals that of the safe points before
    assert syncs_in_compile == sorted(syncs_in_compile)
    assert fake.sync_count == len(results) + 1               # one per batch, one at stop
    kernels = [e for e in rec.events if e.kind == "kernels"]
    assert [e.context.split(", cache")[0] for e in kernels] == [
        "generate batch 0: bucket 8", "generate batch 0: bucket 64"]   # the third: all cached
    assert all(e.ops == {"aten::embedding": e.kernels} for e in kernels)
    assert kernels[0].duration_s == 5.0


def test_the_trainer_callback_resolves_at_step_end(clean_env):
    from types import SimpleNamespace

    with installed_fake() as fake:
        fake.plan("compiled", duration_s=50.0)
        rec = nk.CompileRecorder().start()
        callback = nk.CompileEventsCallback(rec, quiet=True)
        compiled()(torch.ones(3))
        assert rec.events[0].neff_compile_s is None and fake.sync_count == 0
        callback.on_step_end(SimpleNamespace(gradient_accumulation_steps=1), None, None)
        assert (rec.events[0].neff_compile_s, fake.sync_count) == (50.0, 1)
        rec.stop()


def test_the_views_show_dynamo_and_neff_side_by_side(clean_env):
    from neuronkit.views.html import graph_counts_html
    from neuronkit.views.text import format_events, format_summary

    with installed_fake(build_type="DEV") as fake:
        fake.plan("compiled", duration_s=75.0)
        with nk.CompileRecorder() as rec:
            compiled()(torch.ones(3))
            fake.run_eager_op("aten::add.Tensor", torch.ones(2), torch.ones(2))
    log = rec.log
    assert "75.0" in format_events(log) and "NEFF s" in format_events(log)
    summary = format_summary(log)
    assert "NEFF s" in summary and "kernels" in summary and "75.0" in summary
    html = graph_counts_html(log)
    assert "+ 75.0 s NEFF builds" in html and "(1 kernel(s))" in html
    log.set_wall_time(100.0)
    share = [a for a in nk.diagnose(log) if "compile time is" in a.title]
    assert share and share[0].numbers["neff_s"] == 75.0 and share[0].numbers["share"] > 0.75


@pytest.mark.slow
def test_the_dashboard_shows_neff_times_after_a_run(clean_env, tiny_model_path):
    from neuronkit.apps.dashboard.state import DashboardState
    from neuronkit.views.html import graph_counts_html

    with installed_fake(build_type="DEV") as fake:
        fake.plan("compiled", duration_s=88.0)
        state = DashboardState(tiny_model_path, device="cpu", dtype="float32", backend="neuron")
        state.load()
        state.max_new_tokens = 3
        before = fake.sync_count
        state.generate("hello there")
        built = [e for e in state.log.events if "neuron_graphs" in e.metrics]
        assert built and all(e.neff_cache == "compiled" for e in built)
        assert state.log.total_neff_s == 90.0                   # the prefill's 88 s + decode's 2 s
        assert "+ 90.0 s NEFF builds" in graph_counts_html(state.log)
        # the generate batch's safe point, then the end of the run (the recorder stops)
        assert [c.stack[2].split(":")[1] for c in fake.sync_calls[before:]] == ["safe_point"] * 2
        state.close()


def test_advice_names_neff_builds_cache_hits_and_kernels():
    from neuronkit.events.event import CompileEvent as E

    events = [E(function="f", kind="first", duration_s=2.0, neff_compile_s=90.0,
                neff_cache="compiled"),
              E(function="f", kind="recompile", duration_s=1.5, neff_compile_s=0.0,
                neff_cache="disk_hit"),
              E(function="eager kernels", kind="kernels", kernels=3, context="batch 0",
                ops={"aten::add.Tensor": 2, "aten::mm": 1}, duration_s=6.0),
              E(function="eager kernels", kind="kernels", kernels=5, context="batch 1",
                ops={"aten::add.Tensor": 5}, forecast=True)]
    found = {a.title.split(" ")[0] + " " + a.title.split(" ")[1]: a for a in nk.diagnose(events)}
    neff = next(a for a in found.values() if a.title.startswith("NEFF builds"))
    assert neff.numbers == {"neff_s": 90.0, "built": 1, "disk_hits": 1, "memory_hits": 0,
                            "dynamo_s": 3.5, "backward_built": 0, "waited": 0}
    assert neff.severity == "warning" and "TORCH_NEURONX_NEFF_CACHE_DIR" in neff.fix
    measured = next(a for a in found.values() if a.title.startswith("3 eager kernel(s) compiled"))
    assert measured.numbers["ops"] == {"aten::add.Tensor": 2, "aten::mm": 1}
    assert "(6.0 s)" in measured.title and "batch 0" in measured.detail
    forecast = next(a for a in found.values() if a.title.startswith("5 eager kernel(s) forecast"))
    assert forecast.numbers["forecast"] is True and "forecast on CPU" in forecast.detail
    assert not [a for a in nk.diagnose(events[:1] * 0 + [E(function="g", kind="first")])
                if "NEFF" in a.title or "kernel" in a.title]


def test_the_chrome_trace_has_a_neff_build_slice(tmp_path):
    from neuronkit.events.event import CompileEvent as E
    from neuronkit.views.chrome_trace import write_chrome_trace

    events = [E(function="f", kind="first", started_at=10.0, duration_s=2.0, neff_compile_s=90.0,
                neff_cache="compiled"),
              E(function="f", kind="recompile", started_at=20.0, duration_s=1.0,
                neff_compile_s=30.0, metrics={"neff_in_duration": True})]
    trace = json.loads(write_chrome_trace(events, tmp_path / "t.json").read_text())["traceEvents"]
    builds = [t for t in trace if t.get("cat") == "neff"]
    assert [(b["ts"], b["dur"]) for b in builds] == [(2.0e6, 90.0e6)]   # after Dynamo's 2 s


def test_only_launch_blocking_1_is_sync_mode(clean_env, monkeypatch):
    """As torch-neuronx (and neuronkit doctor) read it: "true" leaves the build asynchronous."""
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "true")
    with installed_fake() as fake:
        fake.plan("compiled", duration_s=30.0)
        with nk.CompileRecorder() as rec:
            compiled()(torch.ones(3))
    assert "neff_in_duration" not in rec.events[0].metrics
    assert rec.events[0].total_s == pytest.approx(rec.events[0].duration_s + 30.0)
