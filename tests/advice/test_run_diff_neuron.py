"""``diff_logs`` on two runs through the contract fake of torch-neuronx: a changed
``NEURON_CC_FLAGS`` is named as the reason the second run built its NEFF again."""
from __future__ import annotations

import torch

import neuronkit as nk
from neuron_fake import installed_fake
from neuronkit.advice.run_diff import diff_logs
from neuronkit.views.diff_text import diff_text


def _run(path, monkeypatch, flags: str | None, state: str) -> None:
    if flags is None:
        monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    else:
        monkeypatch.setenv("NEURON_CC_FLAGS", flags)
    with installed_fake(build_type="DEV") as fake:
        fake.plan(state, duration_s=30.0)
        fn = torch.compile(lambda x: (x * 2).sum(), backend="neuron", dynamic=False)
        with nk.CompileRecorder(path):
            fn(torch.ones(4))
    torch._dynamo.reset()


def test_a_changed_neuron_cc_flags_is_named(clean_env, tmp_path, monkeypatch):
    _run(tmp_path / "a.jsonl", monkeypatch, "--optlevel=1", "compiled")
    _run(tmp_path / "b.jsonl", monkeypatch, "--optlevel=2", "compiled")
    d = diff_logs(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert len(d.same) == 1 and d.same[0].state_b == "built"
    [r] = d.rebuilt
    assert r.words == ("NEURON_CC_FLAGS '--optlevel=1' -> '--optlevel=2'",)
    assert "NEURON_CC_FLAGS '--optlevel=1' -> '--optlevel=2'" in diff_text(d)
