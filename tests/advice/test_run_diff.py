"""``diff_logs``: graphs matched across two runs (ranks, multisets, dtypes), built or loaded, the
seconds that moved, new reasons and breaks, and the parts of a cache key that differ, in words;
the text, JSON data and HTML of a diff (``views/diff_text.py``)."""
from __future__ import annotations

from typing import Any

import pytest

from neuronkit.advice.key_diff import BUILT, LOADED, UNKNOWN, build_state, part_words
from neuronkit.advice.run_diff import diff_logs
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import NEURONX_FIELD
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.diff_text import diff_data, diff_html, diff_text

TENSOR = ("TensorMetadata(dtype=torch.{dtype}, shape=torch.Size([{dims}]), stride=(8, 1), "
          "device=device(type='cpu'), layout=torch.strided, requires_grad=False)")


def ev(function: str = "f", shapes: dict[str, list[Any]] | None = None, kind: str = "first",
       dur: float = 1.0, rank: int = 0, lookups: list[dict[str, Any]] | None = None,
       dtypes: dict[str, str] | None = None, reasons: tuple[str, ...] = (),
       location: str = "/src/model.py:10", neff_s: float | None = None,
       backend: str = "inductor") -> CompileEvent:
    return CompileEvent(function=function, location=location, kind=kind,  # type: ignore[arg-type]
                        duration_s=dur, rank=rank, input_shapes=shapes or {"x": [4, 8]},
                        cache_key=lookups or [], reasons=list(reasons), backend=backend,
                        metrics={"input_dtypes": dtypes} if dtypes else {},
                        neff_compile_s=neff_s)


def log_of(*events: CompileEvent, **header: Any) -> CompileLog:
    return CompileLog(events, header={"format": FORMAT, "version": FORMAT_VERSION,
                                      "torch": "2.13.0", **header})


def fx(state: str, key: str | None = "k", **more: Any) -> list[dict[str, Any]]:
    return [{"cache": "fx_graph", "key": key, "state": state, **more}]


def neff(state: str, key: str = "n") -> list[dict[str, Any]]:
    return [{"cache": "neff", "key": key, "persistent_key": "0" * 32, "state": state}]


def fx_parts(log: CompileLog, key: str, **parts: str) -> None:
    """Parts of an FX graph key: name -> text (its digest is the text itself, as torch's
    digests differ where the texts do)."""
    base = {"torch_version": "\x00\x7fhash", "inductor_config[freezing]": "False",
            "example_inputs[0]": TENSOR.format(dtype="float32", dims="4, 8"),
            "gm": "<lambda>()\n\ndef forward(self, arg0_1):\n    mul = arg0_1 * 2\n    return (mul,)"}
    base.update({name.replace("__", "[").replace("_I", "]"): text for name, text in parts.items()})
    log.add_key_parts("fx_graph", key, {n: ("d:" + t, t) for n, t in base.items()})


# ---- matching ----------------------------------------------------------------------------------

def test_graphs_match_as_multisets():
    a = log_of(ev(), ev(), ev(shapes={"x": [2, 8]}))
    b = log_of(ev(), ev(shapes={"x": [16, 8]}))
    d = diff_logs(a, b)
    assert len(d.same) == 1
    assert [e.input_shapes for _, e in d.gone] == [{"x": [4, 8]}, {"x": [2, 8]}]
    assert [e.input_shapes for _, e in d.new] == [{"x": [16, 8]}]
    assert d.headline == "B compiled 1 graph fewer than A (3 -> 2)"


def test_headline_more_and_same():
    assert diff_logs(log_of(ev()), log_of(ev(), ev(shapes={"x": [1]}))).headline == \
        "B compiled 1 graph more than A (1 -> 2)"
    assert diff_logs(log_of(ev()), log_of(ev()), names=("old", "new")).headline == \
        "new compiled the same number of graphs as old: 1"


def test_ranks_count_only_where_both_runs_have_several():
    both_a = log_of(ev(rank=0), ev(rank=1))
    both_b = log_of(ev(rank=0), ev(rank=1, shapes={"x": [9]}))
    d = diff_logs(both_a, both_b)
    assert len(d.same) == 1 and [e.rank for _, e in d.new] == [1] and [e.rank for _, e in d.gone] == [1]
    assert d.new[0][0].startswith("rank 1: ")
    d = diff_logs(log_of(ev(rank=0), ev(rank=1)), log_of(ev(rank=0), ev(rank=0)))
    assert len(d.same) == 2 and not d.new and not d.gone


def test_functions_match_by_file_not_folder_nor_line():
    d = diff_logs(log_of(ev(location="/a/checkout/model.py:10")),
                  log_of(ev(location="/b/other/model.py:12")))
    assert len(d.same) == 1
    d = diff_logs(log_of(ev(location="/a/model.py:10")), log_of(ev(location="/a/layers.py:10")))
    assert len(d.new) == 1 and len(d.gone) == 1


def test_dtypes_tell_graphs_apart_where_both_record_them():
    fp32, bf16 = {"x": "torch.float32"}, {"x": "torch.bfloat16"}
    d = diff_logs(log_of(ev(dtypes=fp32)), log_of(ev(dtypes=bf16)))
    assert len(d.new) == 1 and len(d.gone) == 1
    d = diff_logs(log_of(ev(dtypes=fp32)), log_of(ev()))          # B's log records none
    assert len(d.same) == 1
    d = diff_logs(log_of(ev(dtypes=bf16), ev()), log_of(ev(), ev(dtypes=bf16)))
    assert len(d.same) == 2 and all(_dt(p.a) == _dt(p.b) for p in d.same)


def _dt(e: CompileEvent) -> Any:
    return e.metrics.get("input_dtypes")


def test_backward_graphs_are_graphs_of_their_own():
    d = diff_logs(log_of(ev(), ev(kind="backward")), log_of(ev()))
    assert [e.kind for _, e in d.gone] == ["backward"]
    assert d.graphs == (1, 1)  # the headline counts Dynamo graphs, as compare and report do


# ---- built or loaded, seconds, reasons, breaks ---------------------------------------------------

def test_built_and_loaded():
    assert build_state(ev(lookups=fx("miss"))) == BUILT
    assert build_state(ev(lookups=fx("bypass", None, reason="unpicklable"))) == BUILT
    assert build_state(ev(lookups=fx("hit"))) == LOADED
    assert build_state(ev(lookups=neff("compiled"))) == BUILT
    assert build_state(ev(lookups=neff("disk_hit"))) == LOADED
    assert build_state(ev(lookups=neff("memory_hit"))) == LOADED
    assert build_state(ev()) == UNKNOWN
    a = log_of(ev(lookups=fx("hit")), ev(shapes={"y": [1]}, lookups=neff("compiled")), ev(shapes={"z": [1]}))
    b = log_of(ev(lookups=fx("miss")), ev(shapes={"y": [1]}, lookups=neff("disk_hit")), ev(shapes={"z": [1]}))
    d = diff_logs(a, b)
    assert [p.b.input_shapes for p in d.built_in_b] == [{"x": [4, 8]}]
    assert [p.b.input_shapes for p in d.loaded_in_b] == [{"y": [1]}]
    assert [p.b.input_shapes for p in d.built_again] == [{"x": [4, 8]}]


def test_seconds_moved_per_graph_and_in_total():
    a = log_of(ev(dur=1.0), ev(shapes={"y": [1]}, dur=2.0), ev(shapes={"z": [1]}, dur=0.1, neff_s=10.0))
    b = log_of(ev(dur=3.5), ev(shapes={"y": [1]}, dur=2.1), ev(shapes={"z": [1]}, dur=0.1, neff_s=30.0))
    d = diff_logs(a, b)
    assert d.compile_s == pytest.approx((3.1, 5.7)) and d.neff_s == pytest.approx((10.0, 30.0))
    assert [list(p.b.input_shapes) for p in d.moved] == [["z"], ["x"]]  # biggest first; y moved 0.1 s
    assert d.moved[0].neff_delta == pytest.approx(20.0)
    text = diff_text(d)
    assert "compile s 3.10 -> 5.70 (+2.60); NEFF s 10.00 -> 30.00 (+20.00)" in text
    assert "seconds moved (2):" in text


def test_new_recompile_reasons_and_graph_breaks():
    a = log_of(ev(), ev(kind="recompile", shapes={"x": [5]}, reasons=["size of x changed"]),
               ev(kind="graph_break", reasons=["call to print"]))
    b = log_of(ev(), ev(kind="recompile", shapes={"x": [5]}, reasons=["size of x changed"]),
               ev(kind="recompile", shapes={"x": [6]}, reasons=["dtype of x changed"]),
               ev(kind="graph_break", reasons=["call to print"]),
               ev(kind="graph_break", reasons=["Tensor.item() called"]))
    d = diff_logs(a, b)
    assert d.new_reasons == (("f", "dtype of x changed"),)
    assert d.new_breaks == (("f", "Tensor.item() called"),)
    text = diff_text(d)
    assert "new recompile reasons in B (1):\n  f: dtype of x changed" in text
    assert "new graph breaks in B (1):\n  f: Tensor.item() called" in text


# ---- why it missed ---------------------------------------------------------------------------------

def _rebuilt_words(a: CompileLog, b: CompileLog) -> tuple[str, ...]:
    [r] = diff_logs(a, b).rebuilt
    return r.words


def test_a_changed_inductor_setting_is_named():
    a, b = log_of(ev(lookups=fx("hit", "ka"))), log_of(ev(lookups=fx("miss", "kb")))
    fx_parts(a, "ka")
    fx_parts(b, "kb", inductor_config__freezing_I="True")
    assert _rebuilt_words(a, b) == ("inductor config: freezing False -> True",)


def test_a_changed_dtype_is_named_with_the_input_name_where_the_order_matches():
    a, b = log_of(ev(lookups=fx("hit", "ka"))), log_of(ev(lookups=fx("miss", "kb")))
    fx_parts(a, "ka")
    fx_parts(b, "kb", example_inputs__0_I=TENSOR.format(dtype="bfloat16", dims="4, 8"))
    assert _rebuilt_words(a, b) == ("x: float32 4x8 -> bfloat16 4x8",)
    assert part_words("fx_graph", "example_inputs[1]", TENSOR.format(dtype="float32", dims="2"),
                      TENSOR.format(dtype="float16", dims="2")) == "input 1: float32 2 -> float16 2"


def test_a_new_graph_pairs_with_the_nearest_gone_one_and_names_its_shape():
    a = log_of(ev(shapes={"input_ids": [1, 64]}, lookups=fx("miss", "k64")),
               ev(shapes={"input_ids": [1, 128]}, lookups=fx("hit", "ka")))
    b = log_of(ev(shapes={"input_ids": [1, 64]}, lookups=fx("miss", "k64")),
               ev(shapes={"input_ids": [1, 256]}, lookups=fx("miss", "kb")))
    fx_parts(a, "ka", example_inputs__0_I=TENSOR.format(dtype="int64", dims="1, 128"))
    fx_parts(b, "kb", example_inputs__0_I=TENSOR.format(dtype="int64", dims="1, 256"))
    [r] = diff_logs(a, b).rebuilt
    assert r.words == ("the graph itself: input_ids 1x128 -> 1x256",)
    assert r.how == "new in B; nearest in A: input_ids 1x128"


def test_torch_version_code_and_other_parts_in_words():
    a = log_of(ev(lookups=fx("hit", "ka")), torch="2.13.0")
    b = log_of(ev(lookups=fx("miss", "kb")), torch="2.13.1")
    fx_parts(a, "ka", cpp_runtime_thread_count="2")
    fx_parts(b, "kb", torch_version="\x01other", cpp_runtime_thread_count="4",
             gm="<lambda>()\n\ndef forward(self, arg0_1):\n    mul = arg0_1 * 3\n    return (mul,)")
    assert _rebuilt_words(a, b) == ("torch version: 2.13.0 -> 2.13.1",
                                    "the graph's code changed, first at: mul = arg0_1 * 3",
                                    "cpp_runtime_thread_count: 2 -> 4")
    assert part_words("fx_graph", "torch_version", "a", "b", ({"torch": "2.13.0"},) * 2) == \
        "torch's source changed (its hash), version 2.13.0 both"


@pytest.mark.parametrize("name, a, b, said", [
    ("NEURON_CC_FLAGS", "-O1", "-O2", "NEURON_CC_FLAGS '-O1' -> '-O2'"),
    ("NEURON_CC_FLAGS", "(unset)", "--auto-cast=none", "NEURON_CC_FLAGS (unset) -> '--auto-cast=none'"),
    ("opt level", "-O2", "-O1", "opt level -O2 -> -O1"),
    ("logical cores", "2", "1", "logical cores 2 -> 1"),
    ("target", "trn2", "trn3", "target trn2 -> trn3"),
    ("graph", "ab" * 32, "cd" * 32, "graph (HLO) changed"),
])
def test_neff_key_parts_in_words(name, a, b, said):
    la, lb = log_of(ev(lookups=neff("compiled", "na"))), log_of(ev(lookups=neff("compiled", "nb")))
    same = {"logical cores": ("c", "2")} if name != "logical cores" else {}  # a part that did not change
    la.add_key_parts("neff", "na", {**same, name: ("da", a)})
    lb.add_key_parts("neff", "nb", {**same, name: ("db", b)})
    [r] = diff_logs(la, lb).rebuilt
    assert r.words == (said,) and r.how == "built in both, other keys"


def test_the_same_key_built_again_is_said():
    a, b = log_of(ev(lookups=fx("hit", "k"))), log_of(ev(lookups=fx("miss", "k")))
    fx_parts(a, "k")
    fx_parts(b, "k")
    assert _rebuilt_words(a, b) == ("the same fx_graph key: B's cache did not hold it (another "
                                    "cache folder, or one cleared)",)


def test_a_bypass_is_said_with_its_reason():
    a, b = log_of(ev(lookups=fx("hit", "k"))), log_of(ev(lookups=fx("bypass", None, reason="unpicklable x")))
    assert _rebuilt_words(a, b) == ("fx_graph cache bypassed in B: unpicklable x",)


def test_what_it_cannot_tell_is_said_once():
    many = [ev(shapes={"x": [n]}, backend="eager") for n in range(30)]
    d = diff_logs(log_of(*many), log_of(*many[:10], ev(shapes={"x": [99]}, backend="eager")))
    assert d.notes == ("built or loaded, and why rebuilt: cannot tell: neither run records cache "
                       "lookups (backend eager caches nothing)",)
    assert diff_text(d).count("cannot tell") == 1
    old = [ev(shapes={"x": [n]}) for n in range(3)]  # inductor, no lookups: an older log
    d = diff_logs(log_of(ev(lookups=fx("hit", "a"))), log_of(*old))
    assert d.notes[0].endswith("B records no cache lookups (a log from before neuronkit recorded "
                               "them, or a TORCH_TRACE folder)")
    # lookups, but the keys' parts are not in the logs
    d = diff_logs(log_of(ev(lookups=fx("hit", "ka"))), log_of(ev(lookups=fx("miss", "kb"))))
    assert not d.rebuilt and len(d.notes) == 1 and "parts of their cache keys are not in" in d.notes[0]


def test_malformed_lookups_do_not_break_the_diff():
    bad = CompileEvent(function="f", kind="first", duration_s=1.0, input_shapes={"x": [1]},
                       cache_key=["x", {"cache": 5}, {"cache": "fx_graph", "key": 7, "state": "miss"}])
    d = diff_logs(log_of(bad), log_of(bad))
    # what is no lookup is left out; a key that is no text is read as text (events.facts)
    assert len(d.same) == 1 and d.same[0].state_b == BUILT
    worse = CompileEvent(function="f", kind="first", duration_s=1.0, input_shapes={"x": [1]},
                         cache_key=["x", {"cache": 5}, {"state": None}])
    assert diff_logs(log_of(worse), log_of(worse)).same[0].state_b == UNKNOWN


def test_a_neff_loaded_across_a_torch_neuronx_upgrade_is_warned_of():
    a = log_of(ev(lookups=neff("compiled")), **{NEURONX_FIELD: "2.9.0"})
    b = log_of(ev(lookups=neff("disk_hit")), **{NEURONX_FIELD: "2.10.0"})
    [note] = diff_logs(a, b).notes
    assert "torch-neuronx 2.9.0 -> 2.10.0" in note
    assert "the NEFF key holds no compiler or torch-neuronx version" in note
    b = log_of(ev(lookups=neff("compiled")), **{NEURONX_FIELD: "2.10.0"})   # built: no warning
    assert diff_logs(a, b).notes == ()


# ---- output -----------------------------------------------------------------------------------

def test_crafted_values_are_escaped_in_text_and_html():
    evil = "f\x1b[31m<script>alert(1)</script>\u202e"
    a = log_of(ev(function=evil, lookups=fx("hit", "ka")))
    b = log_of(ev(function=evil, lookups=fx("miss", "kb")), ev(function=evil, shapes={"x": [1]}))
    fx_parts(a, "ka", cpp_runtime_thread_count="<b>2</b>")
    fx_parts(b, "kb", cpp_runtime_thread_count="\x1b]0;title\x07<img src=x onerror=alert(1)>")
    d = diff_logs(a, b)
    text, page = diff_text(d), diff_html(d)
    assert "\x1b" not in text and "\u202e" not in text and "<script>" in text  # text, not markup
    assert "<script>" not in page and "<img" not in page and "<b>2" not in page
    assert "&lt;script&gt;" in page and "&lt;img" in page


def test_the_json_data_has_its_shape():
    a, b = log_of(ev(lookups=fx("hit", "ka"))), log_of(ev(lookups=fx("miss", "kb")), ev(shapes={"y": [2]}))
    fx_parts(a, "ka")
    fx_parts(b, "kb", inductor_config__freezing_I="True")
    data = diff_data(diff_logs(a, b, names=("a", "b")))
    assert data["format"] == "neuronkit-diff" and data["version"] == 1
    assert data["names"] == ["a", "b"] and data["graphs"] == {"a": 1, "b": 2}
    assert [g["input_shapes"] for g in data["new"]] == [{"y": [2]}]
    assert data["built_in_b_loaded_in_a"][0]["b"]["state"] == "built"
    assert data["rebuilt"][0]["differs"] == ["inductor config: freezing False -> True"]
    assert set(data) >= {"headline", "per_function", "seconds", "same", "gone", "moved",
                         "loaded_in_b_built_in_a", "new_reasons", "new_breaks", "notes"}


def test_lists_are_bounded_in_text():
    d = diff_logs(log_of(*(ev(shapes={"x": [n]}) for n in range(40))), log_of(ev(shapes={"x": [99]})))
    text = diff_text(d, width=100)
    assert "gone from B (40):" in text and "  and 37 more" in text
    assert len(text.splitlines()) <= 24 and max(map(len, text.splitlines())) <= 100


def test_diff_logs_reads_paths(tmp_path):
    a = log_of(ev(lookups=fx("hit", "ka")))
    fx_parts(a, "ka")
    a.save(tmp_path / "a.jsonl")
    b = log_of(ev(lookups=fx("miss", "kb")))
    fx_parts(b, "kb", inductor_config__freezing_I="True")
    b.save(tmp_path / "b.jsonl")
    [r] = diff_logs(tmp_path / "a.jsonl", str(tmp_path / "b.jsonl")).rebuilt
    assert r.words == ("inductor config: freezing False -> True",)
