"""model_or_tiny: a local folder, the Hub when it answers, else the embedded model, said plainly."""
from __future__ import annotations

import socket

import pytest

import neuronkit as nk
from neuronkit.setup import hub


class _Connection:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_offline_flag_means_unreachable_without_a_connection(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "create_connection",
                        lambda *a, **k: pytest.fail("no connection may be tried offline"))
    assert hub.hub_reachable() is False


def test_reachable_follows_the_connection_to_the_endpoint(monkeypatch):
    for flag in hub.OFFLINE_FLAGS:
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example:8080")
    asked = []
    monkeypatch.setattr(socket, "create_connection",
                        lambda address, timeout: asked.append((address, timeout)) or _Connection())
    assert hub.hub_reachable(timeout=1.5) is True
    assert asked == [(("mirror.example", 8080), 1.5)]

    def refuse(*args, **kwargs):
        raise socket.gaierror(-2, "Name or service not known")
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert hub.hub_reachable() is False


def test_a_folder_is_used_as_is_and_a_name_falls_back_to_the_tiny_model(monkeypatch, tiny_model_path):
    local = nk.model_or_tiny(tiny_model_path)
    assert (local.path, local.source) == (str(tiny_model_path), "local folder")
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: False)
    offline = nk.model_or_tiny("Qwen/Qwen3-0.6B")
    assert offline.source == "embedded tiny model" and offline.path == str(nk.tiny_model())
    assert "not reachable" in offline.note and "Qwen/Qwen3-0.6B" in offline.note
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: True)
    online = nk.model_or_tiny("Qwen/Qwen3-0.6B")
    assert (online.path, online.source) == ("Qwen/Qwen3-0.6B", "Hugging Face Hub")
    with pytest.raises(ValueError, match="name is empty"):
        nk.model_or_tiny("  ")
