"""Per build, what its cache key is made of: torch's FX graph / AOTAutograd cache artifacts on CPU,
torch-neuronx's NEFF key through the contract fake; kept once per key in the log."""
from __future__ import annotations

import json

import pytest
import torch

import neuronkit as nk
from neuron_fake import installed_fake
from neuron_fake.keys import final_key, graph_base_key
from neuronkit.log.compile_log import CompileLog
from neuronkit.sources.cache_keys import lookup_of, neff_parts, parts_of


def _payload(key: str, state: str, components: list[str]) -> str:
    return json.dumps({"key": key, "cache_state": state, "components": components})


def test_a_cache_artifact_is_a_lookup_whose_parts_are_kept():
    lookup = lookup_of("fx_graph_cache_miss", _payload(
        "fkey1", "miss", ["[abc123] gm: def forward(self):\n    return 1",
                          "[def456] inductor_config[freezing]: False"]))
    assert lookup == {"cache": "fx_graph", "key": "fkey1", "state": "miss"}
    cache, parts = parts_of("fkey1")
    assert cache == "fx_graph"
    assert parts == {"gm": ("abc123", "def forward(self):\n    return 1"),
                     "inductor_config[freezing]": ("def456", "False")}
    bypass = lookup_of("aotautograd_cache_bypass", lambda: json.dumps(
        {"cache_bypass_reason": "Cannot cache a graph with freezing enabled"}))
    assert bypass == {"cache": "aot_autograd", "key": None, "state": "bypass",
                      "reason": "Cannot cache a graph with freezing enabled"}
    assert lookup_of("inductor_post_grad_graph", "{}") is None


@pytest.mark.parametrize("flags", [None, "", "-O1 --enable-fast-loading=true"])
def test_the_neff_key_names_its_parts(flags):
    """The key's own text gives target, logical cores, opt level and NEURON_CC_FLAGS
    (core/KernelExecution.cpp:25-57,151-179), the flags as the environment wrote them."""
    env = {"NEURON_LOGICAL_NC_CONFIG": "1"} if flags is None else {"NEURON_CC_FLAGS": flags}
    base = graph_base_key("module", [((2, 3), "torch.float32")])
    key = final_key(base, "trn2", "-O2", env)
    parts = {name: text for name, (_, text) in neff_parts(key, env).items()}
    assert parts["graph"] == base and parts["target"] == "trn2" and parts["opt level"] == "-O2"
    assert parts["logical cores"] == ("1" if flags is None else "2")
    assert parts["NEURON_CC_FLAGS"] == {None: "(unset)", "": "''"}.get(flags, flags)
    assert neff_parts("aten::add.Tensor_t0_(2, 3)_torch.float32_trn2_2_O1_x") is None


def test_a_neff_lookup_names_its_persistent_key_and_flags(clean_env, tmp_path, monkeypatch):
    """Through the fake: each graph's NEFF lookup (key, state, the file's persistent key) is set
    at the safe point, and two runs with other NEURON_CC_FLAGS differ in that part alone."""
    described = []
    for flags in ("-O1", "-O2"):
        monkeypatch.setenv("NEURON_CC_FLAGS", flags)
        with installed_fake(build_type="DEV") as fake:
            fake.plan("compiled", duration_s=30.0)
            fn = torch.compile(lambda x: (x * 2).sum(), backend="neuron", dynamic=False)
            with nk.CompileRecorder(tmp_path / f"{flags}.jsonl") as rec:
                fn(torch.ones(3))
            stored = set(fake.disk)  # the persistent cache, by persistent key
        log = CompileLog.load(tmp_path / f"{flags}.jsonl")
        (built,) = [e for e in log.events if e.kind == "first"]
        (neff,) = [lk for lk in built.cache_key if lk["cache"] == "neff"]
        assert neff["state"] == "compiled" and len(neff["persistent_key"]) == 32
        assert neff["persistent_key"] in stored
        assert neff["key"] == built.metrics["neff_keys"][0]
        described.append(log.key_parts.described(neff["key"]))
        assert rec.log.events[0].cache_key == built.cache_key
    assert {n for n in described[0] if described[0][n] != described[1][n]} == {"NEURON_CC_FLAGS"}
    assert (described[0]["NEURON_CC_FLAGS"], described[1]["NEURON_CC_FLAGS"]) == ("-O1", "-O2")


def test_a_neuron_log_header_names_the_compiler_version(clean_env, monkeypatch):
    """The NEFF key holds no compiler version, so the header keeps it for ``diff`` to compare."""
    from neuronkit.recorder import header

    monkeypatch.setattr(header, "package_version", lambda dist: {"neuronx-cc": "2.21.1"}.get(dist))
    with installed_fake():
        assert header.default_header()["neuronx_cc"] == "2.21.1"
    assert "neuronx_cc" not in header.default_header()  # no torch-neuronx: not asked
