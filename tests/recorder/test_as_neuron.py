"""``CompileRecorder(as_neuron=True)``: Neuron's compile rules on the CPU. Static shapes, a
backward graph per forward graph (``aot_eager`` in place of ``eager``), eager ops forecast as
Neuron kernels at safe points, graphs with symbolic shapes flagged; the process-wide settings
counted across nested and concurrent recorders."""
from __future__ import annotations

import threading

import pytest
import torch
import torch._dynamo

import neuronkit as nk
from neuronkit.sources import neuron_rules
from neuronkit.sources.kernel_forecast import reset_forecast

FORWARDS = ("first", "recompile")


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    reset_forecast()
    yield
    torch._dynamo.reset()


def settings() -> tuple[bool, bool, str]:
    config = torch._dynamo.config
    return (config.automatic_dynamic_shapes, config.assume_static_by_default,
            config.debug_backend_override)


def train_steps(fn, rec, sizes) -> None:
    for n in sizes:
        fn(torch.ones(n, 4)).sum().backward()
        rec.safe_point(wait=False)


def test_each_shape_is_a_graph_with_its_backward(tmp_path):
    sizes = (2, 3, 5, 3)
    with nk.CompileRecorder() as plain:
        train_steps(torch.compile(torch.nn.Linear(4, 4), backend="eager"), plain, sizes)
    torch._dynamo.reset()
    path = tmp_path / "log.jsonl"
    with nk.CompileRecorder(path, device="cpu", as_neuron=True) as rec:
        train_steps(torch.compile(torch.nn.Linear(4, 4), backend="eager"), rec, sizes)
    forwards = [e for e in rec.events if e.kind in FORWARDS]
    backwards = [e for e in rec.events if e.kind == "backward"]
    # the plain run turned dim 0 into a symbol after its second value: fewer graphs, no backward
    assert len([e for e in plain.events if e.kind in FORWARDS]) < len(set(sizes))
    assert not [e for e in plain.events if e.kind == "backward"]
    assert len(forwards) == len(set(sizes))
    assert sorted(e.compile_id for e in backwards) == sorted(e.compile_id for e in forwards)
    assert all(e.metrics["as_neuron_backend"] == "aot_eager" for e in forwards)
    header = nk.CompileLog.load(path).header
    assert header["as_neuron"] == {"rules": list(neuron_rules.RULES), "device": "cpu"}
    assert "as_neuron" not in plain.log.header


def test_the_settings_are_counted_across_nested_and_concurrent_recorders():
    before = settings()
    outer, inner = nk.CompileRecorder(as_neuron=True), nk.CompileRecorder(as_neuron=True)
    outer.start()
    ruled = settings()
    assert ruled[:2] == (False, True) and ruled[2]
    inner.start()
    outer.stop()                       # the other one still records: the rules stay
    assert settings() == ruled
    inner.stop()
    assert settings() == before

    barrier = threading.Barrier(4)
    seen: list[tuple[bool, bool, str]] = []

    def record(n: int) -> None:   # four threads, recorders started and stopped interleaved
        recs = [nk.CompileRecorder(as_neuron=True) for _ in range(2)]
        for i in range(10):
            recs[0].start()
            barrier.wait()
            recs[1].start()
            seen.append(settings())
            recs[(i + n) % 2].stop()
            barrier.wait()
            seen.append(settings())   # one of the thread's two still records
            recs[(i + n + 1) % 2].stop()

    threads = [threading.Thread(target=record, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 80 and all(s == ruled for s in seen)
    assert settings() == before and not neuron_rules.active()


def test_an_eager_op_between_compiled_regions_is_forecast_per_new_shape():
    first = torch.compile(lambda x: torch.sin(x) * 3, backend="eager")
    second = torch.compile(lambda x: torch.exp(x).sum(), backend="eager")
    with nk.CompileRecorder(as_neuron=True) as rec:
        for n in (2, 3, 3, 5):
            with rec.context(f"step {n}"):
                x = torch.ones(n, requires_grad=True)
                y = torch.tanh(first(x))          # eager, between the two compiled regions
                second(y).backward()
                rec.safe_point(wait=False)
    kernels = [e for e in rec.events if e.kind == "kernels"]
    assert all(e.forecast for e in kernels)
    tanh = [e.context for e in kernels if "aten::tanh" in e.ops]
    assert tanh == ["step 2", "step 3", "step 5"]   # once per new shape, not at the repeat
    ops = {op for e in kernels for op in e.ops}
    # the compiled graphs' own ops, forward and backward, are their NEFFs on Neuron, not kernels
    assert not ops & {"aten::sin", "aten::cos", "aten::exp"}
    assert {"aten::tanh", "aten::tanh_backward"} <= ops


def test_a_graph_with_symbolic_shapes_is_flagged_as_refused_on_neuron():
    dynamic = torch.compile(lambda x: x * 2, backend="eager", dynamic=True)
    static = torch.compile(lambda x: x + 1, backend="eager")
    with nk.CompileRecorder(as_neuron=True) as rec:
        dynamic(torch.ones(3))
        static(torch.ones(3))
    graphs = [e for e in rec.events if e.kind in FORWARDS]
    assert len(graphs) == 2
    flagged = [e for e in graphs if "refused_on_neuron" in e.metrics]
    assert len(flagged) == 1 and "symbolic shapes" in flagged[0].metrics["refused_on_neuron"]
    assert flagged[0].input_shapes == graphs[0].input_shapes
    findings = [a for a in nk.diagnose(rec.log) if "would fail on Neuron" in a.title]
    assert len(findings) == 1 and findings[0].severity == "critical"
    assert findings[0].numbers["events"] == [flagged[0].seq]

    with nk.CompileRecorder() as plain:   # without the rules, nothing is flagged
        torch.compile(lambda x: x * 4, backend="eager", dynamic=True)(torch.ones(3))
    assert not [e for e in plain.events if "refused_on_neuron" in e.metrics]
