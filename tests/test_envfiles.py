"""environment.yml (local conda) and binder/environment.yml must not drift apart."""
from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from helpers.paths import ROOT

LOCAL, BINDER = ROOT / "environment.yml", ROOT / "binder" / "environment.yml"
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
PYPROJECT = (ROOT / "pyproject.toml").read_text()  # read with re: tomllib needs Python 3.11


def _pip_line(line: str, base: Path) -> str:
    """A pip requirement line with local paths made absolute (conda runs pip in the file's dir)."""
    for flag in ("-c ", "-r ", "-e "):
        if line.startswith(flag):
            target, extras = re.fullmatch(r"(.+?)(\[[^\]]*\])?", line[len(flag):].strip()).groups()
            return f"{flag}{(base / target).resolve()}{extras or ''}"
    return line


def signature(text: str, base: Path) -> dict:
    """What the environment installs, independent of where the file sits."""
    env = yaml.safe_load(text)
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return {"name": env["name"], "channels": env["channels"], "conda": conda,
            "pip": [_pip_line(line, base) for line in pip]}


def test_binder_environment_matches_the_local_one():
    local = signature(LOCAL.read_text(), LOCAL.parent)
    binder = signature(BINDER.read_text(), BINDER.parent)
    assert binder == local


def test_the_check_catches_drift():
    text = BINDER.read_text()
    base = signature(text, BINDER.parent)
    for old, new in [("python=3.11", "python=3.12"), ("-c ../constraints.txt", "-c constraints.txt"),
                     ("[notebooks]", ""), ("conda-forge", "defaults")]:
        assert old in text, old
        assert signature(text.replace(old, new), BINDER.parent) != base, (old, new)


def test_pip_section_installs_this_project_with_the_cpu_torch():
    env = signature(LOCAL.read_text(), LOCAL.parent)
    assert CPU_INDEX in env["pip"]  # torch==2.13.0 from constraints resolves to the +cpu build
    assert f"-c {ROOT / 'constraints.txt'}" in env["pip"] and (ROOT / "constraints.txt").is_file()
    editable = [line for line in env["pip"] if line.startswith("-e ")]
    assert editable == [f"-e {ROOT}[notebooks]"]
    extras = PYPROJECT.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    assert re.search(r"^notebooks\s*=", extras, flags=re.M)


def test_python_version_is_one_the_package_supports():
    minimum = re.search(r'^requires-python\s*=\s*">=(\d+)\.(\d+)"', PYPROJECT, flags=re.M).groups()
    python = next(d for d in signature(LOCAL.read_text(), ROOT)["conda"] if d.startswith("python="))
    version = tuple(int(x) for x in python.removeprefix("python=").split(".")[:2])
    assert version >= tuple(int(x) for x in minimum)


def test_postbuild_installs_the_package_and_stops_on_errors():
    post = ROOT / "binder" / "postBuild"
    lines = [ln.strip() for ln in post.read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert post.read_text().startswith("#!/bin/bash")
    assert os.access(post, os.X_OK)
    assert lines[0] == "set -e"  # before any command
    assert any(re.search(r"pip install .*-e \.(\s|$)", ln) for ln in lines)
