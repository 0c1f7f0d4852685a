"""``doctor_report``: one readable table of versions, devices, cache and known traps."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from helpers.paths import ROOT
from neuron_fake import installed_fake
from neuronkit.setup import doctor_native, neuron_stack
from neuronkit.setup.doctor import doctor_report
from neuronkit.setup.doctor_native import ACCELERATE_NEURON, TRANSFORMERS_NEURON, missing_features


def _row(text: str, label: str) -> str:
    match = re.search(rf"^  {re.escape(label)} +(.*)$", text, flags=re.M)
    assert match, f"no row {label!r} in:\n{text}"
    return match.group(1)


def _check(text: str, name: str) -> str:
    match = re.search(rf"^  \[(ok  |warn|tip )\] {re.escape(name)} +(.*)$", text, flags=re.M)
    assert match, f"no check {name!r} in:\n{text}"
    return f"{match.group(1).strip()}: {match.group(2)}"


@pytest.fixture
def clean_env(clean_env, monkeypatch, tmp_path):
    """The shared clean_env (no Neuron settings), no compile switches, caches not made yet."""
    for var in ("NEURONKIT_CPU_BACKEND", "TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir={tmp_path / 'no-cache-yet'}")
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "no-neffs-yet"))
    monkeypatch.setattr(neuron_stack, "DMI_PRODUCT_NAME", str(tmp_path / "no-dmi"))
    monkeypatch.setattr(neuron_stack, "torch_xla_version", lambda: None)


@pytest.fixture
def native_env(clean_env, monkeypatch, tmp_path):
    """clean_env without NEURON_CC_FLAGS and the native variables, a neuronx-cc on PATH; the
    cache folder is passed."""
    for var in ("NEURON_CC_FLAGS", "TORCH_NEURONX_NEFF_CACHE_DIR"):  # the two clean_env set
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", f"{_executable(tmp_path / 'compiler-bin').parent}:{os.defpath}")
    return tmp_path / "neff-cache"


@pytest.mark.skipif(torch.cuda.is_available(), reason="describes a CPU-only machine")
def test_cpu_machine_says_plainly_no_neuron(no_neuron, clean_env):
    text = doctor_report()
    assert _row(text, "torch") == torch.__version__
    assert _row(text, "torch-neuronx") == "not installed"
    assert _row(text, "neuron") == "NO - no Neuron device found"
    assert _row(text, "device used") == "cpu"
    assert _row(text, "compile backend").startswith("eager (default off Neuron")
    assert "torch-neuronx is not installed" in _row(text, "why")
    assert _check(text, "neuron devices").startswith("warn: no Neuron device found: running on cpu")
    assert _check(text, "device_map='auto'").startswith("ok: it does not see Neuron")
    assert "device_map='cpu'" in _check(text, "device_map='auto'")
    assert _check(text, "Trainer on Neuron").startswith("ok:")
    assert "dynamic=False" in _check(text, "Trainer on Neuron")
    assert _check(text, "generate inputs").startswith("ok: leave input_ids on CPU")
    assert _check(text, "torch.compile").startswith("ok")
    assert "does not exist yet" in _check(text, "compile cache")
    assert text.rstrip().endswith("compile times are not Neuron's.")
    assert ("No Neuron device was found: neuronkit runs on cpu with the 'eager' compile backend"
            in text)


def test_fake_neuron_is_reported(fake_neuron, clean_env):
    text = doctor_report()
    assert _row(text, "neuron") == "yes, 2 device(s)"
    assert _row(text, "device used") == "neuron"
    assert _row(text, "compile backend").startswith("neuron (the Neuron backend")
    assert _row(text, "torch-neuronx") == "0.1.0"  # the contract fake: tn/__init__.py:1
    assert _check(text, "neuron devices") == "ok: 2 found; tensors go to 'neuron' / 'neuron:N'"
    assert "device_map='neuron'" in _check(text, "device_map='auto'")
    assert "Neuron found: neuronkit runs on neuron with the 'neuron' compile backend." in text


@pytest.mark.parametrize("fake_neuron", [0], indirect=True)
def test_neuronx_without_devices(fake_neuron, clean_env):
    text = doctor_report()
    assert _check(text, "neuron devices").startswith("warn: torch-neuronx is installed but sees no")
    assert "neuron-ls" in text
    assert "No Neuron device was found" in text


def test_cache_problems_are_warned(neuron_cache, clean_env):
    text = doctor_report(cache_dir=neuron_cache)
    assert f"{neuron_cache}: 6 graphs (3 ok, 1 failed, 1 locked, 1 empty)" in _row(text, "folder")
    assert _check(text, "failed compiles").startswith("warn: 1 failed entry blocks recompiling")
    assert _check(text, "stale locks").startswith("warn: 1 entry folder(s) locked for over an hour")


def test_healthy_cache_is_ok(tmp_path, clean_env):
    from conftest import write_cache_entry

    write_cache_entry(tmp_path, "ok")
    text = doctor_report(cache_dir=tmp_path)
    assert _check(text, "compile cache") == "ok: no failed entries, no stale locks"
    assert "[warn] failed" not in text


def test_unreadable_cache_argument_does_not_crash(tmp_path, clean_env):
    (tmp_path / "file").write_text("x")
    assert "cannot read: " in _row(doctor_report(cache_dir=tmp_path / "file"), "folder")


def test_environment_traps(monkeypatch, clean_env, no_neuron):
    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")
    monkeypatch.setenv("NEURON_CC_FLAGS", "--cache_dir=/nowhere -O1")
    text = doctor_report()
    assert _check(text, "torch.compile").startswith("warn: TORCH_COMPILE_DISABLE is set")
    flags = _check(text, "NEURON_CC_FLAGS")  # no torch-neuronx here: a note, not a warning
    assert flags.startswith("ok: '--cache_dir=/nowhere -O1' has --cache_dir, an option of the "
                            "XLA-based torch-neuronx")
    assert "TORCH_NEURONX_NEFF_CACHE_DIR" in flags
    for var in ("NEURON_LAUNCH_BLOCKING", "TORCH_NEURONX_METRICS_ENABLED", "instance"):
        assert f"] {var} " not in text  # settings of a stack that is not installed, unset


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU backend applies without CUDA")
def test_bad_cpu_backend_is_a_warning_not_a_crash(monkeypatch, clean_env, no_neuron):
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "nonsense")
    text = doctor_report()
    assert _check(text, "cpu backend").startswith("warn: $NEURONKIT_CPU_BACKEND='nonsense'")
    assert _row(text, "compile backend").startswith("eager")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU backend applies without CUDA")
def test_cpu_backend_from_env_is_credited(monkeypatch, clean_env, no_neuron):
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "aot_eager")
    assert _row(doctor_report(), "compile backend") == "aot_eager (from $NEURONKIT_CPU_BACKEND)"


def test_versions_of_other_packages_come_from_their_metadata(no_neuron, clean_env):
    import accelerate

    text = doctor_report()
    assert _row(text, "accelerate") == accelerate.__version__
    assert _row(text, "neuronx-cc") == "not installed"


# ---- the native stack -----------------------------------------------------------------------

def test_native_stack_rows_and_checks(native_env, monkeypatch):
    monkeypatch.setenv("NEURONKIT_INSTANCE_TYPE", "trn2")
    with installed_fake(instance_type="trn2"):
        text = doctor_report(cache_dir=native_env)
    assert _row(text, "neuron stack").startswith("native torch-neuronx (device 'neuron'")
    assert _row(text, "instance") == "trn2 (from $NEURONKIT_INSTANCE_TYPE)"
    assert _check(text, "instance").startswith("ok: trn2 (from $NEURONKIT_INSTANCE_TYPE): native")
    assert _check(text, "version pairing").startswith("ok: cannot check the pairing")
    assert _check(text, "torch_xla").startswith("ok: not installed")
    assert _check(text, "NEURON_CC_FLAGS").startswith("ok: not set")
    assert "[warn]" not in text


def test_trn1_with_native_neuronx_is_warned_once(native_env, monkeypatch):
    monkeypatch.setenv("NEURONKIT_INSTANCE_TYPE", "trn1")
    with installed_fake(instance_type="trn1"):
        text = doctor_report(cache_dir=native_env)
    found = _check(text, "instance")
    assert found.startswith("warn: trn1 (from $NEURONKIT_INSTANCE_TYPE): native torch-neuronx supports "
                            "Trn2 and Trn3 only")
    assert "XLA-based torch-neuronx" in found
    assert text.count("Trn2 and Trn3 only") == 1  # the detect() warning is not repeated below


def test_mismatched_pair_and_torch_xla_in_the_doctor(native_env, monkeypatch):
    major, minor = torch.__version__.split(".")[:2]
    wrong = f"{major}.{int(minor) + 1}.3.0.9"
    monkeypatch.setattr(neuron_stack, "torch_xla_version", lambda: "2.9.0")
    monkeypatch.setattr(doctor_native, "package_version", lambda dist: {
        "transformers": "5.24.0", "accelerate": "1.15.0"}.get(dist))
    with installed_fake(version=wrong):
        text = doctor_report(cache_dir=native_env)
    pairing = _check(text, "version pairing")
    assert pairing.startswith(f"warn: torch-neuronx {wrong} is built for torch {major}.{int(minor) + 1}")
    assert f"torch {torch.__version__} is installed" in pairing
    assert f"torch-neuronx=={major}.{minor}.*" in pairing
    xla = _check(text, "torch_xla")
    assert xla.startswith("warn: torch-xla 2.9.0 is installed beside the native torch-neuronx")
    assert "Fix: pip uninstall torch-xla in this environment" in xla


@pytest.mark.parametrize("value, words", [
    ("1", ["'1' = sync mode", "inside Dynamo's compile time",
           "eager ops bypass the C++ compilation cache", "counts their kernels from that "
           "process-global dict", "not told apart per kernel"]),
    ("0", ["'0' = async mode", "NEFF builds finish on a worker thread after Dynamo returns"]),
    ("true", ["'true' = async mode", "'1' gives sync mode"]),  # only exactly "1" is sync
])
def test_launch_blocking_mode(native_env, monkeypatch, value, words):
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", value)
    with installed_fake():
        found = _check(doctor_report(cache_dir=native_env), "NEURON_LAUNCH_BLOCKING")
    assert found.startswith("ok: ")
    for word in words:
        assert word in found


def test_launch_blocking_follows_what_the_import_of_each_build_sets(native_env, monkeypatch):
    """Importing torch_neuronx sets the build's default with setdefault (tn/__init__.py:46): a
    RELEASE build runs sync unless told otherwise, a DEV build async. The fake has no package
    folder to read the build type from (tests/setup/test_doctor_modes.py reads a real file)."""
    with installed_fake():  # RELEASE, as the wheels are
        found = _check(doctor_report(cache_dir=native_env), "NEURON_LAUNCH_BLOCKING")
    assert found.startswith("ok: '1' = sync mode")
    assert "unsetting it does not help: RELEASE builds default to '1'" in found
    with installed_fake(build_type="DEV"):
        found = _check(doctor_report(cache_dir=native_env), "NEURON_LAUNCH_BLOCKING")
    assert found.startswith("ok: '0' = async mode")


def test_launch_blocking_is_shown_without_neuronx_only_when_set(clean_env, no_neuron,
                                                                 monkeypatch):
    assert "NEURON_LAUNCH_BLOCKING" not in doctor_report()
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "1")
    assert _check(doctor_report(), "NEURON_LAUNCH_BLOCKING").startswith("ok: '1' = sync mode")


@pytest.mark.parametrize("value, start", [
    (None, "tip: not set: torch-neuronx keeps no cache hit/miss counters"),
    ("0", "tip: '0' (off): torch-neuronx keeps no cache hit/miss counters"),
    *[(v, f"ok: {v!r}: kernel compiles are counted and timed")
      for v in ("1", "true", "TRUE", "yes", "YES")],
    ("True", "warn: 'True' does not turn metrics on"),
    ("on", "warn: 'on' does not turn metrics on"),
])
def test_metrics_switch(native_env, monkeypatch, value, start):
    if value is not None:
        monkeypatch.setenv("TORCH_NEURONX_METRICS_ENABLED", value)
    with installed_fake():
        found = _check(doctor_report(cache_dir=native_env), "TORCH_NEURONX_METRICS_ENABLED")
    assert found.startswith(start)
    if not start.startswith("ok"):
        assert "export TORCH_NEURONX_METRICS_ENABLED=1" in found
        assert "1/true/TRUE/yes/YES" in found
    if start.startswith("tip"):  # _get_compilation_cache_entries() works with metrics off
        assert ("compile times are kept all the same: each in-memory cache entry carries its "
                "build time") in found


def test_sync_mode_fix_is_to_set_0_not_to_unset_it(native_env, monkeypatch):
    """A RELEASE build defaults NEURON_LAUNCH_BLOCKING to "1" (``_build_config.py``) and its
    import sets it (``setdefault``): unsetting it changes nothing, "0" gives async mode."""
    found = doctor_native.launch_blocking_check(
        {"NEURON_LAUNCH_BLOCKING": "1"}, build=("RELEASE", "BUILD_TYPE read from its file")).text
    assert "For async mode: export NEURON_LAUNCH_BLOCKING=0 before starting Python" in found
    assert "unsetting it does not help: this build's default is '1'" in found
    dev = doctor_native.launch_blocking_check(
        {"NEURON_LAUNCH_BLOCKING": "1"}, build=("DEV", "BUILD_TYPE read from its file")).text
    assert "For async mode: unset it, or export NEURON_LAUNCH_BLOCKING=0" in dev


@pytest.mark.parametrize("flags, start, words", [
    ("-O1 --enable-fast-math", "ok: '-O1 --enable-fast-math': native torch-neuronx passes it "
     "straight to neuronx-cc, split on whitespace", ["part of the compile-cache key"]),
    ("--model-type='transformer", "warn: \"--model-type='transformer\" cannot be parsed",
     ["split on whitespace (no quoting)", "Fix: balance or drop the quotes"]),
    ("--flag='a b'", "warn: \"--flag='a b'\" uses quotes", ["drop the quotes"]),
    ("--cache_dir=/data/cache -O1", "warn: '--cache_dir=/data/cache -O1' has --cache_dir",
     ["XLA-based torch-neuronx", "native NEFF cache ignores",
      "set TORCH_NEURONX_NEFF_CACHE_DIR to a writable folder (default /tmp/neff_cache)"]),
])
def test_neuron_cc_flags_on_native(native_env, monkeypatch, flags, start, words):
    monkeypatch.setenv("NEURON_CC_FLAGS", flags)
    with installed_fake():
        found = _check(doctor_report(cache_dir=native_env), "NEURON_CC_FLAGS")
    assert found.startswith(start)
    for word in words:
        assert word in found


def test_disabled_neff_cache_is_warned(native_env, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_DISABLE_CACHE", "1")
    with installed_fake():
        found = _check(doctor_report(cache_dir=native_env), "neff cache")
    assert found.startswith("warn: TORCH_NEURONX_NEFF_DISABLE_CACHE=1")
    assert "Fix: unset TORCH_NEURONX_NEFF_DISABLE_CACHE" in found


def test_unwritable_cache_fix_names_the_native_folder(native_env, monkeypatch, tmp_path):
    folder = tmp_path / "read-only"
    folder.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != folder
                        and real_access(path, mode))  # chmod does not stop root
    with installed_fake():
        found = _check(doctor_report(cache_dir=folder), "compile cache")
        missing = _check(doctor_report(cache_dir=folder / "a" / "b"), "compile cache")
    assert found.startswith(f"warn: {folder} is not writable")
    assert "set TORCH_NEURONX_NEFF_CACHE_DIR to a writable folder (default /tmp/neff_cache)" in found
    assert missing.startswith(f"warn: {folder / 'a' / 'b'} cannot be created ({folder} is not")
    assert "TORCH_NEURONX_NEFF_CACHE_DIR" in missing


# ---- transformers / accelerate versions ---------------------------------------------------------

def test_old_transformers_and_accelerate_name_what_is_missing(clean_env, no_neuron, monkeypatch):
    monkeypatch.setattr(doctor_native, "package_version",
                        {"transformers": "5.10.0", "accelerate": "1.12.0"}.get)
    text = doctor_report()
    trainer = _check(text, "Trainer on Neuron")
    assert trainer.startswith("warn: transformers 5.10.0 lacks Neuron paths neuronkit uses: ")
    assert "torch_compile_backend='neuron'" in trainer and "(from 5.14.0)" in trainer
    assert "DistributedConfig" in trainer and "(from 5.16.1)" in trainer
    assert "is_torch_neuron_available" not in trainer  # 5.10 has that one (from 5.4.0)
    assert "Fix: pip install 'transformers>=5.16.1,<6'" in trainer
    accel = _check(text, "accelerate")
    assert accel.startswith("warn: accelerate 1.12.0 lacks") and "(from 1.13.0)" in accel
    assert "Fix: pip install 'accelerate>=1.13.0'" in accel


def test_missing_or_unreadable_library_versions(clean_env, no_neuron, monkeypatch):
    monkeypatch.setattr(doctor_native, "package_version",
                        {"transformers": "not-a-version"}.get)
    text = doctor_report()
    assert _check(text, "Trainer on Neuron").startswith(
        "ok: transformers not-a-version: cannot check its Neuron paths")
    assert _check(text, "accelerate").startswith("warn: accelerate is not installed. Fix: pip "
                                                 "install 'accelerate>=1.13.0'")
    assert missing_features("5.16.1", TRANSFORMERS_NEURON) == []
    assert missing_features("5.17.0.dev0", TRANSFORMERS_NEURON) == []
    assert [v for v, _ in missing_features("5.3.0", TRANSFORMERS_NEURON) or []] == \
        ["5.4.0", "5.14.0", "5.15.0", "5.16.1"]


def test_pyproject_lower_bounds_are_the_versions_the_doctor_needs():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = ROOT / "pyproject.toml"
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    assert f"transformers>={TRANSFORMERS_NEURON[-1][0]},<6" in deps
    assert f"accelerate>={ACCELERATE_NEURON[-1][0]}" in deps


# ---- values from the environment reach the terminal filtered ------------------------------------
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\u202e\r\n  [ok  ] all good"
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                      "\u2028\u2029]")


def _assert_filtered(text: str) -> None:
    assert not CONTROLS.search(text), repr(text)
    assert not any(line.lstrip().startswith("[ok  ] all good") for line in text.splitlines())


def test_environment_values_reach_the_report_without_escapes(clean_env, no_neuron, monkeypatch,
                                                             tmp_path):
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir={tmp_path / ('cache' + HOSTILE)}")
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "eager" + HOSTILE)
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", HOSTILE)
    text = doctor_report(cache_dir=tmp_path / ("given" + HOSTILE))  # `doctor --cache-dir`
    _assert_filtered(text)
    assert f"{tmp_path / 'given'}" in _row(text, "folder")  # shown, its controls dropped


def test_native_settings_reach_the_report_without_escapes(native_env, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / ("neffs" + HOSTILE)))
    monkeypatch.setenv("TORCH_NEURONX_METRICS_ENABLED", HOSTILE)
    monkeypatch.setenv("NEURON_CC_FLAGS", "-O1 " + HOSTILE)
    monkeypatch.setenv("NEURONKIT_INSTANCE_TYPE", "trn2" + HOSTILE)
    with installed_fake(instance_type="trn2"):
        text = doctor_report()
    _assert_filtered(text)
    assert f"{tmp_path / 'neffs'}" in _row(text, "folder")


# ---- the compiler, the install command, the lock files ------------------------------------------

def _executable(folder: Path, name: str = "neuronx-cc") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_neuronx_cc_must_be_on_path(native_env, monkeypatch, tmp_path):
    """torch-neuronx runs the compiler by name: execvp searches PATH (NeuronCompiler.cpp)."""
    compiler = _executable(tmp_path / ("bin" + HOSTILE))
    monkeypatch.setenv("PATH", f"{tmp_path / 'empty'}:{compiler.parent}")
    with installed_fake():
        text = doctor_report(cache_dir=native_env)
    _assert_filtered(text)
    found = _check(text, "neuronx-cc")
    assert found.startswith(f"ok: {tmp_path / 'bin'}")  # shown, its control characters dropped
    assert "runs it by name" in found
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with installed_fake():
        found = _check(doctor_report(cache_dir=native_env), "neuronx-cc")
    assert found.startswith("warn: not on PATH: torch-neuronx runs neuronx-cc by name (execvp)")
    assert "every NEFF build fails" in found
    assert "Fix: pip install 'neuronx-cc==2.*' --extra-index-url=https://pip.repos." in found


def test_neuronx_cc_installed_but_not_on_path_says_where_to_look(native_env, monkeypatch,
                                                                 tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(doctor_native, "package_version",
                        {"neuronx-cc": "2.23.1.0", "transformers": "5.24.0",
                         "accelerate": "1.15.0"}.get)
    with installed_fake():
        found = _check(doctor_report(cache_dir=native_env), "neuronx-cc")
    assert found.startswith("warn: not on PATH: torch-neuronx runs neuronx-cc by name")
    assert "neuronx-cc 2.23.1.0 is installed, but its command is not on PATH" in found
    assert "activate the environment" in found


def test_install_fix_is_the_neuron_2_33_command(clean_env, no_neuron):
    found = _check(doctor_report(), "neuron devices")
    assert found.startswith("warn: no Neuron device found: running on cpu")
    for word in ("pip install 'torch-neuronx==2.", "'neuronx-cc==2.*' nki",
                 "--extra-index-url=https://pip.repos.neuron.amazonaws.com",
                 "--extra-index-url=https://download.pytorch.org/whl/cpu",
                 "Python 3.12, 3.13 or 3.14"):
        assert word in found


def test_lock_checks_agree_with_the_summary_and_never_call_a_held_lock_stale(
        native_env, monkeypatch, tmp_path):
    """An old lock file nobody holds is a normal leftover; a held one is a build in progress,
    however old its file (lock files are reused, FileLock.cpp:87): the doctor names it, says what
    torch-neuronx's waiters do, and neither warns nor says to stop its holder."""
    import fcntl
    import time

    from neuron_fake import NativeCacheWriter, native_key

    writer = NativeCacheWriter.under(tmp_path / "native")
    monkeypatch.setenv("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", str(writer.local_cache_dir))
    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", raising=False)
    writer.neff()
    day_ago = time.time() - 86400
    leftover = writer.lock(native_key("finished yesterday"), day_ago)
    held = writer.lock(native_key("taken again by a build just now"), day_ago)
    with installed_fake():
        text = doctor_report(cache_dir=writer.cache_dir)
        with open(held) as holder:
            fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
            held_text = doctor_report(cache_dir=writer.cache_dir)
    assert leftover.exists()
    assert "2 lock files (0 held: a build in progress)" in _row(text, "folder")
    assert "held locks" not in text and "stale" not in text
    assert _check(text, "lock files").startswith(
        "ok: 2 lock files, 0 held now; 2 old ones no process holds: normal leftovers of finished "
        "compiles")
    assert "2 lock files (1 held: a build in progress)" in _row(held_text, "folder")
    found = _check(held_text, "held locks")
    assert found.startswith(f"ok: 1 lock held now, held by pid {os.getpid()} (this process)")
    assert "a NEFF build in progress" in found and str(held) in found
    assert "after 1200 s (TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT, the default) counted from the " \
        "start of their own wait" in found
    assert "stale" not in held_text and "fuser" not in held_text and "stop" not in found
    assert _check(held_text, "lock files").startswith("ok: 2 lock files, 1 held now; 1 old one")
