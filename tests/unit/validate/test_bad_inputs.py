"""Every bad input gets a clear exception, never a wrong number."""
import re

import pytest
import torch

import ignite_retrieval as ig
import lightning_retrieval as lt
import retrieval_core as rc

P = torch.rand(2, 3)
T = torch.ones(2, 3)
F = torch.rand(6)
FT = torch.ones(6)
I = torch.tensor([0, 0, 0, 1, 1, 1])
NAN = torch.tensor([[0.1, float("nan"), 0.3], [0.1, 0.2, 0.3]])
INF = torch.tensor([[0.1, float("inf"), 0.3], [0.1, 0.2, 0.3]])

CASES = [
    # (id, call, exception, message regex)
    ("shapes", lambda: rc.evaluate_scores(torch.rand(2, 3), torch.ones(2, 4), ["ndcg@2"]),
     ValueError, r"preds and target must be 2-D \[queries, candidates\] of the same shape, or 1-D with indexes=; got \(2, 3\) and \(2, 4\)"),
    ("1-d without indexes", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"]),
     ValueError, r"must be 2-D \[queries, candidates\] of the same shape, or 1-D with indexes=; got \(6,\) and \(6,\)"),
    ("3-d", lambda: rc.evaluate_scores(torch.rand(2, 3, 1), torch.ones(2, 3, 1), ["ndcg@2"]),
     ValueError, r"must be 2-D"),
    ("0-size", lambda: rc.evaluate_scores(torch.rand(0, 3), torch.ones(0, 3), ["ndcg@2"]),
     ValueError, r"empty; got shape \(0, 3\)"),
    ("0 candidates", lambda: rc.evaluate_scores(torch.rand(2, 0), torch.ones(2, 0), ["ndcg@2"]),
     ValueError, r"empty; got shape \(2, 0\)"),
    ("0-size flat", lambda: rc.evaluate_scores(torch.rand(0), torch.ones(0), ["ndcg@2"], indexes=torch.zeros(0, dtype=torch.long)),
     ValueError, r"empty"),
    ("preds not a tensor", lambda: rc.evaluate_scores([[0.1, 0.2]], T, ["ndcg@2"]),
     TypeError, r"preds must be a torch.Tensor; got list"),
    ("bool preds", lambda: rc.evaluate_scores(P > 0.5, T, ["ndcg@2"]),
     TypeError, r"preds must be a floating-point or integer tensor; got torch.bool"),
    ("complex preds", lambda: rc.evaluate_scores(P.to(torch.complex64), T, ["ndcg@2"]),
     TypeError, r"preds must be a floating-point or integer tensor; got torch.complex64"),
    ("complex target", lambda: rc.evaluate_scores(P, T.to(torch.complex64), ["ndcg@2"]),
     TypeError, r"target must be a bool, integer or floating-point tensor; got torch.complex64"),
    ("k zero", lambda: rc.evaluate_scores(P, T, ["ndcg@0"]), ValueError, r"k must be a positive integer in 'ndcg@0'; got 0"),
    ("k negative", lambda: rc.evaluate_scores(P, T, ["ndcg@-3"]), ValueError, r"k must be a positive integer in 'ndcg@-3'; got -3"),
    ("k float", lambda: rc.evaluate_scores(P, T, ["ndcg@1.5"]), ValueError, r"k must be a positive integer or 'r' in 'ndcg@1.5'"),
    ("k empty", lambda: rc.evaluate_scores(P, T, ["ndcg@"]), ValueError, r"k must be a positive integer or 'r'"),
    ("k bool in metric_key", lambda: rc.metric_key("ndcg", True), TypeError, r"k must be a positive int; got True of type bool"),
    ("k zero in metric_key", lambda: rc.metric_key("ndcg", 0), ValueError, r"k must be a positive int; got 0"),
    ("k float in metric_key", lambda: rc.metric_key("ndcg", 2.0), TypeError, r"k must be a positive int; got 2.0 of type float"),
    ("unknown key", lambda: rc.evaluate_scores(P, T, ["nDCG@10"]),
     ValueError, r"unknown metric 'nDCG' in key 'nDCG@10'; did you mean ndcg@10\? known keys: .*ndcg@k"),
    ("cutoff required", lambda: rc.evaluate_scores(P, T, ["precision"]), ValueError, r"metric 'precision' needs a cutoff, e.g. 'precision@10'"),
    ("no @k", lambda: rc.evaluate_scores(P, T, ["r_precision@3"]), ValueError, r"metric 'r_precision' takes no '@k' cutoff"),
    ("no @r", lambda: rc.evaluate_scores(P, T, ["mrr@r"]), ValueError, r"metric 'mrr' takes no '@r' cutoff"),
    ("no keys", lambda: rc.evaluate_scores(P, T, []), ValueError, r"metrics must name at least one key"),
    ("key not str", lambda: rc.evaluate_scores(P, T, [10]), TypeError, r"metric keys must be strings like 'ndcg@10'; got 10 of type int"),
    ("duplicate key", lambda: rc.evaluate_scores(P, T, ["mrr", "mrr"]), ValueError, r"metric key 'mrr' is given twice"),
    ("NaN preds", lambda: rc.evaluate_scores(NAN, T, ["ndcg@2"]), ValueError, r"preds contain NaN or inf"),
    ("inf preds", lambda: rc.evaluate_scores(INF, T, ["ndcg@2"]), ValueError, r"preds contain NaN or inf"),
    ("huge finite preds are fine but NaN target", lambda: rc.evaluate_scores(torch.full((2, 3), 3e38), NAN, ["ndcg@2"]),
     ValueError, r"target contains NaN or inf"),
    ("negative gains", lambda: rc.evaluate_scores(P, torch.tensor([[1, -2, 0], [0, 0, 1]]), ["ndcg@2"]),
     ValueError, r"target contains negative gains; gains must be >= 0"),
    ("different devices", lambda: rc.evaluate_scores(P, T.to("meta"), ["ndcg@2"]),
     ValueError, r"preds and target must be on the same device; got cpu and meta"),
    ("indexes wrong length", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"], indexes=I[:5]),
     ValueError, r"indexes must have one entry per prediction; got 5 indexes for 6 predictions"),
    ("indexes float", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"], indexes=I.float()),
     TypeError, r"indexes must be an integer tensor; got torch.float32"),
    ("indexes bool", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"], indexes=I.bool()),
     TypeError, r"indexes must be an integer tensor; got torch.bool"),
    ("indexes 2-d", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"], indexes=I.view(2, 3)),
     ValueError, r"with indexes, preds, target and indexes must be 1-D"),
    ("indexes other device", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"], indexes=I.to("meta")),
     ValueError, r"preds and target and indexes must be on the same device; got cpu and cpu and meta"),
    ("mask dtype", lambda: rc.evaluate_scores(P, T, ["ndcg@2"], mask=torch.ones(2, 3)),
     TypeError, r"mask must be a bool tensor; got torch.float32"),
    ("mask shape", lambda: rc.evaluate_scores(P, T, ["ndcg@2"], mask=torch.ones(2, 2, dtype=torch.bool)),
     ValueError, r"mask must have the shape of preds; got \(2, 2\) and \(2, 3\)"),
    ("mask with flat", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"], indexes=I, mask=torch.ones(6, dtype=torch.bool)),
     ValueError, r"mask is for dense"),
    ("ties unknown", lambda: rc.evaluate_scores(P, T, ["ndcg@2"], ties="random"), ValueError,
     r"ties must be one of 'stable', 'expected', 'optimistic', 'pessimistic'; got 'random'"),
    ("auroc@k expected", lambda: rc.evaluate_scores(P, T, ["auroc@2"], ties="expected"),
     NotImplementedError, r"auroc@2 has no closed form under ties='expected'"),
    ("empty policy", lambda: rc.evaluate_scores(P, T, ["ndcg@2"], empty="drop"),
     ValueError, r"empty must be one of 'skip', 'zero', 'one', 'error'; got 'drop'"),
    ("reduce", lambda: rc.evaluate_scores(P, T, ["ndcg@2"], reduce="sum"),
     ValueError, r"reduce must be one of 'mean', 'median', 'min', 'max', 'none'; got 'sum'"),
    ("categories length", lambda: rc.evaluate_scores(P, T, ["ndcg@2"], categories=torch.tensor([0, 1, 2])),
     ValueError, r"categories must have one entry per query \(row\); got 3 for 2"),
    ("categories float", lambda: rc.evaluate_scores(P, T, ["ndcg@2"], categories=torch.tensor([0.5, 1.0])),
     TypeError, r"categories must be an integer tensor or a sequence of labels; got torch.float32"),
    ("flat categories vary inside a query", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"], indexes=I, categories=torch.tensor([0, 0, 1, 1, 1, 1])),
     ValueError, r"categories must be the same for every entry of a query"),
    ("flat categories length", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"], indexes=I, categories=torch.tensor([0, 1])),
     ValueError, r"categories must have one entry per prediction"),
]


@pytest.mark.parametrize("call,exc,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


# -- one check, three faces -------------------------------------------------------------
# Each check lives once, in retrieval_core.validate; the core's entry points, the ignite
# adapters and the Lightning adapters call it. Each row gives one bad input to every face
# that takes it and asserts the same exception type and the same message there, with the
# inputs named as that face names them (ignite's ``y_pred``/``y``, the adapters' batch
# ``embeddings``/``labels``/``ids`` for the core's ``query``/``query_labels``/``query_ids``).
# ignite also puts the metric's name in front of what it checks per batch.



CORE, IGNITE, LIGHTNING = "core", "ignite", "lightning"
ALL = (CORE, IGNITE, LIGHTNING)
ADAPTERS = (IGNITE, LIGHTNING)
NAMES = {
    CORE: dict(p="preds", t="target", p_has="preds contain", t_has="target contains", dims="[queries, candidates]",
               hint=", or 1-D with indexes=", x="query", x_rows="items", labels="query_labels", ids="query_ids",
               unit="embedding", remedy="evaluate_embeddings computes them"),
    IGNITE: dict(p="y_pred", t="y", p_has="y_pred contains", t_has="y contains", dims="[batch, items]", hint="",
                 x="embeddings", x_rows="batch", labels="labels", ids="ids", unit="row", remedy="use EmbeddingMetrics"),
    LIGHTNING: dict(p="preds", t="target", p_has="preds contain", t_has="target contains", dims="[queries, candidates]",
                    hint="", x="embeddings", x_rows="batch", labels="labels", ids="ids", unit="row",
                    remedy="use EmbeddingMetrics"),
}

SP = torch.tensor([[0.9, 0.2, 0.5, 0.1], [0.1, 0.8, 0.3, 0.4], [0.3, 0.2, 0.1, 0.7]])
ST = torch.tensor([[1, 0, 0, 1], [0, 0, 1, 0], [1, 1, 0, 0]])
EX = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
EL = torch.tensor([0, 0, 1, 1])
EMH = torch.tensor([[1, 0], [0, 1], [1, 1], [0, 1]])


def scores(face, preds=SP, target=ST, options=None, **rows):
    """Score mode on one face: ``rows`` are the per-query inputs (ids, categories, mask)."""
    options = options or {}
    if face == CORE:
        return rc.evaluate_scores(preds, target, ["ndcg@2"], **options, **rows)
    if face == IGNITE:
        metric = ig.RankingMetrics(["ndcg@2"], **options)
        metric.update({"y_pred": preds, "y": target, **rows})
        return metric.compute()
    metric = lt.RankingMetrics(["ndcg@2"], **options)
    metric.update(preds, target, **rows)
    return metric.compute()


def embeddings(face, x=EX, labels=EL, options=None, metrics=("cmc@1",), earlier=None, **rows):
    """Embedding mode on one face; ``earlier``: an (embeddings, labels) batch the adapters see first."""
    options = options or {}
    if face == CORE:
        ids = {"query_ids": rows.pop("ids")} if "ids" in rows else {}
        return rc.evaluate_embeddings(x, labels, list(metrics), **options, **ids, **rows)
    if face == IGNITE:
        metric = ig.EmbeddingMetrics(list(metrics), **options)
        if earlier is not None:
            metric.update(earlier)
        metric.update({"embeddings": x, "labels": labels, **rows})
        return metric.compute()
    metric = lt.EmbeddingMetrics(list(metrics), **options)
    if earlier is not None:
        metric.update(*earlier)
    metric.update(x, labels, **rows)
    return metric.compute()


FACE_CASES = [
    # (id, faces, call(face), exception, message template filled with NAMES[face])
    # score mode: structure, per batch
    ("scores shapes", ALL, lambda f: scores(f, target=ST[:, :3]), ValueError,
     "{p} and {t} must be 2-D {dims} of the same shape{hint}; got (3, 4) and (3, 3)"),
    ("scores 1-D", ALL, lambda f: scores(f, SP[0], ST[0]), ValueError,
     "{p} and {t} must be 2-D {dims} of the same shape{hint}; got (4,) and (4,)"),
    ("preds not a tensor", ALL, lambda f: scores(f, preds=SP.tolist()), TypeError, "{p} must be a torch.Tensor; got list"),
    ("bool preds", ALL, lambda f: scores(f, preds=SP > 0.5), TypeError,
     "{p} must be a floating-point or integer tensor; got torch.bool"),
    ("complex target", ALL, lambda f: scores(f, target=ST.to(torch.complex64)), TypeError,
     "{t} must be a bool, integer or floating-point tensor; got torch.complex64"),
    ("target on another device", ALL, lambda f: scores(f, target=ST.to("meta")), ValueError,
     "{p} and {t} must be on the same device; got cpu and meta"),
    ("mask dtype", (CORE, LIGHTNING), lambda f: scores(f, mask=torch.ones(3, 4)), TypeError,
     "mask must be a bool tensor; got torch.float32"),
    ("mask shape", (CORE, LIGHTNING), lambda f: scores(f, mask=torch.ones(3, 3, dtype=torch.bool)), ValueError,
     "mask must have the shape of {p}; got (3, 3) and (3, 4)"),
    # score mode: values, read once (at compute in the adapters)
    ("NaN scores", ALL, lambda f: scores(f, preds=SP.masked_fill(ST.bool(), float("nan"))), ValueError,
     "{p_has} NaN or inf; scores must be finite"),
    ("inf gains", ALL, lambda f: scores(f, target=ST.double().masked_fill(ST.bool(), float("inf"))), ValueError,
     "{t_has} NaN or inf (or gains above 2^960); gains must be finite and >= 0, and at most 2^960 (about 1e289) "
     "so that sums of them fit float64"),
    ("huge gains", ALL, lambda f: scores(f, target=ST.double().masked_fill(ST.bool(), 2.0**961)), ValueError,
     "{t_has} NaN or inf (or gains above 2^960); gains must be finite and >= 0, and at most 2^960 (about 1e289) "
     "so that sums of them fit float64"),
    ("negative gains", ALL, lambda f: scores(f, target=ST - 1), ValueError, "{t_has} negative gains; gains must be >= 0"),
    # per-row inputs of the adapters
    ("ids length", ADAPTERS, lambda f: scores(f, ids=torch.arange(2)), ValueError,
     "ids must be 1-D with one entry per row; got shape (2,) for 3 rows"),
    ("ids float", ADAPTERS, lambda f: scores(f, ids=torch.rand(3)), TypeError, "ids must be an integer tensor; got torch.float32"),
    ("categories of strings", ADAPTERS, lambda f: scores(f, categories=["a", "b", "c"]), TypeError,
     "categories must be a 1-D integer tensor or a list of integers; got ['a', 'b', 'c']"),
    ("compact with ids", ADAPTERS, lambda f: scores(f, options=dict(compact=True), ids=torch.arange(3)), ValueError,
     "compact=True keeps only sums and counts; it cannot take 'ids' (de-duplication and per-category results "
     "need per-query values): use compact=False"),
    # score mode: options
    ("ties unknown", ALL, lambda f: scores(f, options=dict(ties="random")), ValueError,
     "ties must be one of 'stable', 'expected', 'optimistic', 'pessimistic'; got 'random'"),
    ("empty policy", ALL, lambda f: scores(f, options=dict(empty="drop")), ValueError,
     "empty must be one of 'skip', 'zero', 'one', 'error'; got 'drop'"),
    ("reduce", ALL, lambda f: scores(f, options=dict(reduce="sum")), ValueError,
     "reduce must be one of 'mean', 'median', 'min', 'max', 'none'; got 'sum'"),
    ("compact with median", ADAPTERS, lambda f: scores(f, options=dict(compact=True, reduce="median")), ValueError,
     "compact=True keeps sums and counts, so reduce must be 'mean'; got 'median'"),
    ("compact not a bool", ADAPTERS, lambda f: scores(f, options=dict(compact="yes")), TypeError, "compact must be a bool; got 'yes'"),
    ("set-level key in score mode", ALL,
     lambda f: rc.evaluate_scores(SP, ST, ["nmi"]) if f == CORE else (ig if f == IGNITE else lt).RankingMetrics(["nmi"]),
     ValueError, "nmi: embedding-set metrics need embeddings; {remedy}"),
    # embedding mode: structure, per batch in the adapters
    ("embeddings 1-D", ALL, lambda f: embeddings(f, x=EX[:, 0]), ValueError, "{x} must be 2-D [{x_rows}, dim]; got shape (4,)"),
    ("integer embeddings for cosine", ALL, lambda f: embeddings(f, x=EX.long()), TypeError,
     "{x} must be a floating-point tensor (integer or bool codes only with distance='hamming'); got torch.int64"),
    ("labels length", ALL, lambda f: embeddings(f, labels=EL[:3]), ValueError,
     "{labels} must have one entry per embedding; got shape (3,) for 4 embeddings"),
    ("labels float", ALL, lambda f: embeddings(f, labels=EL.float() / 4), ValueError,
     "{labels} must be integer class labels; got 0.25 at position 2 (float labels are taken when every value is a "
     "whole number within int64)"),
    ("labels 3-D", ALL, lambda f: embeddings(f, labels=EMH.unsqueeze(2)), ValueError,
     "{labels} must be 1-D class labels or 2-D multi-hot [N, classes]; got shape (4, 2, 1)"),
    ("multi-hot float", ALL, lambda f: embeddings(f, labels=EMH.float() * 0.5), ValueError,
     "{labels} as multi-hot [N, classes] must hold only 0 and 1; got 0.5 at position (0, 0)"),
    ("ids shape", ALL, lambda f: embeddings(f, ids=torch.arange(4).view(2, 2)), ValueError,
     "{ids} must be 1-D with one entry per {unit}; got shape (2, 2) for 4 {unit}s"),
    ("ids float (embeddings)", ALL, lambda f: embeddings(f, ids=torch.arange(4.0)), TypeError,
     "{ids} must be an integer tensor; got torch.float32"),
    ("flags float", ADAPTERS, lambda f: embeddings(f, is_query=torch.ones(4)), TypeError,
     "is_query must be a bool tensor; got torch.float32 (0/1 integers are taken too)"),
    ("another dimension than earlier batches", ADAPTERS, lambda f: embeddings(f, earlier=(torch.rand(2, 3), EL[:2])),
     ValueError, "embeddings of every batch must have the same dimension; got 2 after 3"),
    ("multi-hot after class labels", ADAPTERS, lambda f: embeddings(f, labels=EMH, earlier=(EX[:2], EL[:2])), ValueError,
     "labels of every batch must have the same shape past the batch dimension; got (2,) after () "
     "(multi-hot labels of 2 classes after 1-D class labels)"),
    ("class labels after multi-hot", ADAPTERS, lambda f: embeddings(f, earlier=(EX[:2], EMH[:2])), ValueError,
     "labels of every batch must have the same shape past the batch dimension; got () after (2,) "
     "(1-D class labels after multi-hot labels of 2 classes)"),
    ("another number of classes", ADAPTERS,
     lambda f: embeddings(f, labels=torch.ones(4, 3, dtype=torch.long), earlier=(EX[:2], EMH[:2])), ValueError,
     "labels of every batch must have the same shape past the batch dimension; got (3,) after (2,) "
     "(multi-hot labels of 3 classes after multi-hot labels of 2 classes)"),
    # embedding mode: values, read once (at compute in the adapters)
    ("NaN embeddings", ALL, lambda f: embeddings(f, x=EX.masked_fill(EL.bool().unsqueeze(1), float("nan"))), ValueError,
     "query embeddings contain NaN or inf"),
    ("hamming codes", ALL, lambda f: embeddings(f, options=dict(distance="hamming")), ValueError,
     "distance='hamming' needs binary codes in {{0, 1}} or {{-1, 1}}; query has other values"),
    ("multi-hot values", ALL, lambda f: embeddings(f, labels=EMH * 2), ValueError,
     "query_labels as multi-hot [N, classes] must hold only 0 and 1"),
    # embedding mode: options
    ("distance", ALL, lambda f: embeddings(f, options=dict(distance="manhattan")), ValueError,
     "distance must be one of 'cosine', 'dot', 'euclidean', 'squared_euclidean', 'hamming' or a callable; got 'manhattan'"),
    ("per_class", ALL, lambda f: embeddings(f, options=dict(per_class="micro")), ValueError,
     "per_class must be None, 'macro' or 'all'; got 'micro'"),
    ("per_class with reduce none", ALL, lambda f: embeddings(f, options=dict(per_class="macro", reduce="none")), ValueError,
     "per_class reduces over each label's queries; it cannot go with reduce='none'"),
    ("relevance not callable", ALL, lambda f: embeddings(f, options=dict(relevance="labels")), TypeError,
     "relevance must be a callable f(query_labels, gallery_labels) -> gains; got str"),
    ("memory_budget float", ALL, lambda f: embeddings(f, options=dict(memory_budget=1e9)), ValueError,
     "memory_budget must be an int (number of bytes); got 1000000000.0 of type float"),
    ("memory_budget bool", ALL, lambda f: embeddings(f, options=dict(memory_budget=True)), ValueError,
     "memory_budget must be an int (number of bytes); got True of type bool"),
    ("memory_budget zero", ALL, lambda f: embeddings(f, options=dict(memory_budget=0)), ValueError,
     "memory_budget must be a positive number of bytes; got 0"),
    ("empty policy (embeddings)", ALL, lambda f: embeddings(f, options=dict(empty="nan")), ValueError,
     "empty must be one of 'skip', 'zero', 'one', 'error'; got 'nan'"),
]


@pytest.mark.parametrize("faces,call,exc,template", [c[1:] for c in FACE_CASES], ids=[c[0] for c in FACE_CASES])
def test_same_check_same_message_on_every_face(faces, call, exc, template):
    for face in faces:
        with pytest.raises(exc) as info:
            call(face)
        assert type(info.value) is exc, face
        message = str(info.value)
        if face == IGNITE:  # the metric's name in front of its per-batch and compute checks
            message = re.sub(r"^(RankingMetrics|EmbeddingMetrics): ", "", message)
        assert message == template.format(**NAMES[face]), face


def test_memory_budget_none_is_the_default():
    want = rc.evaluate_embeddings(EX, EL, ["cmc@1", "map@r"])
    for face in ALL:
        got = embeddings(face, metrics=("cmc@1", "map@r"), options=dict(memory_budget=None))
        assert {k: float(got[k]) for k in ("cmc@1", "map@r")} == {k: float(want[k]) for k in ("cmc@1", "map@r")}, face
    assert rc.evaluate_embeddings(EX, EL, ["map@r"], memory_budget=64)["map@r"] == want["map@r"]  # tiny chunks


def test_dtype_changes_between_batches_compute_as_one_tensor():
    """Batches of float32 then float64 embeddings, bool then integer multi-hot labels:
    the adapters concatenate them (type promotion) and give the core's values on the
    whole, so these are not refused."""
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.5, 0.5]])
    labels = torch.tensor([[1, 0], [1, 1], [0, 1], [0, 1], [1, 0]])
    want = rc.evaluate_embeddings(x.double(), labels, ["map@r", "ndcg@3"])
    batches = [(x[:2].float(), labels[:2].bool()), (x[2:].double(), labels[2:])]
    ours = ig.EmbeddingMetrics(["map@r", "ndcg@3"])
    for b in batches:
        ours.update(b)
    got = ours.compute()
    theirs = lt.EmbeddingMetrics(["map@r", "ndcg@3"])
    for b in batches:
        theirs.update(*b)
    for result in (got, theirs.compute()):
        for k in ("map@r", "ndcg@3"):
            assert float(result[k]) == pytest.approx(float(want[k]), abs=1e-6), k
