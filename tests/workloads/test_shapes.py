"""Buckets, the bucket planner (against brute force) and the shape audit (against real compiles)."""
from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
import torch

import neuronkit as nk
from helpers.texts import TEXTS, ragged
from neuronkit.workloads.shapes import plan_cost

# ---- Buckets ---------------------------------------------------------------------------------

def test_buckets_sorted_fit_iter_repr_eq():
    b = nk.Buckets([128, 32, 64])
    assert b.boundaries == (32, 64, 128)
    assert list(b) == [32, 64, 128] and len(b) == 3 and b.max == 128
    assert repr(b) == "Buckets([32, 64, 128])"
    assert [b.fit(n) for n in (1, 32, 33, 64, 65, 128)] == [32, 32, 64, 64, 128, 128]
    assert b == nk.Buckets([32, 64, 128]) and b != nk.Buckets([32, 64])
    assert nk.Buckets(b) == b and 64 in b and 65 not in b
    assert nk.Buckets(np.array([8, 4])).boundaries == (4, 8)
    assert b.padding([1, 32, 100]) == 31 + 0 + 28


def test_buckets_fit_too_long_names_length_and_buckets():
    with pytest.raises(ValueError, match=r"length 129 .*Buckets\(\[32, 64, 128\]\).*truncate"):
        nk.Buckets([32, 64, 128]).fit(129)


@pytest.mark.parametrize("bad, err, text", [
    ([], ValueError, "at least one"),
    ([32, 32, 64], ValueError, r"distinct.*\[32\]"),
    ([0, 8], ValueError, "positive"),
    ([-4], ValueError, "positive"),
    ([8.0], TypeError, "8.0"),
    (["8"], TypeError, "'8'"),
    ([True], TypeError, "bool"),
    (32, TypeError, "list of positive ints"),
    ("32", TypeError, "list of positive ints"),
])
def test_buckets_bad_input(bad, err, text):
    with pytest.raises(err, match=text):
        nk.Buckets(bad)


# ---- plan_buckets ----------------------------------------------------------------------------

def _brute_force(lengths, max_buckets, compile_cost_s, token_cost_s):
    """Cheapest cost over every subset of distinct lengths that contains the maximum."""
    distinct = sorted(set(lengths))
    top, rest = distinct[-1], distinct[:-1]
    best = float("inf")
    for r in range(len(rest) + 1):
        if max_buckets is not None and r + 1 > max_buckets:
            break
        for combo in itertools.combinations(rest, r):
            best = min(best, plan_cost(lengths, [*combo, top], compile_cost_s, token_cost_s))
    return best


def test_plan_matches_brute_force_on_random_cases():
    rng = random.Random(1234)
    for _ in range(150):
        lengths = [rng.randint(1, 60) for _ in range(rng.randint(1, 12))]
        compile_cost = rng.choice([0.0, 0.5, 3.0, 20.0, 200.0])
        token_cost = rng.choice([0.0, 0.1, 1.0])
        max_buckets = rng.choice([None, 1, 2, 3])
        plan = nk.plan_buckets(lengths, max_buckets, compile_cost, token_cost)
        assert plan.max == max(lengths)
        assert set(plan) <= set(lengths)
        if max_buckets is not None:
            assert len(plan) <= max_buckets
        expected = _brute_force(lengths, max_buckets, compile_cost, token_cost)
        assert plan_cost(lengths, plan, compile_cost, token_cost) == pytest.approx(expected), (
            lengths, compile_cost, token_cost, max_buckets, plan)


def test_plan_extremes_and_edge_cases():
    lengths = [3, 3, 9, 17, 40]
    # padding is free -> one bucket; compiling is free -> one bucket per distinct length
    assert nk.plan_buckets(lengths, compile_cost_s=1.0, token_cost_s=0.0) == nk.Buckets([40])
    assert nk.plan_buckets(lengths, compile_cost_s=0.0, token_cost_s=1.0) == \
        nk.Buckets([3, 9, 17, 40])
    assert nk.plan_buckets(lengths, max_buckets=1, compile_cost_s=0.0) == nk.Buckets([40])
    assert nk.plan_buckets([7]) == nk.Buckets([7])
    assert nk.plan_buckets([5, 5, 5, 5]) == nk.Buckets([5])
    # ties go to fewer buckets: a bucket at 100 saves 2 padded tokens, exactly its compile cost
    assert nk.plan_buckets([100, 101, 101], compile_cost_s=2.0, token_cost_s=1.0) == \
        nk.Buckets([101])
    # rounding to a multiple keeps every boundary a multiple and still covers the max
    plan = nk.plan_buckets([5, 30, 31, 200], compile_cost_s=0.0, token_cost_s=1.0, multiple_of=16)
    assert plan == nk.Buckets([16, 32, 208])


@pytest.mark.parametrize("max_buckets", [None, 2])   # both solvers: any number, at most m
@pytest.mark.parametrize("lengths, compile_cost_s, token_cost_s", [
    # one bucket at 101 pads 2 tokens (2 s) + 1 graph (2 s) = 4 s; buckets [100, 101]: 2 graphs = 4 s
    ([100, 100, 101], 2, 1),
    # the same tie in floats: 0.3 + 0.1 * 3 = 0.6000000000000001 against 0.3 + 0.3 = 0.6
    ([100, 100, 100, 101], 0.3, 0.1),
])
def test_plan_a_real_tie_goes_to_fewer_buckets(lengths, compile_cost_s, token_cost_s, max_buckets):
    one, two = nk.Buckets([101]), nk.Buckets([100, 101])
    assert plan_cost(lengths, one, compile_cost_s, token_cost_s) == \
        pytest.approx(plan_cost(lengths, two, compile_cost_s, token_cost_s))   # a true tie
    assert nk.plan_buckets(lengths, max_buckets, compile_cost_s, token_cost_s) == one


def test_plan_default_costs_are_documented_tradeoff():
    # defaults: 60 s per graph, 1 ms per padded token -> a bucket must save over 60k padded tokens
    few = [10] * 50 + [1000]        # a bucket at 10 saves 50 * 990 = 49.5k tokens: not worth it
    many = [10] * 100 + [1000]      # saves 99k tokens: worth a graph
    assert nk.plan_buckets(few) == nk.Buckets([1000])
    assert nk.plan_buckets(many) == nk.Buckets([10, 1000])
    assert nk.plan_buckets(many, token_cost_s=1e-4) == nk.Buckets([1000])


@pytest.mark.parametrize("bad, err, text", [
    ([], ValueError, "at least one"),
    ([4, 0], ValueError, "positive"),
    ([4, -2], ValueError, "positive"),
    ([4, 2.5], TypeError, "2.5"),
    ([4, None], TypeError, "None"),
    (12, TypeError, "list of positive int"),
])
def test_plan_bad_input(bad, err, text):
    with pytest.raises(err, match=text):
        nk.plan_buckets(bad)


def test_plan_bad_options():
    with pytest.raises(ValueError, match="max_buckets"):
        nk.plan_buckets([4, 8], max_buckets=0)
    with pytest.raises(ValueError, match="compile_cost_s"):
        nk.plan_buckets([4, 8], compile_cost_s=-1)


@pytest.mark.parametrize("name", ["compile_cost_s", "token_cost_s"])
@pytest.mark.parametrize("bad, err, text", [
    (math.inf, ValueError, "finite number of seconds >= 0, got inf"),
    (-math.inf, ValueError, "finite number of seconds >= 0, got -inf"),
    (math.nan, ValueError, "finite number of seconds >= 0, got nan"),
    (-0.5, ValueError, "finite number of seconds >= 0, got -0.5"),
    ("1", TypeError, "number of seconds >= 0, got '1' \\(str\\)"),
    (None, TypeError, "got None"),
    (True, TypeError, "got True"),
])
def test_plan_and_plan_cost_reject_costs_that_are_not_finite_seconds(name, bad, err, text):
    with pytest.raises(err, match=rf"{name} must be a .*{text}.*default is"):
        nk.plan_buckets([4, 8, 8], **{name: bad})
    with pytest.raises(err, match=rf"{name} must be a .*{text}"):
        plan_cost([4, 8, 8], [8], **{name: bad})
    assert nk.plan_buckets([4, 8, 8], **{name: np.float64(0.5)}) in (nk.Buckets([8]),
                                                                      nk.Buckets([4, 8]))
    with pytest.raises(ValueError, match="multiple_of"):
        nk.plan_buckets([4, 8], multiple_of=0)


# ---- audit_shapes ----------------------------------------------------------------------------

def _batch(rows, cols):
    return {"input_ids": torch.zeros(rows, cols, dtype=torch.long),
            "labels": torch.zeros(rows, cols, dtype=torch.long), "weights": torch.ones(4)}


def test_audit_counts_shapes_and_varying_dims():
    batches = [_batch(2, 8), _batch(2, 16), _batch(2, 8), _batch(3, 8), _batch(2, 16)]
    audit = nk.audit_shapes(batches)
    assert audit.batches == 5
    assert audit.shapes["input_ids"] == [(2, 8), (2, 16), (3, 8)]
    assert audit.varying_dims == {"input_ids": [0, 1], "labels": [0, 1], "weights": []}
    assert audit.predicted_graphs == 3
    text = str(audit)
    assert "5 batches" in text and "3 graph(s)" in text and "input_ids: dims [0, 1] vary" in text
    assert "weights: fixed" in text


def test_audit_tuples_tensors_batchencoding_and_dataloader():
    from torch.utils.data import DataLoader, TensorDataset
    from transformers import BatchEncoding

    tuples = [(torch.zeros(4, 5), torch.zeros(4)), (torch.zeros(4, 6), torch.zeros(4))]
    audit = nk.audit_shapes(tuples)
    assert audit.shapes == {0: [(4, 5), (4, 6)], 1: [(4,)]} and audit.varying_dims[0] == [1]
    assert nk.audit_shapes([torch.zeros(3), torch.zeros(3)]).predicted_graphs == 1
    enc = [BatchEncoding({"input_ids": torch.zeros(1, n, dtype=torch.long)}) for n in (3, 4, 3)]
    assert nk.audit_shapes(enc).predicted_graphs == 2
    # 10 rows in batches of 4 -> 4, 4, 2: the short last batch is its own graph
    loader = DataLoader(TensorDataset(torch.zeros(10, 7)), batch_size=4)
    audit = nk.audit_shapes(loader)
    assert audit.batches == 3 and audit.predicted_graphs == 2 and audit.varying_dims[0] == [0]
    loader = DataLoader(TensorDataset(torch.zeros(10, 7)), batch_size=4, drop_last=True)
    assert nk.audit_shapes(loader).predicted_graphs == 1


def test_audit_key_missing_in_some_batches_is_a_new_signature():
    a = {"x": torch.zeros(2, 3)}
    b = {"x": torch.zeros(2, 3), "mask": torch.zeros(2, 3)}
    audit = nk.audit_shapes([a, b, a])
    assert audit.predicted_graphs == 2 and audit.shapes["mask"] == [(2, 3)]


def test_audit_shapes_that_swap_between_inputs_are_two_graphs():
    """The same set of shapes on different inputs is a different signature: two graphs."""
    a = {"input_ids": torch.zeros(2, 8), "labels": torch.zeros(2, 16)}
    b = {"input_ids": torch.zeros(2, 16), "labels": torch.zeros(2, 8)}
    audit = nk.audit_shapes([a, b, a, b])
    assert audit.predicted_graphs == 2 and audit.batches == 4
    assert sorted(audit.signatures.values()) == [2, 2]
    assert audit.varying_dims == {"input_ids": [1], "labels": [1]}
    assert nk.audit_shapes([(a["input_ids"], a["labels"]),
                            (b["input_ids"], b["labels"])]).predicted_graphs == 2
    # and torch.compile(dynamic=False) agrees: it builds two graphs for them
    torch._dynamo.reset()
    built = []

    def backend(gm, example_inputs):
        built.append(1)
        return gm.forward

    @torch.compile(backend=backend, dynamic=False)
    def step(input_ids, labels):
        return input_ids.sum() + labels.sum()

    for batch in (a, b, a, b):
        step(**batch)
    torch._dynamo.reset()
    assert len(built) == audit.predicted_graphs


def test_audit_bad_input():
    with pytest.raises(ValueError, match="no batches"):
        nk.audit_shapes([])
    with pytest.raises(TypeError, match="iterable of batches"):
        nk.audit_shapes(5)
    with pytest.raises(TypeError, match="iterable of batches"):
        nk.audit_shapes({"x": torch.zeros(2)})
    with pytest.raises(TypeError, match="got a int"):
        nk.audit_shapes([1, 2])


# ---- tokenized examples: padding="max_length" or not ---------------------------------------

def padded_to(n: int) -> int:
    return -(-n // 8) * 8


def test_audit_unpadded_examples_names_the_lengths_and_the_tokenizer_fix(tok):
    data = ragged(tok)
    lengths = [len(e["input_ids"]) for e in data]
    assert len(set(lengths)) == 4
    audit = nk.audit_shapes(data)
    assert audit.examples and audit.batches == 4 and audit.predicted_graphs == 4
    assert audit.varying_dims == {"input_ids": [0]}
    [finding] = audit.findings
    n = padded_to(max(lengths))
    assert f"4 different lengths, {min(lengths)} to {max(lengths)} tokens" in finding
    assert 'tokenized without padding="max_length"' in finding
    assert (f'tokenizer(texts, padding="max_length", max_length={n}, truncation=True) '
            f"({n}: the longest example seen, {max(lengths)} tokens") in finding
    assert f"nk.FixedLengthCollator(tokenizer, max_length={n})" in finding
    text = str(audit)
    assert "4 tokenized examples (not batches)" in text and "up to 4 graph(s)" in text
    assert f"! {finding}" in text


def test_audit_examples_tokenized_with_max_length_padding_are_fine(tok):
    enc = tok(TEXTS, padding="max_length", max_length=48, truncation=True)
    data = [{"input_ids": ids, "attention_mask": m}
            for ids, m in zip(enc["input_ids"], enc["attention_mask"], strict=True)]
    audit = nk.audit_shapes(data)
    assert audit.examples and audit.findings == [] and audit.predicted_graphs == 1
    assert audit.shapes == {"input_ids": [(48,)], "attention_mask": [(48,)]}
    assert "all one shape -> 1 graph" in str(audit) and "!" not in str(audit)
    # 1-D tensors per example (a dataset with set_format("torch")) read the same way
    assert nk.audit_shapes([{"input_ids": torch.tensor(e["input_ids"])} for e in data]).findings == []


def _collators(tok):
    from transformers import DataCollatorForLanguageModeling, DataCollatorWithPadding

    return {"lm": DataCollatorForLanguageModeling(tok, mlm=False),
            "with_padding": DataCollatorWithPadding(tok),
            "with_padding_max_length": DataCollatorWithPadding(tok, padding="max_length",
                                                               max_length=48),
            "fixed": nk.FixedLengthCollator(tok, max_length=48),
            "buckets": nk.FixedLengthCollator(tok, buckets=[16, 64])}


@pytest.mark.parametrize("name, finds", [("lm", True), ("with_padding", True),
                                         ("with_padding_max_length", False), ("fixed", False),
                                         ("buckets", False)])
def test_audit_dataloader_over_unpadded_examples_blames_only_a_pad_to_longest_collator(
        tok, name, finds):
    from torch.utils.data import DataLoader

    data = ragged(tok)
    lengths = [len(e["input_ids"]) for e in data]
    loader = DataLoader(data, batch_size=2, collate_fn=_collators(tok)[name])
    audit = nk.audit_shapes(loader)
    assert not audit.examples
    if finds:
        [finding] = audit.findings
        assert audit.predicted_graphs == 2
        assert finding.startswith("input_ids: the sequence length (dim 1) changes between batches")
        assert f"examples have 4 different lengths, {min(lengths)} to {max(lengths)}" in finding
        assert f'padding="max_length", max_length={padded_to(max(lengths))}' in finding
    else:
        assert audit.findings == []
        assert audit.predicted_graphs == (2 if name == "buckets" else 1)


def test_audit_batches_without_their_dataset_still_get_the_padding_fix():
    batches = [{"input_ids": torch.zeros(2, n, dtype=torch.long)} for n in (10, 30, 10)]
    [finding] = nk.audit_shapes(batches).findings
    assert "(2 lengths, 10 to 30): one graph each" in finding
    assert 'padding="max_length", max_length=32' in finding


def test_audit_short_last_batch_is_a_finding():
    from torch.utils.data import DataLoader, TensorDataset

    audit = nk.audit_shapes(DataLoader(TensorDataset(torch.zeros(10, 7)), batch_size=4))
    assert audit.findings == ["batch size: the last batch holds 2 example(s), the others 4: one "
                              "more graph. Drop it: dataloader_drop_last=True (Trainer) or "
                              "DataLoader(..., drop_last=True)."]
    assert nk.audit_shapes([_batch(2, 8), _batch(3, 8)]).findings == []  # a bigger last batch


def test_audit_mixing_examples_and_batches_is_an_error():
    with pytest.raises(TypeError, match="mix of tokenized examples"):
        nk.audit_shapes([{"input_ids": [1, 2]}, {"input_ids": torch.zeros(2, 3)}])


class ColumnDataset:
    """What check and audit read of a datasets.Dataset: column_names, a slice as columns, rows."""

    def __init__(self, rows):
        self.rows, self.column_names, self.rows_read = rows, list(rows[0]), 0

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return {c: [r[c] for r in self.rows[i]] for c in self.column_names}
        self.rows_read += 1
        return self.rows[i]


def test_example_lengths_of_lists_column_datasets_and_non_examples(tok):
    from neuronkit.workloads.shape_audit import example_lengths

    data = ragged(tok)
    lengths = [len(e["input_ids"]) for e in data]
    assert example_lengths(data) == lengths
    columns = ColumnDataset(data)
    assert example_lengths(columns) == lengths and columns.rows_read == 0   # one slice, no rows
    assert example_lengths(data, limit=2) == lengths[:2]
    assert example_lengths(ColumnDataset([{"text": "a"}])) is None
    for other in (list(range(5)), TEXTS, [{"text": "a"}], None, iter(data)):
        assert example_lengths(other) is None


def test_audit_and_lengths_of_a_datasets_dataset(tok):
    datasets = pytest.importorskip("datasets")
    from neuronkit.workloads.shape_audit import example_lengths

    data = datasets.Dataset.from_dict({"text": TEXTS}).map(lambda b: tok(b["text"]), batched=True)
    lengths = [len(ids) for ids in tok(TEXTS)["input_ids"]]
    assert example_lengths(data) == lengths
    assert "4 different lengths" in nk.audit_shapes(data).findings[0]
    padded = datasets.Dataset.from_dict({"text": TEXTS}).map(
        lambda b: tok(b["text"], padding="max_length", max_length=48, truncation=True),
        batched=True)
    assert nk.audit_shapes(padded).findings == [] and set(example_lengths(padded)) == {48}


def test_suggested_max_length_rounds_up_or_stops_at_model_max_length():
    from types import SimpleNamespace

    from neuronkit.workloads.shape_audit import suggest_max_length

    assert suggest_max_length(45) == (48, "the longest example seen, 45 tokens, rounded up to a "
                                          "multiple of 8")
    assert suggest_max_length(48)[0] == 48 and suggest_max_length(3)[0] == 8
    n, why = suggest_max_length(45, SimpleNamespace(model_max_length=40))
    assert n == 40 and "model_max_length" in why and "45 tokens" in why
    assert suggest_max_length(45, SimpleNamespace(model_max_length=int(1e30)))[0] == 48


@pytest.mark.slow
def test_audit_predicts_real_dynamic_false_compiles():
    """The predicted graph count equals what torch.compile(dynamic=False) really builds."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append([tuple(t.shape) for t in example_inputs if isinstance(t, torch.Tensor)])
        return gm.forward

    @torch.compile(backend=backend, dynamic=False)
    def step(input_ids, labels):
        return (input_ids * 2 + labels).sum()

    rng = random.Random(7)
    batches = [{"input_ids": torch.ones(rng.choice([1, 2]), rng.choice([4, 8, 16])),
                "labels": torch.ones(1, 1)} for _ in range(12)]
    audit = nk.audit_shapes(batches)
    with torch._dynamo.config.patch(recompile_limit=64):
        for batch in batches:
            step(**batch)
    torch._dynamo.reset()
    assert len(graphs) == audit.predicted_graphs
    assert audit.predicted_graphs == len({tuple(b["input_ids"].shape) for b in batches})
