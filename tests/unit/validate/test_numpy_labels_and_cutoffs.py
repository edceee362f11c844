"""Issue 26, items 13, 14 and 16: inputs as a user gives them.

* 13: NumPy arrays are taken by every entry point of our own API (and refused by the
  drop-ins whose anchors refuse them); float labels holding whole numbers and ``[N, 1]``
  columns of classes are class labels; other float labels are refused naming the first
  bad value.
* 16: a cutoff past a query's candidates is allowed everywhere and well defined
  (``precision@k`` divides by k, as trec_eval): evaluate_embeddings, evaluate_scores,
  evaluate_ranked and the adapters give the same values.
* 14: ``eval`` says on stderr when queries have no relevant item.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ignite_retrieval as ig
import lightning_retrieval as lt
import retrieval_core as rc
from retrieval_core import cli
from retrieval_core import distributed as D

RNG = np.random.default_rng(26)
X = RNG.normal(size=(12, 5))  # float64, as NumPy makes them
LABELS = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4])
G = RNG.normal(size=(9, 5))
G_LABELS = np.array([0, 1, 2, 3, 4, 0, 1, 5, 5])
P = RNG.random((4, 6))
T = (RNG.random((4, 6)) < 0.4).astype(np.int64)
T[:, 0] = 1  # every query has a relevant candidate
KEYS = ["cmc@1", "map@r", "ndcg@5", "precision@3"]
SCORE_KEYS = ["mrr", "ndcg@3", "precision@2", "recall@4"]


def _t(a):
    return torch.as_tensor(a)


def same(got, want) -> bool:
    """Equal keys and values, bit for bit (NaN equal to NaN)."""
    if list(got) != list(want):
        return False
    for k in want:
        a, b = torch.as_tensor(got[k], dtype=torch.float64), torch.as_tensor(want[k], dtype=torch.float64)
        if not torch.equal(a.isnan(), b.isnan()) or not torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0)):
            return False
    return True


# -- item 13: NumPy arrays ----------------------------------------------------------------------

def _numpy_calls():
    flat_p, flat_t, idx = P.ravel(), T.ravel(), np.repeat(np.arange(4), 6)
    conf, r = RNG.random(4), T.sum(1) + 1
    return {
        "evaluate_embeddings self": lambda f: rc.evaluate_embeddings(f(X), f(LABELS), KEYS, query_ids=f(np.arange(12))),
        "evaluate_embeddings gallery": lambda f: rc.evaluate_embeddings(
            f(X), f(LABELS), KEYS, gallery=f(G), gallery_labels=f(G_LABELS), query_ids=f(np.arange(12)),
            gallery_ids=f(np.arange(100, 109)), categories=f(LABELS % 2)),
        "evaluate_embeddings confidence": lambda f: rc.evaluate_embeddings(
            f(X), f(LABELS), ["cmc@1", "erc:cmc@1"], confidence=f(np.linspace(0, 1, 12))),
        "distributed.evaluate_embeddings_across_ranks":
            lambda f: D.evaluate_embeddings_across_ranks(f(X), f(LABELS), KEYS),
        "evaluate_scores": lambda f: rc.evaluate_scores(f(P), f(T), SCORE_KEYS, mask=f(P > 0.05),
                                                        confidence=f(conf), categories=f(np.array([0, 1, 0, 1]))),
        "evaluate_scores flat": lambda f: rc.evaluate_scores(f(flat_p), f(flat_t), SCORE_KEYS, indexes=f(idx)),
        "evaluate_scores n_relevant": lambda f: rc.evaluate_scores(f(P), f(T), SCORE_KEYS, n_relevant=f(r)),
        "evaluate_ranked": lambda f: rc.evaluate_ranked(f(T), SCORE_KEYS, n_relevant=f(r), mask=f(P > 0.05)),
        "evaluate_ranked ideal": lambda f: rc.evaluate_ranked(f(T * 2), ["ndcg@3"], n_relevant=f(r),
                                                              ideal=f(np.full((4, 7), 2.0) * (np.arange(7) < r[:, None]))),
        "evaluate_ranked flat": lambda f: rc.evaluate_ranked(f(flat_t), SCORE_KEYS, indexes=f(idx)),
        "score_values": lambda f: {"v": rc.score_values(f(P), f(T), SCORE_KEYS).values},
        "compare": lambda f: {"d": rc.compare(f(P[:, 0]), f(P[:, 1])).mean_difference},
    }


@pytest.mark.parametrize("name", list(_numpy_calls()))
def test_numpy_arrays_give_the_values_of_tensors(name):
    call = _numpy_calls()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no torch warning (read-only arrays...) either
        got = call(lambda a: a)
    assert same(got, call(_t)), (dict(got), dict(call(_t)))


def _adapter_updates():
    return {
        "ignite RankingMetrics": (lambda: ig.RankingMetrics(SCORE_KEYS), lambda m, f: m.update((f(P), f(T)))),
        "ignite RankingMetrics mapping": (
            lambda: ig.RankingMetrics(SCORE_KEYS),
            lambda m, f: m.update({"y_pred": f(P), "y": f(T), "ids": f(np.arange(4)), "mask": f(P > 0.05),
                                   "n_relevant": f(T.sum(1) + 1)})),
        "ignite EmbeddingMetrics": (lambda: ig.EmbeddingMetrics(KEYS),
                                    lambda m, f: m.update({"embeddings": f(X), "labels": f(LABELS),
                                                           "ids": f(np.arange(12))})),
        "lightning RankingMetrics": (lambda: lt.RankingMetrics(SCORE_KEYS),
                                     lambda m, f: m.update(f(P), f(T), ids=f(np.arange(4)), mask=f(P > 0.05))),
        "lightning EmbeddingMetrics": (lambda: lt.EmbeddingMetrics(KEYS),
                                       lambda m, f: m.update(f(X), f(LABELS), ids=f(np.arange(12)),
                                                             is_query=f(np.arange(12) % 3 != 0))),
    }


@pytest.mark.parametrize("name", list(_adapter_updates()))
def test_adapters_take_numpy_arrays(name):
    make, update = _adapter_updates()[name]
    results = []
    for f in (lambda a: a, _t):
        metric = make()
        update(metric, f)
        results.append(metric.compute())
    assert same(*results), results


def test_numpy_arrays_go_to_the_device_of_the_tensor_arguments():
    """CPU when no argument is a tensor (or the adapter's device); else the tensors' device,
    so that NumPy labels go with embeddings on an accelerator."""
    from retrieval_core.validate import as_tensors

    query, labels, none = as_tensors(query=torch.zeros(2, 3, device="meta"), labels=LABELS[:2], gallery=None)
    assert labels.device.type == "meta" and labels.dtype == torch.int64 and none is None
    query, labels = as_tensors(query=X, labels=LABELS)
    assert query.device.type == labels.device.type == "cpu" and query.dtype == torch.float64
    (labels,) = as_tensors(device=torch.device("meta"), labels=LABELS)
    assert labels.device.type == "meta"


def test_numpy_arrays_torch_cannot_take_as_they_are():
    """Read-only (np.load with mmap_mode, broadcast views) and big-endian arrays are copied;
    arrays of strings or objects are refused with the argument's name."""
    ro = X.copy()
    ro.flags.writeable = False
    big = X.astype(">f8")
    want = rc.evaluate_embeddings(_t(X), _t(LABELS), KEYS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert same(rc.evaluate_embeddings(ro, LABELS, KEYS), want)
        assert same(rc.evaluate_embeddings(big, LABELS.astype(">i8"), KEYS), want)
    with pytest.raises(TypeError, match=r"^query_labels must be a NumPy array of numbers or bools; got NumPy dtype <U21$"):
        rc.evaluate_embeddings(X, LABELS.astype(str), KEYS)
    with pytest.raises(TypeError, match=r"^preds must be a NumPy array of numbers or bools; got NumPy dtype object$"):
        rc.evaluate_scores(P.astype(object), T, SCORE_KEYS)


def test_string_categories_as_a_numpy_array():
    names = np.array(["cat", "dog", "cat", "dog"])
    got = rc.evaluate_scores(P, T, ["mrr"], categories=names)
    assert same(got, rc.evaluate_scores(_t(P), _t(T), ["mrr"], categories=names.tolist()))
    assert "mrr/cat" in got


def test_lists_stay_refused():
    """Lists carry no dtype (ints become int64, floats float32) and may be ragged: the
    entry points refuse them as before; torch.as_tensor(list) or np.asarray are one call away."""
    with pytest.raises(TypeError, match=r"^query must be a torch.Tensor; got list$"):
        rc.evaluate_embeddings(X.tolist(), LABELS, KEYS)


def test_drop_ins_keep_their_anchors_refusal():
    """ignite's HitRate and torchmetrics' retrieval metrics refuse NumPy arrays: so do ours."""
    with pytest.raises(TypeError, match=r"^HitRate: y_pred must be a torch.Tensor; got ndarray$"):
        ig.HitRate(top_k=[1]).update((P, T))
    with pytest.raises(TypeError, match="must be a torch.Tensor; got ndarray"):
        lt.RetrievalMRR().update(P.ravel(), T.ravel(), indexes=np.repeat(np.arange(4), 6))


# -- item 13: float and [N, 1] labels -------------------------------------------------------------

LABEL_FORMS = {
    "float32": lambda lab: lab.float(),
    "float64": lambda lab: lab.double(),
    "float16": lambda lab: lab.half(),
    "[N, 1] int": lambda lab: lab.unsqueeze(1),
    "[N, 1] float": lambda lab: lab.unsqueeze(1).float(),
    "[N, 1] int32": lambda lab: lab.unsqueeze(1).int(),
    "numpy float [N, 1]": lambda lab: lab.numpy().astype(float)[:, None],
}


@pytest.mark.parametrize("form", list(LABEL_FORMS))
def test_whole_float_labels_and_label_columns_are_class_labels(form):
    lab, g_lab = _t(LABELS), _t(G_LABELS)
    f = LABEL_FORMS[form]
    want = rc.evaluate_embeddings(_t(X), lab, KEYS, per_class="all")
    assert same(rc.evaluate_embeddings(_t(X), f(lab), KEYS, per_class="all"), want)  # "class=3", not "class=3.0"
    want = rc.evaluate_embeddings(_t(X), lab, KEYS, gallery=_t(G), gallery_labels=g_lab)
    assert same(rc.evaluate_embeddings(_t(X), f(lab), KEYS, gallery=_t(G), gallery_labels=f(g_lab)), want)
    assert same(D.evaluate_embeddings_across_ranks(_t(X), f(lab), KEYS), rc.evaluate_embeddings(_t(X), lab, KEYS))
    for make, update in ((lambda: ig.EmbeddingMetrics(KEYS), lambda m, y: m.update((_t(X), y))),
                         (lambda: lt.EmbeddingMetrics(KEYS), lambda m, y: m.update(_t(X), y))):
        results = []
        for y in (f(lab), lab):
            metric = make()
            update(metric, y)
            results.append(metric.compute())
        assert same(*results), (form, results)


def test_float_multi_hot_labels_of_zeros_and_ones():
    mh = torch.tensor([[1, 0], [1, 1], [0, 1], [0, 1], [1, 0], [1, 0]])
    x = _t(X[:6])
    assert same(rc.evaluate_embeddings(x, mh.double(), KEYS), rc.evaluate_embeddings(x, mh, KEYS))
    with pytest.raises(ValueError, match=r"^query_labels as multi-hot \[N, classes\] must hold only 0 and 1; "
                                         r"got 2.0 at position \(1, 1\)$"):
        rc.evaluate_embeddings(x, mh.double() * torch.tensor([1.0, 2.0]), KEYS)


def test_bool_label_column_stays_multi_hot_of_one_class():
    """The documented reading of the one ambiguous shape: a bool [N, 1] is a multi-hot
    matrix of one class (False shares nothing), an integer [N, 1] a column of classes
    (0 is a class like 1)."""
    lab = torch.tensor([1, 1, 0, 0, 1, 0])
    x = _t(X[:6])
    as_classes = rc.evaluate_embeddings(x, lab.unsqueeze(1), ["cmc@1"], reduce="none")["cmc@1"]
    multi_hot = rc.evaluate_embeddings(x, lab.unsqueeze(1).bool(), ["cmc@1"], reduce="none")["cmc@1"]
    assert not as_classes.isnan().any()
    assert torch.equal(multi_hot.isnan(), lab == 0)  # a False row shares no class: no relevant item


@pytest.mark.parametrize("bad, shown, at", [
    (2.5, "2.5", 4), (float("nan"), "nan", 4), (float("inf"), "inf", 4), (-float("inf"), "-inf", 4),
    (2.0**63, "9.223372036854776e\\+18", 4),
])
def test_float_labels_that_are_not_whole_numbers_are_refused(bad, shown, at):
    lab = torch.tensor([0.0, 0.0, 1.0, 1.0, bad, 7.5])
    message = (rf"^query_labels must be integer class labels; got {shown} at position {at} \(float labels are taken "
               r"when every value is a whole number within int64\)$")
    with pytest.raises(ValueError, match=message):
        rc.evaluate_embeddings(_t(X[:6]), lab, KEYS)
    with pytest.raises(ValueError, match=message.replace("query_labels", "labels")):
        lt.EmbeddingMetrics(KEYS).update(_t(X[:6]), lab)
    with pytest.raises(ValueError, match=message.replace("^query_labels", "^EmbeddingMetrics: labels")):
        ig.EmbeddingMetrics(KEYS).update((_t(X[:6]), lab))
    with pytest.raises(ValueError, match=message.replace("query_labels", "gallery_labels")):
        rc.evaluate_embeddings(_t(X[:6]), torch.zeros(6), KEYS, gallery=_t(X[:6]),
                               gallery_labels=lab)


def test_labels_past_the_column_shape_keep_their_errors():
    with pytest.raises(ValueError, match=r"^query_labels must be 1-D class labels or 2-D multi-hot \[N, classes\]; "
                                         r"got shape \(12, 1, 1\)$"):
        rc.evaluate_embeddings(_t(X), _t(LABELS).view(12, 1, 1), KEYS)
    with pytest.raises(TypeError, match=r"^query_labels must be integer class labels; got torch.bool$"):
        rc.evaluate_embeddings(_t(X), _t(LABELS) > 1, KEYS)


# -- item 16: cutoffs past the candidates ---------------------------------------------------------

DEEP = ["precision@20", "recall@20", "cmc@20", "ndcg@20", "map@20", "mrr@20", "precision_adaptive@20",
        "precision_capped@20", "f1@20", "map_hits@20", "acg@20", "auroc@20", "fall_out@20"]


def _self_scores():
    """evaluate_embeddings' self-gallery as scores: cosine similarities, the diagonal masked."""
    x = torch.nn.functional.normalize(_t(X), dim=1)
    lab = _t(LABELS)
    return x @ x.T, (lab[:, None] == lab[None]).long(), ~torch.eye(12, dtype=torch.bool)


def test_cutoffs_past_the_candidates_give_one_value_on_every_entry_point():
    """precision@20 of 11 candidates is hits / 20 (trec_eval's P.20 of a short list) and the
    same from embeddings, scores (dense, flat), ranked lists and both adapters; it was a
    ValueError in embedding mode only."""
    s, t, mask = _self_scores()
    want = rc.evaluate_scores(s, t, DEEP, mask=mask, reduce="none")
    hits = t.masked_fill(~mask, 0).sum(1).double()
    assert torch.equal(want["precision@20"].nan_to_num(0), torch.where(hits > 0, hits / 20, 0.0))
    got = rc.evaluate_embeddings(_t(X), _t(LABELS), DEEP, reduce="none")
    assert same(got, want)
    idx = torch.arange(12).repeat_interleave(11)
    flat = rc.evaluate_scores(s[mask], t[mask], DEEP, indexes=idx, reduce="none")
    assert same(flat, want)
    ranked_gains = t[mask].view(12, 11).gather(1, s[mask].view(12, 11).argsort(dim=1, descending=True, stable=True))
    ranked = rc.evaluate_ranked(ranked_gains, [k for k in DEEP if not k.startswith(("auroc", "fall_out"))],
                                reduce="none")
    assert same(ranked, {k: want[k] for k in ranked})
    mean = rc.evaluate_embeddings(_t(X), _t(LABELS), DEEP)
    for metric, update in ((ig.EmbeddingMetrics(DEEP), lambda m: m.update((_t(X), _t(LABELS)))),
                           (lt.EmbeddingMetrics(DEEP), lambda m: m.update(_t(X), _t(LABELS))),
                           (ig.RankingMetrics(DEEP), lambda m: m.update({"y_pred": s, "y": t, "mask": mask})),
                           (lt.RankingMetrics(DEEP), lambda m: m.update(s, t, mask=mask))):
        update(metric)
        assert same(metric.compute(), mean), type(metric)
    assert same(D.evaluate_embeddings_across_ranks(_t(X), _t(LABELS), DEEP), mean)


def test_cutoff_past_a_separate_gallery_and_in_chunks():
    x, lab, g, gl = _t(X), _t(LABELS), _t(G), _t(G_LABELS)
    one = rc.evaluate_embeddings(x, lab, ["precision@50", "recall@50", "map@r"], gallery=g, gallery_labels=gl)
    hits = (lab[:, None] == gl[None]).sum(1).double()
    defined = hits > 0
    assert one["precision@50"].item() == pytest.approx((hits[defined] / 50).mean().item(), abs=0)
    chunked = rc.evaluate_embeddings(x, lab, ["precision@50", "recall@50", "map@r"], gallery=g, gallery_labels=gl,
                                     memory_budget=2048)
    assert same(chunked, one)


# -- item 14: eval says when queries have no relevant item ----------------------------------------

@pytest.fixture
def saved(tmp_path):
    np.save(tmp_path / "x.npy", X.astype(np.float32))
    np.save(tmp_path / "unique.npy", np.arange(12))
    np.save(tmp_path / "some.npy", LABELS)
    return tmp_path


def test_eval_says_that_no_query_has_a_relevant_item(saved, capsys):
    assert cli.main(["eval", str(saved / "x.npy"), str(saved / "unique.npy"), "--metrics", "cmc@1", "map@r"]) == 0
    out, err = capsys.readouterr()
    assert "–" in out
    assert err.strip() == (
        f"retrieval-metrics: note: {saved / 'x.npy'}: no query has a relevant item (no gallery item other than "
        "the query itself shares its label): every value is undefined (printed –, null in JSON); check the labels, "
        "or count such queries as 0 with --empty zero (--empty error fails instead)")
    assert cli.main(["eval", str(saved / "x.npy"), str(saved / "unique.npy"), "--json", "--empty", "zero"]) == 0
    out, err = capsys.readouterr()
    assert "every value is 0 (--empty zero)" in err and out.startswith("{")


def test_eval_says_how_many_queries_were_left_out(saved, capsys):
    assert cli.main(["eval", str(saved / "x.npy"), str(saved / "some.npy"), "--metrics", "cmc@1", "fall_out@3"]) == 0
    _, err = capsys.readouterr()
    assert err.strip().endswith(": 1 of 12 queries have no relevant item (no gallery item other than the "
                                "query itself shares its label): they are left out of every value (--empty skip; --empty "
                                "zero counts them as 0)")


def test_eval_is_quiet_when_every_query_has_a_relevant_item(saved, capsys):
    np.save(saved / "pairs.npy", np.arange(12) // 2)
    assert cli.main(["eval", str(saved / "x.npy"), str(saved / "pairs.npy")]) == 0
    assert capsys.readouterr().err == ""


def test_numpy_integers_as_the_catalogue_size_negatives_and_seed():
    """A size read from a NumPy array (``np.int64``) is an int like any other (the hostile tester
    of session 36: ``n_items=np.int64(5)`` was refused as "not a positive int")."""
    topk, truth = np.array([[0, 1], [2, 3]]), np.array([[0, 1], [1, 3]])
    want = rc.evaluate_topk(topk, truth, ["coverage@2", "precision@2"], n_items=5)
    got = rc.evaluate_topk(topk, truth, ["coverage@2", "precision@2"], n_items=np.int64(5))
    assert {k: float(v) for k, v in got.items()} == {k: float(v) for k, v in want.items()}
    metric = lt.TopKMetrics(["coverage@2"], n_items=np.int32(5))
    metric.update(torch.as_tensor(topk), torch.as_tensor(truth))
    assert float(metric.compute()["coverage@2"]) == float(want["coverage@2"])
    a = rc.sample_negatives(truth, np.int64(6), np.int64(3), seed=np.int64(4))
    assert torch.equal(a, rc.sample_negatives(truth, 6, 3, seed=4))
    for bad in (5.0, True, np.float64(5), 0, np.int64(-1)):
        with pytest.raises(ValueError, match="n_items must be a positive int"):
            rc.evaluate_topk(topk, truth, ["coverage@2"], n_items=bad)
