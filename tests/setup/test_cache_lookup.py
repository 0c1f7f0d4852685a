"""Where a cache key's entry lives (inductor's FX graph / AOTAutograd caches, the native NEFF
cache) and whether a folder holds it: fake folders built from the layouts checked against torch
2.13 and the torch-neuronx snapshot (see neuronkit/setup/cache_lookup.py)."""
from __future__ import annotations

import getpass
import tempfile
from pathlib import Path

import pytest

from neuronkit.setup.cache_lookup import cache_dir_for, entry_path, find_entry, inductor_cache_dir

FX = "frjfklwtymvlylugkbjwjtgm6jphfxaxovdtuffz37yuis2x6axb"  # a real FX key (torch 2.13, CPU)
AOT = "arjwynqgwpmqqafdwqdx25vu2vkbmtizqzcibyla4cn2ile4hmo4"
PK = "0123456789abcdef0123456789abcdef"


def put(path: Path, data: bytes = b"entry") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_entry_paths_follow_the_layouts(tmp_path):
    assert entry_path("fx_graph", tmp_path, FX) == tmp_path / "fxgraph" / "rj" / FX
    assert entry_path("aot_autograd", tmp_path, AOT) == tmp_path / "aotautograd" / AOT
    assert entry_path("neff", tmp_path, PK) == tmp_path / "01" / "23" / f"{PK}.neff"


@pytest.mark.parametrize("cache,key", [("fx_graph", "../../etc"), ("fx_graph", "f/x"),
                                       ("neff", PK.upper()), ("neff", "../" + PK[3:]),
                                       ("neff", PK + "0"), ("other", FX)])
def test_a_key_that_could_leave_the_folder_is_not_looked_up(tmp_path, cache, key):
    assert entry_path(cache, tmp_path, key) is None
    entry = find_entry(cache, tmp_path, key)
    assert not entry.found and entry.path is None and entry.note.startswith("not ")


def test_fx_entry_found_only_with_a_readable_entry_file(tmp_path):
    folder = tmp_path / "fxgraph" / "rj" / FX
    assert not find_entry("fx_graph", tmp_path, FX).found  # nothing at all
    put(folder / ".123.456.tmp")  # write_atomic's temp file: torch skips it
    put(folder / "empty", b"")
    entry = find_entry("fx_graph", tmp_path, FX)
    assert not entry.found and entry.note == "no entry for its key" and entry.path == folder
    put(folder / "zaw63p4afprz3p3ez4ipv7qf5jnxkincxqev6i4inil77im2tbb")
    assert find_entry("fx_graph", tmp_path, FX).found
    put(folder / "second")
    assert find_entry("fx_graph", tmp_path, FX).note == "2 version(s) stored"


def test_an_fx_key_in_another_shard_is_not_found(tmp_path):
    put(tmp_path / "fxgraph" / "fr" / FX / "entry")  # key[0:2]: the wrong shard
    assert not find_entry("fx_graph", tmp_path, FX).found


def test_aot_entry(tmp_path):
    assert not find_entry("aot_autograd", tmp_path, AOT).found
    put(tmp_path / "aotautograd" / AOT / "entry")
    assert find_entry("aot_autograd", tmp_path, AOT).found


def test_neff_entry_found_only_when_not_empty(tmp_path):
    entry = find_entry("neff", tmp_path, PK)
    assert not entry.found and entry.note == "no NEFF file for its key"
    path = put(tmp_path / "01" / "23" / f"{PK}.neff", b"")
    entry = find_entry("neff", tmp_path, PK)
    assert not entry.found and "empty" in entry.note  # C++ reads size 0 as a miss
    path.write_bytes(b"NEFF")
    assert find_entry("neff", tmp_path, PK).found
    put(tmp_path / PK[:2] / f"{PK}.neff")  # the wrong depth is not its place
    assert entry_path("neff", tmp_path, PK) == path


def test_default_folders_follow_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "ind"))
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    assert cache_dir_for("fx_graph") == (tmp_path / "ind", "from TORCHINDUCTOR_CACHE_DIR")
    assert cache_dir_for("aot_autograd")[0] == tmp_path / "ind"
    assert cache_dir_for("neff") == (tmp_path / "neff", "from TORCH_NEURONX_NEFF_CACHE_DIR")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_DIR")
    path, why = inductor_cache_dir()
    assert path == Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"
    assert why == "the inductor default"
    assert cache_dir_for("neff") == (Path("/tmp/neff_cache"), "the torch-neuronx default")


def test_inductor_default_matches_torch(monkeypatch):
    cache_dir_utils = pytest.importorskip("torch._inductor.runtime.cache_dir_utils")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert inductor_cache_dir()[0] == Path(cache_dir_utils.default_cache_dir())
