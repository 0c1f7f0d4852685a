"""calibrate(): the NEFF build-seconds model fitted on a Neuron log's own builds, on hand-made
logs with known parameters (no Neuron: the seconds are made here, as a Trainium log would hold)."""
from __future__ import annotations

import numpy as np
import pytest

from neuronkit.advice.calibrate import MIN_BUILDS, calibrate
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog

OPS = [120, 400, 650, 900, 1500, 2200, 3100]


def build(seconds: float, ops: float | None, nodes: float | None = None, kind: str = "first",
          state: str = "compiled", **metrics) -> CompileEvent:
    dynamo = {k: v for k, v in (("graph_op_count", ops), ("graph_node_count", nodes))
              if v is not None}
    return CompileEvent(function="forward", kind=kind, neff_compile_s=seconds, neff_cache=state,
                        metrics={"dynamo": dynamo, **metrics})


def log_of(events: list[CompileEvent], **header) -> CompileLog:
    log = CompileLog(header={"format": FORMAT, "version": FORMAT_VERSION, "device": "neuron",
                             **header})
    for e in events:
        log.append(e)
    return log


def linear_log(a: float, b: float, noise: float = 0.0, seed: int = 0) -> CompileLog:
    """Builds whose seconds are ``a + b * ops`` (plus gaussian noise); the node counts are not
    proportional to the op counts, so the ops line is the one model that fits exactly."""
    rng = np.random.default_rng(seed)
    kinds = ["first", "recompile", "backward"]
    return log_of([build(a + b * ops + (rng.normal(0, noise) if noise else 0.0), ops,
                         nodes=ops + 37 * (i % 3) ** 2, kind=kinds[i % 3])
                   for i, ops in enumerate(OPS)])


def test_a_linear_log_is_fitted_exactly_and_says_so():
    a, b = 12.5, 0.046
    cal = calibrate(linear_log(a, b), source="trn.jsonl")
    assert cal.model == "linear in ops" and cal.n == len(OPS)
    assert cal.a == pytest.approx(a, abs=1e-6) and cal.b == pytest.approx(b, rel=1e-9)
    assert cal.loo_mae_s < 1e-6
    assert cal.seconds(ops=1000) == pytest.approx(a + b * 1000)
    assert cal.mean_s == pytest.approx(np.mean([a + b * x for x in OPS]))
    label = cal.label
    assert label.startswith("calibrated on trn.jsonl: seconds = 12.5 + 0.046 * ops")
    assert "leave-one-out error" in label and f"{len(OPS)} builds" in label
    # every model that could be fitted is named with its error, the chosen one first
    assert [m for m, _ in cal.candidates][0] == "linear in ops"
    assert {m for m, _ in cal.candidates} == {"mean", "linear in ops", "linear in nodes",
                                             "power law in ops"}
    assert any(s.startswith("linear in parameters:") for s in cal.skipped)


def test_a_noisy_log_reports_a_larger_error():
    exact = calibrate(linear_log(20.0, 0.05))
    noisy = calibrate(linear_log(20.0, 0.05, noise=15.0, seed=3))
    assert noisy.loo_mae_s > 1.0 > exact.loo_mae_s
    assert noisy.loo_rel > exact.loo_rel
    errors = dict(noisy.candidates)
    assert noisy.loo_mae_s == min(errors.values())  # chosen by its leave-one-out error
    assert f"±{noisy.loo_mae_s:.3g} s" in noisy.label


def test_a_power_law_is_chosen_where_it_fits():
    events = [build(3.0 * ops ** 0.7, ops, nodes=ops * 2) for ops in OPS]
    cal = calibrate(log_of(events))
    assert cal.model == "power law in ops"
    assert cal.a == pytest.approx(3.0, rel=1e-6) and cal.b == pytest.approx(0.7, rel=1e-6)
    assert cal.formula.startswith("seconds = 3 * ops ^ 0.7")


def test_flat_seconds_choose_the_mean():
    cal = calibrate(log_of([build(90.0, ops) for ops in OPS]))
    assert cal.model == "mean" and cal.a == pytest.approx(90.0) and cal.loo_mae_s < 1e-9
    assert cal.seconds() == pytest.approx(90.0)


def test_parameters_are_a_feature_where_every_build_has_them():
    events = [build(5.0 + 2e-6 * p, 300 + (i * 7919) % 500, parameters=p)
              for i, p in enumerate([1e6, 4e6, 9e6, 2e7, 3e7, 5e7])]
    cal = calibrate(log_of(events))
    assert cal.model == "linear in parameters"
    assert cal.seconds(parameters=1e7) == pytest.approx(25.0)
    assert cal.seconds(ops=500) is None  # the feature the model reads is missing


def test_fewer_than_five_builds_are_refused_naming_what_is_there():
    events = [build(60.0 + i, 100 * (i + 1)) for i in range(MIN_BUILDS - 1)]
    events += [build(0.0, 50, state="disk_hit"), build(0.0, 70, state="compiled"),
               CompileEvent(function="eager kernels", kind="kernels", kernels=9, duration_s=20.0)]
    with pytest.raises(ValueError) as info:
        calibrate(log_of(events), source="short.jsonl")
    text = str(info.value)
    assert f"holds {MIN_BUILDS - 1} NEFF build(s)" in text and f"at least {MIN_BUILDS}" in text
    assert "short.jsonl" in text and "disk_hit 1" in text and "compiled without seconds 1" in text


def test_a_cpu_log_has_nothing_to_calibrate_on():
    events = [CompileEvent(function="f", kind="first", duration_s=1.0) for _ in range(8)]
    with pytest.raises(ValueError, match="no NEFF state 8"):
        calibrate(log_of(events, device="cpu"))


def test_kernel_seconds_come_from_measured_kernels_events_only():
    events = list(linear_log(10.0, 0.1).events)
    events += [CompileEvent(function="eager kernels", kind="kernels", kernels=3, duration_s=6.0),
               CompileEvent(function="eager kernels", kind="kernels", kernels=1, duration_s=4.0),
               CompileEvent(function="eager kernels", kind="kernels", kernels=50, duration_s=0.0),
               CompileEvent(function="eager kernels", kind="kernels", kernels=40, duration_s=99.0,
                            forecast=True)]
    cal = calibrate(log_of(events))
    assert cal.kernel_s == pytest.approx(10.0 / 4) and cal.kernels_measured == 4
    assert calibrate(linear_log(10.0, 0.1)).kernel_s is None


def test_calibrate_opens_a_path_and_flags_a_synthetic_log(tmp_path):
    path = tmp_path / "neuron.jsonl"
    source = linear_log(8.0, 0.02)
    log = CompileLog(header={"format": FORMAT, "version": FORMAT_VERSION, "device": "neuron",
                             "synthetic": True}, path=path)
    for e in source.events:
        log.append(e)
    log.release()
    cal = calibrate(path)
    assert cal.source == "neuron.jsonl" and cal.synthetic and "synthetic" in cal.label
    assert cal.b == pytest.approx(0.02) and cal.to_dict()["builds"] == len(OPS)
