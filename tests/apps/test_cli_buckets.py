"""``neuronkit buckets TRAFFIC``: the table and the chosen plan, --json, --png, prices, hostile
traffic files (exit 2 with a clear message when nothing is usable)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import neuronkit as nk
from neuronkit.apps.cli import main
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.workloads.traffic import read_traffic

SAMPLE = str(Path(__file__).resolve().parents[2] / "notebooks" / "data" / "sample_traffic.jsonl")


def test_sample_prints_table_and_the_plan_buckets_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["buckets", SAMPLE]) == 0
    out = capsys.readouterr().out
    expected = nk.plan_buckets(read_traffic(SAMPLE).prompt, max_buckets=8, compile_cost_s=60.0,
                               token_cost_s=1e-3, graphs_per_bucket=2)
    assert f"chosen plan (nk.plan_buckets at these prices): {expected!r}" in out
    rows = [line for line in out.splitlines() if re.match(r"^[* ]\s+\d+\s", line)]
    assert [int(line.lstrip("* ").split()[0]) for line in rows] == list(range(1, 9))
    marked = [line for line in rows if line.startswith("*")]
    assert len(marked) == 1 and ",".join(map(str, expected)) in marked[0]
    assert "10,000 requests" in out and "assumed" in out


def test_json_png_and_a_measured_price(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = CompileLog([CompileEvent(seq=i, function="f", duration_s=1.0, neff_compile_s=s,
                                   neff_cache="compiled") for i, s in enumerate([100.0, 300.0, 200.0])])
    price = log.save(tmp_path / "neuron.jsonl")
    png = tmp_path / "chart.png"
    assert main(["buckets", SAMPLE, "--json", "--max-buckets", "4", "--batch-sizes", "1,4",
                 "--price-log", str(price), "--png", str(png), "--max-len", "2048"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["format"] == "neuronkit-buckets" and data["compile_cost_s"] == 200.0
    assert "median of 3 NEFF build" in data["price_source"]
    assert [len(r["buckets"]) for r in data["rows"]] == [1, 2, 3, 4]
    expected = nk.plan_buckets([min(n, 2048) for n in read_traffic(SAMPLE).prompt], max_buckets=4,
                               compile_cost_s=200.0, token_cost_s=1e-3, graphs_per_bucket=4)
    assert data["chosen"] == list(expected)
    assert data["rows"][0]["overflow"] > 0 and data["traffic"]["requests"] == 10_000
    assert png.read_bytes()[:4] == b"\x89PNG" and "chart written" in captured.err


def test_hostile_file_warns_and_plans_the_rest(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"prompt_tokens": 100}\n\x00\xff junk\n{"prompt_tokens": 1e999}\n'
                     b'{"prompt_tokens": 300, "output_tokens": 5}\n')
    assert main(["buckets", str(path)]) == 0
    captured = capsys.readouterr()
    assert "2 bad line(s)" in captured.err and "line 2:" in captured.err
    assert "2 requests" in captured.out


def test_all_bad_exits_2_with_a_clear_message(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\n" + b'{"prompt_tokens": -5}\n')
    assert main(["buckets", str(path)]) == 2
    err = capsys.readouterr().err
    assert "neuronkit buckets: error:" in err and "no usable request lengths" in err
    assert main(["buckets", str(tmp_path / "missing.jsonl")]) == 2


class _FakeServer:
    """The agreed interface of neuronkit.advice.server_buckets (H8's), recording its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def render(self, plan_buckets: list[int], form: str, *, batch_sizes: list[int] | None,
               max_len: int, decode_buckets: list[int] | None = None) -> str:
        self.calls.append(("render", (plan_buckets, form, batch_sizes, max_len, decode_buckets)))
        return f"RENDERED {form} {plan_buckets}"

    def parse_config(self, text: str) -> str:
        self.calls.append(("parse", text))
        return text

    def check_config(self, prompt_lengths: list[int], total_lengths: list[int], config: str,
                     planned: list[int]) -> object:
        self.calls.append(("check", (prompt_lengths, total_lengths, config, planned)))
        return type("Report", (), {"text": lambda self: "CHECKED",
                                   "to_dict": lambda self: {"checked": True}})()


def test_for_and_check_call_the_server_functions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    import neuronkit.advice

    fake = _FakeServer()
    monkeypatch.setitem(sys.modules, "neuronkit.advice.server_buckets", fake)
    monkeypatch.setattr(neuronkit.advice, "server_buckets", fake, raising=False)
    path = tmp_path / "t.jsonl"
    path.write_text('{"prompt_tokens": 10, "output_tokens": 5}\n{"prompt_tokens": 90, '
                    '"output_tokens": 30}\n')
    config = tmp_path / "config.txt"
    config.write_text("64,128,256")
    assert main(["buckets", str(path), "--for", "nxdi", "--check", str(config),
                 "--batch-sizes", "2"]) == 0
    out = capsys.readouterr().out
    assert "RENDERED nxdi" in out and "CHECKED" in out
    (_, (planned, form, sizes, max_len, decode)), (_, text), (_, checked) = fake.calls
    assert form == "nxdi" and sizes == [2] and max_len == 120 and max(decode) == 120
    assert text == "64,128,256" and checked == ([10, 90], [15, 120], "64,128,256", planned)
    assert main(["buckets", str(path), "--for", "hf", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["server"]["text"].startswith("RENDERED hf")


def test_for_and_check_with_the_real_server_module(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("neuronkit.advice.server_buckets")
    for form in ("hf", "vllm-neuron", "nxdi"):
        assert main(["buckets", SAMPLE, "--for", form, "--max-buckets", "4"]) == 0
    assert main(["buckets", SAMPLE, "--check", "64,128,256,512,1024,2048,4096,8192"]) == 0
    assert capsys.readouterr().out
