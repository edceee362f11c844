"""Repeated ids (one process): ``drop_duplicates`` and the finalize steps that use it.

A repeated id with the same row (DistributedSampler padding) is dropped; an id
repeated with a different row (ids counted from 0 in every batch) is an error
naming the ids, never a silent loss of rows.
"""
from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

import retrieval_core
from retrieval_core.distributed import drop_duplicates
from retrieval_core.evaluation.accumulator.embeddings import finalize_embeddings
from retrieval_core.evaluation.accumulator.scores import finalize_scores

NAN = float("nan")
PADDING_NOTE = r"ids must identify dataset items \(DistributedSampler padding repeats the same row, which is dropped\)"


def _clusters(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (n,), generator=g)
    return torch.randn(4, 6, generator=g)[labels] + 0.7 * torch.randn(n, 6, generator=g), labels


# -- drop_duplicates ---------------------------------------------------------------

def test_equal_rows_dropped_first_kept_in_id_order():
    ids = torch.tensor([7, 2, 7, 5, 2])
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    labels = torch.tensor([[1, 0], [0, 1], [1, 0], [1, 1], [0, 1]], dtype=torch.bool)  # 2-D rows compared whole
    kept_ids, kept_emb, kept_labels = drop_duplicates(ids, emb, labels)
    assert kept_ids.tolist() == [2, 5, 7]
    assert kept_emb.tolist() == [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]]
    assert kept_labels.tolist() == [[False, True], [True, True], [True, False]]


def test_no_repeats_sorts_by_id_and_empty_ids_pass_through():
    ids, v = drop_duplicates(torch.tensor([3, 0, 9]), torch.tensor([30, 0, 90], dtype=torch.int16))
    assert ids.tolist() == [0, 3, 9] and v.tolist() == [0, 30, 90] and v.dtype == torch.int16
    empty = torch.empty(0, dtype=torch.int64)
    out = drop_duplicates(empty, torch.empty(0, 4))
    assert out[0].shape == (0,) and out[1].shape == (0, 4)


def test_ids_counted_from_zero_in_every_batch_are_an_error():
    # 4 batches of 10 with ids 0..9 each: 40 items, not 10
    x, labels = _clusters(40)
    ids = torch.arange(10).repeat(4)
    with pytest.raises(ValueError, match=r"^ids 0, 1, 2, 3, 4 and 5 more repeat with different rows \(embeddings: 30 rows"
                                         r"(, labels: \d+ rows)?\); " + PADDING_NOTE):
        drop_duplicates(ids, x, labels, names=["embeddings", "labels"])


def test_one_conflicting_id_named_with_the_array_that_differs():
    ids = torch.tensor([1, 2, 1])
    with pytest.raises(ValueError, match=r"^id 1 repeats with different rows \(is_query: 1 row\); " + PADDING_NOTE):
        drop_duplicates(ids, torch.ones(3, 2), torch.tensor([True, False, False]), names=["embeddings", "is_query"])
    with pytest.raises(ValueError, match=r"^id 1 repeats with different rows \(array 1: 1 row\)"):
        drop_duplicates(ids, torch.ones(3, 2), torch.tensor([5, 6, 4]))


def test_integer_rows_must_match_exactly():
    with pytest.raises(ValueError, match="id 4 repeats"):
        drop_duplicates(torch.tensor([4, 4]), torch.tensor([2 ** 40, 2 ** 40 + 1]))


def test_nan_equals_nan_and_infinities_must_match():
    ids = torch.tensor([0, 1, 0, 1])
    values = torch.tensor([[NAN, 0.5], [float("inf"), 1.0], [NAN, 0.5], [float("inf"), 1.0]], dtype=torch.float64)
    kept_ids, kept = drop_duplicates(ids, values)
    assert kept_ids.tolist() == [0, 1] and torch.equal(kept.isnan(), torch.tensor([[True, False], [False, False]]))
    for other in ([0.25, 0.5], [NAN, NAN], [NAN, float("inf")]):  # a number for NaN, NaN for a number, inf for 0.5
        changed = values.clone()
        changed[2] = torch.tensor(other, dtype=torch.float64)
        with pytest.raises(ValueError, match="id 0 repeats"):
            drop_duplicates(ids, changed)
    changed = values.clone()
    changed[3, 0] = 1e300  # a finite value for inf
    with pytest.raises(ValueError, match="id 1 repeats"):
        drop_duplicates(ids, changed)


FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _ulps(x: torch.Tensor, n: int) -> torch.Tensor:
    """``x`` moved ``n`` representable values away from zero, entry by entry."""
    for _ in range(n):
        x = torch.nextafter(x, torch.where(x < 0, -torch.inf, torch.inf).to(x.dtype))
    return x


TOL = {torch.float16: 2.0**-8, torch.bfloat16: 2.0**-5}  # of the row's largest magnitude; else 2^-16


@pytest.mark.parametrize("dtype", FLOATS)
def test_recomputed_float_rows_at_rounding_level_are_the_same(dtype):
    # a padding sample recomputed in another batch differs by rounding in every entry,
    # entries near 0 included (relative to the row's scale, not to the entry): it passes
    x, _ = _clusters(6)
    x = x.to(dtype)
    if torch.finfo(dtype).bits == 16:
        near = _ulps(x[:2], 1)
    else:
        scale = x[:2].abs().amax(1, keepdim=True)
        near = x[:2] + scale * 2.0**-18 * torch.tensor([1.0, -1.0]).repeat(3)[None].to(dtype)
        near[:, 0] = 1e-12 * scale[:, 0]  # an entry near 0, recomputed as another tiny value
        x[:2, 0] = -1e-12 * scale[:, 0]
    assert (near != x[:2]).all()
    ids = torch.cat([torch.arange(6), torch.arange(2)])
    kept_ids, kept = drop_duplicates(ids, torch.cat([x, near]))
    assert kept_ids.tolist() == list(range(6)) and torch.equal(kept, x)  # first row kept
    # one entry off by 4 times the tolerance: another row
    far = torch.cat([x, near])
    far[7, 3] = x[1, 3] + 4 * TOL.get(dtype, 2.0**-16) * x[1].abs().max()
    with pytest.raises(ValueError, match=r"^id 1 repeats with different rows"):
        drop_duplicates(ids, far)


def _twice_from_zero(x: torch.Tensor):
    """Two batches of 20 items with ids counted from 0 in each (and one label): the
    rows of each id are two different items."""
    assert (x[:20] != x[20:]).any(1).all()  # the two items of each id differ in this dtype
    return torch.arange(20).repeat(2), torch.zeros(40, dtype=torch.int64)


def _adversarial_rows(dtype):
    g = torch.Generator().manual_seed(8)
    base = torch.randn(40, 8, generator=g, dtype=torch.float64)
    dominated = base.clone()
    dominated[:, 0] = 100.0  # one feature dominates the row's magnitude
    heavily = base.clone()
    heavily[:, 0] = 1e4 if dtype == torch.float16 else 1e30
    one_entry = base[:20].repeat(2, 1)
    one_entry[20:, 5] *= 1.05  # the rows of each id differ in one entry, by 5%
    cases = {
        "dominated": dominated, "heavily dominated": heavily, "one entry": one_entry,
        "offset": base + (100.0 if torch.finfo(dtype).bits == 16 else 1e5),
        "small scale": base * (1e-3 if dtype == torch.float16 else 1e-30),
        "large scale": base * (1e3 if dtype == torch.float16 else 1e30),
    }
    return {name: rows.to(dtype) for name, rows in cases.items()}


ROW_RULE_CATCHES = ("dominated", "one entry", "small scale", "large scale")  # alone, in 32/64-bit floats


@pytest.mark.parametrize("dtype", FLOATS)
def test_different_items_are_never_taken_for_padding(dtype):
    # every id holds two different items. With the rows of 2 processes (at most 1
    # padding repeat) nothing is dropped: the rows differ, or 20 repeats are more
    # than padding adds, whatever a row tolerance would say (heavily dominated rows,
    # offsets)
    for name, x in _adversarial_rows(dtype).items():
        ids, labels = _twice_from_zero(x)
        with pytest.raises(ValueError, match=r"^(20 rows repeat an id with values close to but not the same as its "
                                             r"first row's, more than the 1|ids? .* repeats? with different rows)"):
            drop_duplicates(ids, x, labels, names=["embeddings", "labels"], max_repeats=1)
        if name in ROW_RULE_CATCHES and torch.finfo(dtype).bits >= 32:  # 16-bit rows: the count alone
            with pytest.raises(ValueError, match=r"^ids 0, 1, 2, 3, 4 and 15 more repeat with different rows "
                                                 r"\(embeddings: 20 rows\)"):
                drop_duplicates(ids, x, labels, names=["embeddings", "labels"])


def test_more_close_repeats_than_padding_are_an_error():
    x, labels = _clusters(10)
    ids = torch.cat([torch.arange(10), torch.arange(3)])
    copies = x[:3] * (1 + 2.0**-20)  # recomputed: close, not the same bits
    rows, lab = torch.cat([x, copies]), torch.cat([labels, labels[:3]])
    assert drop_duplicates(ids, rows, lab, max_repeats=3)[0].tolist() == list(range(10))  # 4 processes: fine
    with pytest.raises(ValueError, match=r"^3 rows repeat an id with values close to but not the same as its first "
                                         r"row's, more than the 2 recomputed copies that DistributedSampler's padding "
                                         r"can add over 3 processes: ids must identify dataset items"):
        drop_duplicates(ids, rows, lab, max_repeats=2)
    with pytest.raises(ValueError, match=r"more than the 0 recomputed copies .* over 1 process:"):
        drop_duplicates(ids, rows, lab, max_repeats=0)
    # the same bits: always one item (a repeated sample, not a recomputation)
    same = torch.cat([x, x[:3]])
    assert drop_duplicates(ids, same, lab, max_repeats=0)[0].tolist() == list(range(10))


class _SyncRecorder(TorchFunctionMode):
    """Torch calls that make a CUDA device wait for the host (on CPU they do not,
    so the calls are counted instead of timed)."""

    NAMES = {"tolist", "item", "__bool__", "__int__", "__float__", "__index__", "nonzero", "unique",
             "unique_consecutive", "masked_select", "cpu", "numpy", "argwhere"}

    def __init__(self):
        super().__init__()
        self.syncs = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        masks = name in ("__getitem__", "__setitem__") and any(
            isinstance(a, torch.Tensor) and a.dtype == torch.bool
            for a in (args[1] if isinstance(args[1], tuple) else (args[1],)))
        if name in self.NAMES or masks:
            self.syncs.append(name)
        return func(*args, **(kwargs or {}))


def test_one_host_sync_and_no_boolean_masks():
    x, labels = _clusters(30)
    ids = torch.cat([torch.arange(30), torch.arange(5)])
    x, labels = torch.cat([x, x[:5]]), torch.cat([labels, labels[:5]])
    flags = ids % 2 == 0
    with _SyncRecorder() as recorder:
        drop_duplicates(ids, x, labels, flags)
    assert recorder.syncs == ["tolist"]
    x[31] += 1.0
    with _SyncRecorder() as recorder, pytest.raises(ValueError, match="id 1 repeats"):
        drop_duplicates(ids, x, labels, flags)
    assert recorder.syncs == ["tolist"]


# -- finalize_scores: repeated query ids -------------------------------------------

def test_scores_repeated_query_with_the_same_values_counts_once():
    values = torch.tensor([[1.0, NAN], [0.5, 0.25], [1.0, NAN]], dtype=torch.float64)
    res = finalize_scores(values, ["mrr", "ap"], ids=torch.tensor([4, 9, 4]), reduce="none", processes=2)
    assert res["mrr"].tolist() == [1.0, 0.5] and res["ap"][1].item() == 0.25 and res["ap"][0].isnan()
    res = finalize_scores(values, ["mrr", "ap"], ids=torch.tensor([4, 9, 4]), categories=torch.tensor([1, 2, 1]),
                          processes=2)
    close = values.clone()
    close[2, 0] = 1.0 - 2.0**-30  # recomputed: one process pads nothing, so it cannot be a copy
    with pytest.raises(ValueError, match=r"^1 row repeats an id with values close to but not the same"):
        finalize_scores(close, ["mrr", "ap"], ids=torch.tensor([4, 9, 4]))
    assert res["mrr"].item() == 0.75 and res["mrr/1"].item() == 1.0 and res.n_queries.item() == 2


def test_scores_repeated_query_with_other_values_or_category_is_an_error():
    values = torch.tensor([[1.0], [0.5], [0.25]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^id 4 repeats with different rows \(per-query values: 1 row\); " + PADDING_NOTE):
        finalize_scores(values, ["mrr"], ids=torch.tensor([4, 9, 4]), processes=2)
    same = torch.tensor([[1.0], [0.5], [1.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^id 4 repeats with different rows \(categories: 1 row\)"):
        finalize_scores(same, ["mrr"], ids=torch.tensor([4, 9, 4]), categories=torch.tensor([0, 1, 2]), processes=2)


# -- finalize_embeddings ------------------------------------------------------------

def test_embeddings_padding_dropped_equals_the_dataset():
    x, labels = _clusters(23, seed=3)
    keys = ["cmc@1", "map@r", "precision@3"]
    expected = retrieval_core.evaluate_embeddings(x, labels, keys)
    ids = torch.cat([torch.arange(23), torch.tensor([0, 1, 2])])  # padded to 26, as a sampler for 13 x 2 would
    got = finalize_embeddings(torch.cat([x, x[:3]]), torch.cat([labels, labels[:3]]), keys, ids=ids, processes=13)
    for k in keys:
        assert got[k].item() == pytest.approx(expected[k].item(), abs=1e-12)


def test_embeddings_ids_from_zero_in_every_batch_are_an_error():
    x, labels = _clusters(40, seed=4)
    with pytest.raises(ValueError, match=r"^ids 0, 1, 2, 3, 4 and 5 more repeat with different rows \(embeddings: "):
        finalize_embeddings(x, labels, ["cmc@1"], ids=torch.arange(10).repeat(4))
    # flags and categories take part: the same embedding and label with another flag is another row
    xs, ls = torch.cat([x[:5], x[:5]]), torch.cat([labels[:5], labels[:5]])
    with pytest.raises(ValueError, match=r"repeat with different rows \(is_gallery: 5 rows\)"):
        finalize_embeddings(xs, ls, ["cmc@1"], ids=torch.arange(5).repeat(2), is_gallery=torch.arange(10) < 5,
                            processes=6)
    with pytest.raises(ValueError, match=r"repeat with different rows \(categories: 5 rows\)"):
        finalize_embeddings(xs, ls, ["cmc@1"], ids=torch.arange(5).repeat(2), categories=torch.arange(10) // 5,
                            processes=6)


def test_rows_compared_in_chunks(monkeypatch):
    # large states are compared a few rows at a time; the result does not depend on it
    import retrieval_core.distributed.duplicates as distributed

    monkeypatch.setattr(distributed, "_CHUNK_ELEMENTS", 7)  # 1 row of 6 per step
    x, labels = _clusters(12)
    ids = torch.cat([torch.arange(12), torch.tensor([11, 0])])
    kept_ids, kept, kept_labels = drop_duplicates(ids, torch.cat([x, x[[11, 0]]]), torch.cat([labels, labels[[11, 0]]]))
    assert kept_ids.tolist() == list(range(12)) and torch.equal(kept, x) and torch.equal(kept_labels, labels)
    with pytest.raises(ValueError, match="^ids 0, 11 repeat with different rows"):
        drop_duplicates(ids, torch.cat([x, x[[10, 1]]]))
