"""``neuronkit doctor`` names the processes holding NeuronCores, from ``neuron-ls --json-output``
(issue 38, item 9), with a fake ``neuron-ls`` on ``PATH``. Its JSON is the Neuron LS User Guide's
``neuron-ls -j`` example (v2.28 docs source: one object per device, ``neuron_processes`` with
``pid`` / ``command`` / ``neuron_runtime_version``)."""
from __future__ import annotations

import json
import os
import re
import stat

import pytest

from neuron_fake import installed_fake
from neuronkit.setup import neuron_cores
from neuronkit.setup.doctor import doctor_report
from neuronkit.setup.neuron_cores import core_ranges, neuron_core_checks, parse_neuron_ls


def device(index, processes, cores=4):
    """One device object as ``neuron-ls -j`` prints it (trn2: 4 logical cores per device)."""
    return {"neuron_device": index, "bdf": "cc:00.0", "cpu_affinity": "48-95,144-191",
            "numa_node": "1", "connected_to": [12, 3, 4, 1], "nc_count": cores,
            "logical_neuroncore_config": 2, "memory_size": 103079215104,
            "neuroncore_ids": list(range(index * cores, (index + 1) * cores)),
            "neuron_processes": processes}


def proc(pid, command):
    return {"pid": pid, "command": command, "neuron_runtime_version": "2.0.0"}


@pytest.fixture
def neuron_ls(monkeypatch, tmp_path):
    """``neuron_ls(stdout, code=0, stderr="", sleep=0)``: a fake neuron-ls, alone on PATH."""
    monkeypatch.setattr(neuron_cores, "NEURON_LS_DEFAULT", str(tmp_path / "not-installed"))
    for var in ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES"):
        monkeypatch.delenv(var, raising=False)

    def make(stdout="", code=0, stderr="", sleep=0):
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        (tmp_path / "out.json").write_text(stdout)
        (tmp_path / "err.txt").write_text(stderr)
        script = bin_dir / "neuron-ls"
        script.write_text(f"#!/bin/sh\n[ \"$1\" = --json-output ] || exit 64\nsleep {sleep}\n"
                          f"cat '{tmp_path / 'out.json'}'\ncat '{tmp_path / 'err.txt'}' >&2\n"
                          f"exit {code}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.defpath}")
        return script

    return make


def _check(text, name="NeuronCores"):
    match = re.search(rf"^  \[(ok  |warn|tip )\] {re.escape(name)} +(.*)$", text, flags=re.M)
    assert match, f"no check {name!r} in:\n{text}"
    return f"{match.group(1).strip()}: {match.group(2)}"


def test_the_doctor_names_the_processes_holding_neuroncores(neuron_ls, tmp_path):
    me = os.getpid()
    neuron_ls(json.dumps([
        device(0, [proc(113985, "neuron-bench exec --run-as-cc-neff --...")]),
        device(1, [proc(me, "/usr/bin/python3 -m ipykernel_launcher \x1b]0;pwned\x07 -f k.json")]),
        device(2, [proc(me, "/usr/bin/python3 -m ipykernel_launcher -f k.json")]),
        device(3, []),
    ]))
    with installed_fake():
        text = doctor_report(cache_dir=tmp_path / "neffs")
    found = _check(text)
    assert found.startswith("warn: in use by pid 113985 (neuron-bench exec --run-as-cc-neff --...)"
                            " on device 0, NeuronCores 0-3; "
                            f"pid {me} (this process: /usr/bin/python3 -m ipykernel_launcher ")
    assert "on devices 1-2, NeuronCores 4-11." in found
    assert "\x1b" not in text and "\x07" not in text and "\\x1b]0;pwned\\x07" in found
    assert "`del model` does not release them" in found and "NEURON_RT_VISIBLE_CORES=0-3" in found


def test_no_process_means_the_cores_are_free(neuron_ls):
    neuron_ls(json.dumps([device(0, []), device(1, [])]))
    [check] = neuron_core_checks("native")
    assert (check.status, check.name) == ("ok", "NeuronCores")
    assert check.text.startswith("neuron-ls lists no process using a Neuron device")


def test_without_neuron_ls_it_says_it_could_not_check(neuron_ls, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    [check] = neuron_core_checks("native")
    assert check.status == "tip" and check.text.startswith(
        "could not check which processes hold NeuronCores: neuron-ls is not on PATH")
    assert neuron_core_checks("") == []  # no Neuron stack, no neuron-ls: nothing to hold cores


@pytest.mark.parametrize("kwargs, why", [
    ({"code": 2, "stderr": "nrt: driver not loaded\nmore"}, "--json-output exited with 2: nrt: "
                                                            "driver not loaded."),
    ({"stdout": "not json"}, "is not the JSON neuronkit reads"),
    ({"stdout": json.dumps({"instance": {}, "devices": []})}, "is not the JSON neuronkit reads"),
    ({"stdout": "[]", "sleep": 5}, "--json-output ran past 0.5 s."),
])
def test_a_failing_or_unknown_neuron_ls_is_reported_not_guessed(neuron_ls, monkeypatch, kwargs,
                                                                 why):
    monkeypatch.setattr(neuron_cores, "NEURON_LS_TIMEOUT_S", 0.5)
    neuron_ls(**kwargs)
    [check] = neuron_core_checks("native")
    assert check.status == "tip" and "could not check which processes hold NeuronCores" in check.text
    assert why in check.text


def test_untrusted_fields_are_type_checked():
    text = json.dumps([
        {"neuron_device": 0, "neuroncore_ids": [0, "1", True, 2],
         "neuron_processes": [{"pid": "7", "command": "x"}, {"pid": True}, {"pid": -1},
                              {"pid": 8, "command": ["not", "text"]}, "junk",
                              {"pid": 9, "command": "y" * 500}]},
        {"neuron_device": "1", "neuron_processes": {"pid": 10}},
    ])
    users = parse_neuron_ls(text)
    assert [(u.pid, u.devices, u.cores) for u in users] == [(8, [0], [0, 2]), (9, [0], [0, 2])]
    assert [u.pid for u in parse_neuron_ls(json.dumps([device(0, [proc(50, "b")]),
                                                       device(1, [proc(4, "a")])]))] == [50, 4]
    assert users[0].command == "" and len(users[1].command) == 120


def test_an_inherited_visible_cores_setting_is_named(neuron_ls, monkeypatch):
    neuron_ls(json.dumps([device(0, [])]))
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "0-3")
    [check] = neuron_core_checks("native")
    assert "NEURON_RT_VISIBLE_CORES=0-3 is set here" in check.text
    assert "backend.py:216-218,263-265" in check.text


@pytest.mark.parametrize("ids, text", [([], ""), ([3], "3"), ([0, 1, 2, 3, 8], "0-3,8"),
                                       ([5, 4, 4, 9, 10], "4-5,9-10")])
def test_core_ranges(ids, text):
    assert core_ranges(ids) == text
