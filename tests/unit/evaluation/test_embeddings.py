"""Embedding mode (``evaluate_embeddings``) against a brute-force full-matrix reference.

The reference below holds the whole ``[Q, G]`` similarity matrix in float64 (explicit
formulas, one value per pair, so equal embeddings give bitwise-equal similarities),
drops excluded gallery items from each row (they count neither in R nor in the
candidates), orders each row by (similarity desc, gallery index asc) with a stable
sort, builds ``Ranking.from_relevance`` and runs each key's kernel on it, marking
empty queries as the core does. The core must give the same per-query values
(``reduce="none"``) for every per-query key, every distance, with and without a
separate gallery, with id exclusion, multi-hot labels and a custom relevance, and
for every chunk size. Set-level keys (nmi, ami, pcf, fnmr) are tested elsewhere.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import pytest
import torch
from torch import Tensor

import retrieval_core as rc

NAN = float("nan")
KS = (1, 3, 7)
DISTANCES = ("cosine", "dot", "euclidean", "squared_euclidean")


def manhattan(a: Tensor, b: Tensor) -> Tensor:
    """A callable distance the core does not know (L1), for ``distance=callable``."""
    return (a.unsqueeze(1) - b.unsqueeze(0)).abs().sum(-1)


# ---------------------------------------------------------------- keys


def per_query_keys(ks: Sequence[int] = KS) -> List[str]:
    """Every per-query key of the registry: bare name, ``@k`` for each k, ``@r``, ``@p``; plus the cmc alias."""
    keys = []
    for name, spec in rc.REGISTRY.items():
        if not spec.per_query:
            continue
        if spec.plain:
            keys.append(name)
        if "k" in spec.cutoffs:
            keys += [f"{name}@{k}" for k in ks]
        if "r" in spec.cutoffs and spec.plain != "r":
            keys.append(f"{name}@r")
        if "x" in spec.cutoffs:  # a float parameter (rbp@p): the whole list
            keys += [f"{name}@0.5", f"{name}@0.9"]
    keys += [f"cmc@{k}" for k in ks]
    return keys


ALL_KEYS = per_query_keys()
K_KEYS = [k for k in ALL_KEYS if k.split("@")[-1].isdigit()]  # top-k path only (depth = max k)
R_KEYS = [k for k in ALL_KEYS if k.endswith("@r") or k == "r_precision"] + K_KEYS  # depth = max(k, R of chunk)
KEY_GROUPS = {"k": K_KEYS, "r": R_KEYS, "all": ALL_KEYS}


def test_key_lists_cover_the_registry():
    names = {k.split("@")[0] for k in ALL_KEYS}
    assert names == {n for n, s in rc.REGISTRY.items() if s.per_query} | {"cmc"}
    assert {"map_hits@3", "precision_capped@7", "map@r", "r_precision", "ndcg_exp", "wap@1", "auroc"} <= set(ALL_KEYS)


# ---------------------------------------------------------------- brute-force reference


def reference_similarity(query: Tensor, gallery: Tensor, distance) -> Tensor:
    """``[Q, G]`` float64 similarities (larger = closer), each pair computed on its own."""
    if callable(distance):
        return -distance(query, gallery).to(torch.float64)
    q, g = query.to(torch.float64), gallery.to(torch.float64)
    if distance == "hamming":
        return -(((q > 0).unsqueeze(1) != (g > 0).unsqueeze(0)).sum(-1)).to(torch.float64)
    if distance == "cosine":
        q = q / q.norm(dim=1, keepdim=True)
        g = g / g.norm(dim=1, keepdim=True)
    if distance in ("cosine", "dot"):
        return (q.unsqueeze(1) * g.unsqueeze(0)).sum(-1)
    sq = ((q.unsqueeze(1) - g.unsqueeze(0)) ** 2).sum(-1)
    if distance == "euclidean":
        return -sq.sqrt()
    assert distance == "squared_euclidean"
    return -sq


def reference_gains(query_labels: Tensor, gallery_labels: Tensor, relevance=None) -> Tensor:
    if relevance is not None:
        return relevance(query_labels, gallery_labels).to(torch.float64)
    if query_labels.ndim == 1:
        return (query_labels.unsqueeze(1) == gallery_labels.unsqueeze(0)).to(torch.float64)
    return query_labels.to(torch.float64) @ gallery_labels.to(torch.float64).T  # shared labels


def brute_force(
    query: Tensor,
    query_labels: Tensor,
    keys: Sequence[str],
    *,
    gallery: Optional[Tensor] = None,
    gallery_labels: Optional[Tensor] = None,
    distance="cosine",
    query_ids: Optional[Tensor] = None,
    gallery_ids: Optional[Tensor] = None,
    relevance=None,
) -> Dict[str, Tensor]:
    """Per-query values (NaN = empty query) from the full matrix, row by row."""
    if gallery is None:
        gallery, gallery_labels = query, query_labels
        if query_ids is None:
            query_ids = torch.arange(query.shape[0])
        gallery_ids = query_ids
    sim = reference_similarity(query, gallery, distance)
    gain = reference_gains(query_labels, gallery_labels, relevance)
    n_query, n_gallery = sim.shape
    if query_ids is None:
        eligible = torch.ones(n_query, n_gallery, dtype=torch.bool)
    else:
        eligible = query_ids.unsqueeze(1) != gallery_ids.unsqueeze(0)
    relevance_in_order = torch.zeros(n_query, n_gallery, dtype=torch.float64)
    valid = torch.zeros(n_query, n_gallery, dtype=torch.bool)
    for i in range(n_query):
        cols = eligible[i].nonzero().squeeze(1)  # increasing gallery index: excluded items dropped
        order = torch.sort(sim[i, cols], descending=True, stable=True).indices  # ties: lower index first
        ranked = cols[order]
        relevance_in_order[i, : ranked.numel()] = gain[i, ranked]
        valid[i, : ranked.numel()] = True
    ranking = rc.Ranking.from_relevance(relevance_in_order, valid)
    out = {}
    for key in keys:
        metric = rc.parse_metrics([key])[0]
        values = metric(ranking).clone()
        values[metric.spec.empty(ranking)] = NAN
        out[key] = values
    return out


def ours(query, query_labels, keys, **kwargs) -> Dict[str, Tensor]:
    result = rc.evaluate_embeddings(query, query_labels, list(keys), reduce="none", **kwargs)
    assert list(result)[: len(keys)] == list(keys)
    return {k: result[k] for k in keys}


def assert_same(got: Dict[str, Tensor], expected: Dict[str, Tensor], atol: float = 1e-12) -> None:
    assert set(got) == set(expected)
    for key in expected:
        g, e = got[key].to(torch.float64), expected[key]
        assert g.shape == e.shape, key
        torch.testing.assert_close(g, e, rtol=1e-12, atol=atol, equal_nan=True, msg=lambda m: f"{key}: {m}")


def assert_identical(a: Dict[str, Tensor], b: Dict[str, Tensor]) -> None:
    """Bitwise equal values, NaN in the same places."""
    assert list(a) == list(b)
    for key in a:
        x, y = a[key], b[key]
        assert torch.equal(torch.isnan(x), torch.isnan(y)), key
        assert torch.equal(x.nan_to_num(-7.0), y.nan_to_num(-7.0)), key


# ---------------------------------------------------------------- data


def clustered(n: int, dim: int, n_labels: int, seed: int, *, singletons: int = 0, dtype=torch.float64):
    """Points around ``n_labels`` centres (so metrics are neither 0 nor 1), plus
    ``singletons`` points with labels of their own (empty queries in self mode)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, n_labels, (n,), generator=g)
    labels[:singletons] = 100 + torch.arange(singletons)
    centres = torch.randn(n_labels + 1, dim, generator=g, dtype=torch.float64)
    x = centres[labels.clamp(max=n_labels)] + torch.randn(n, dim, generator=g, dtype=torch.float64)
    return x.to(dtype), labels


def data(mode: str, seed: int = 0, dim: int = 8):
    """kwargs for both the core and the reference, by gallery mode.

    self: the query set is its own gallery (self excluded); self_ids: plus sequence
    ids shared by three items each; gallery: a separate gallery; gallery_ids: plus
    ids shared by several queries and gallery items (including a query whose every
    gallery item is excluded, and one whose relevant items are all excluded).
    """
    x, labels = clustered(90, dim, 5, seed, singletons=2)
    q, ql, gal, gl = x[:40], labels[:40], x[40:], labels[40:].clone()
    if mode == "self":
        return dict(query=q, query_labels=ql)
    if mode == "self_ids":
        return dict(query=q, query_labels=ql, query_ids=torch.arange(40) // 3)
    kw = dict(query=q, query_labels=ql, gallery=gal, gallery_labels=gl)
    if mode == "gallery":
        return kw
    assert mode == "gallery_ids"
    g = torch.Generator().manual_seed(seed + 7)
    qids = torch.randint(0, 8, (40,), generator=g)
    gids = torch.randint(0, 8, (50,), generator=g)
    qids[0] = 99  # query 0: nothing excluded
    # query 2: all of its relevant gallery items excluded (R = 0 after exclusion)
    relevant2 = gl == ql[2]
    gids[relevant2] = qids[2]
    kw.update(query_ids=qids, gallery_ids=gids)
    return kw


def split(kw):
    kw = dict(kw)
    return kw.pop("query"), kw.pop("query_labels"), kw


MODES = ("self", "self_ids", "gallery", "gallery_ids")


def test_data_has_the_cases_we_want():
    q, ql, kw = split(data("gallery_ids"))
    r = brute_force(q, ql, ["r_precision", "precision_adaptive@7"], **kw)
    assert torch.isnan(r["r_precision"][2])  # relevant items all excluded
    assert int(torch.isnan(r["r_precision"]).sum()) >= 1
    q, ql, kw = split(data("self"))
    assert int(torch.isnan(brute_force(q, ql, ["map"], **kw)["map"]).sum()) == 2  # the singletons


# ---------------------------------------------------------------- against the reference


@pytest.mark.parametrize("group", list(KEY_GROUPS))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("distance", DISTANCES + ("manhattan",))
def test_matches_brute_force(distance, mode, group):
    distance = manhattan if distance == "manhattan" else distance
    q, ql, kw = split(data(mode, seed=10 * MODES.index(mode) + list(KEY_GROUPS).index(group)))
    keys = KEY_GROUPS[group]
    assert_same(ours(q, ql, keys, distance=distance, **kw), brute_force(q, ql, keys, distance=distance, **kw))


def test_float32_embeddings_match_brute_force():
    q, ql, kw = split(data("gallery_ids", seed=3))
    q32 = q.float()
    kw32 = dict(kw, gallery=kw["gallery"].float())
    for distance in DISTANCES:
        assert_same(ours(q32, ql, ALL_KEYS, distance=distance, **kw32),
                    brute_force(q32, ql, ALL_KEYS, distance=distance, **kw32), atol=1e-9)


def hamming_data(n: int, bits: int, seed: int, n_labels: int = 4):
    """{0,1} codes with few bits: many exact ties (and duplicate codes)."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 2, (n, bits), generator=g)
    labels = torch.randint(0, n_labels, (n,), generator=g)
    return codes, labels


@pytest.mark.parametrize("form", ["int01", "float01", "pm1", "bool"])
@pytest.mark.parametrize("mode", ["self", "gallery_ids"])
def test_hamming_codes_match_brute_force(form, mode):
    codes, labels = hamming_data(60, 6, seed=11)
    convert = {
        "int01": lambda c: c,
        "float01": lambda c: c.to(torch.float32),
        "pm1": lambda c: (2 * c - 1).to(torch.float64),
        "bool": lambda c: c.bool(),
    }[form]
    q, ql = convert(codes[:40]), labels[:40]
    if mode == "self":
        kw = {}
    else:
        g = torch.Generator().manual_seed(5)
        kw = dict(gallery=convert(codes[20:]), gallery_labels=labels[20:],
                  query_ids=torch.randint(0, 6, (40,), generator=g), gallery_ids=torch.randint(0, 6, (40,), generator=g))
    for keys in KEY_GROUPS.values():
        assert_same(ours(q, ql, keys, distance="hamming", **kw), brute_force(q, ql, keys, distance="hamming", **kw))


def test_pm1_and_01_codes_give_the_same_values():
    codes, labels = hamming_data(50, 8, seed=2)
    a = rc.evaluate_embeddings(codes, labels, ALL_KEYS, distance="hamming", reduce="none")
    b = rc.evaluate_embeddings(2.0 * codes - 1, labels, ALL_KEYS, distance="hamming", reduce="none")
    assert_identical(a, b)


def multi_hot(n: int, classes: int, seed: int, dtype=torch.int64) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    labels = (torch.rand(n, classes, generator=g) < 0.3).to(dtype)
    labels[0] = 0  # a query sharing no label with anyone: empty
    return labels


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.uint8])
@pytest.mark.parametrize("mode", ["self", "self_ids", "gallery_ids"])
@pytest.mark.parametrize("distance", ["cosine", "euclidean"])
def test_multi_hot_graded_match_brute_force(distance, mode, dtype):
    """Gain = number of shared labels: graded ndcg, ndcg_exp, dcg, acg, wap (and all others)."""
    q, _, kw = split(data(mode, seed=21))
    ql = multi_hot(40, 5, seed=22, dtype=dtype)
    if "gallery" in kw:
        kw["gallery_labels"] = multi_hot(50, 5, seed=23, dtype=dtype)
    expected = brute_force(q, ql, ALL_KEYS, distance=distance, **kw)
    for key in ("ndcg@7", "acg@7"):
        assert not torch.isnan(expected[key]).all()
    gains_seen = set(reference_gains(ql, kw.get("gallery_labels", ql)).unique().tolist())
    assert {0.0, 1.0, 2.0} <= gains_seen  # really graded
    assert_same(ours(q, ql, ALL_KEYS, distance=distance, **kw), expected)


def graded_relevance(query_labels: Tensor, gallery_labels: Tensor) -> Tensor:
    """Custom relevance on 1-D float "positions": 2 if within 0.5, 1 if within 1.5, else 0."""
    d = (query_labels.unsqueeze(1) - gallery_labels.unsqueeze(0)).abs()
    return (d <= 0.5).to(torch.float64) + (d <= 1.5).to(torch.float64)


@pytest.mark.parametrize("mode", ["self", "self_ids", "gallery", "gallery_ids"])
def test_callable_relevance_matches_brute_force(mode):
    q, _, kw = split(data(mode, seed=31))
    g = torch.Generator().manual_seed(32)
    ql = torch.rand(40, generator=g, dtype=torch.float64) * 10  # float labels are fine with a relevance
    if "gallery" in kw:
        kw["gallery_labels"] = torch.rand(50, generator=g, dtype=torch.float64) * 10
    kw["relevance"] = graded_relevance
    for distance in ("cosine", manhattan):
        assert_same(ours(q, ql, ALL_KEYS, distance=distance, **kw), brute_force(q, ql, ALL_KEYS, distance=distance, **kw))


def test_bool_relevance_equals_label_equality():
    q, ql, kw = split(data("gallery_ids", seed=41))
    same = lambda a, b: a.unsqueeze(1) == b.unsqueeze(0)  # noqa: E731
    assert_same(ours(q, ql, ALL_KEYS, relevance=same, **kw), ours(q, ql, ALL_KEYS, **kw))


def test_int_valued_callable_distance_with_exclusion():
    """A callable may return integer distances (e.g. bit counts); with exclusion
    (self-gallery) they must give the values of the same distances as floats."""
    codes, labels = hamming_data(30, 6, seed=4)
    bit_count = lambda a, b: (a.unsqueeze(1) != b.unsqueeze(0)).sum(-1)  # noqa: E731  int64
    as_float = lambda a, b: bit_count(a, b).to(torch.float64)  # noqa: E731
    expected = brute_force(codes, labels, ALL_KEYS, distance=as_float)
    assert_same(ours(codes, labels, ALL_KEYS, distance=as_float), expected)
    assert_same(ours(codes, labels, ALL_KEYS, distance=bit_count), expected)


def test_infinite_callable_distance_ranks_last_or_is_refused():
    """An infinite distance means "as far as can be": the item is still a candidate,
    ranked after every finite one. Either that, or a clear ValueError; never the
    item silently dropped from the list while still counted in R."""
    q, ql, kw = split(data("gallery", seed=51))

    def capped(big: float):
        def dist(a, b):
            d = manhattan(a, b)
            return torch.where(d > d.median(), torch.full_like(d, big), d)
        return dist

    expected = ours(q, ql, ALL_KEYS, distance=capped(1e300), **kw)  # finite stand-in for "infinitely far"
    try:
        got = ours(q, ql, ALL_KEYS, distance=capped(float("inf")), **kw)
    except ValueError:
        return
    assert_same(got, expected)


def test_nan_callable_distance_is_refused():
    q, ql, kw = split(data("gallery", seed=52))

    def dist(a, b):
        d = manhattan(a, b)
        d[0, 0] = NAN
        return d

    with pytest.raises(ValueError, match=r"(?i)nan"):
        rc.evaluate_embeddings(q, ql, ["map", "cmc@1"], distance=dist, **kw)


# ---------------------------------------------------------------- a toy computed by hand


def test_toy_by_hand():
    """Points on a line, self gallery (cosine would collapse them; use euclidean).

    x:      0.0  0.1  0.3  1.0  1.2
    label:  a    b    a    b    b
    query 0 ranks 1 (b), 2 (a), 3, 4 -> first hit at 2: mrr 1/2, map 1/2, r_precision 0.
    query 2 ranks 1 (b, 0.2) before 0 (a, 0.3): cmc@1 = 0.
    query 3 ranks 4 (b), 2, 1 (b), 0 -> hits at 1 and 3: map (1 + 2/3) / 2.
    """
    x = torch.tensor([[0.0], [0.1], [0.3], [1.0], [1.2]], dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 1, 1])
    r = ours(x, labels, ["cmc@1", "mrr", "map", "r_precision", "precision@2", "ndcg@2"], distance="euclidean")
    assert r["cmc@1"].tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert r["mrr"][0].item() == 0.5 and r["map"][0].item() == 0.5 and r["r_precision"][0].item() == 0.0
    assert math.isclose(r["map"][3].item(), (1 + 2 / 3) / 2)
    assert r["precision@2"][3].item() == 0.5
    assert math.isclose(r["ndcg@2"][0].item(), (1 / math.log2(3)) / 1.0)


# ---------------------------------------------------------------- chunking and determinism


def tie_heavy(n: int = 100, bits: int = 6, seed: int = 61):
    codes, labels = hamming_data(n, bits, seed, n_labels=5)
    return codes, labels


@pytest.mark.parametrize("group", list(KEY_GROUPS))
@pytest.mark.parametrize("mode", ["self", "gallery_ids"])
def test_chunk_size_invariance_on_tied_hamming_codes(mode, group):
    codes, labels = tie_heavy()
    kw = {}
    if mode == "gallery_ids":
        g = torch.Generator().manual_seed(62)
        kw = dict(gallery=codes[30:], gallery_labels=labels[30:],
                  query_ids=torch.randint(0, 10, (100,), generator=g), gallery_ids=torch.randint(0, 10, (70,), generator=g))
    keys = KEY_GROUPS[group]
    default = ours(codes, labels, keys, distance="hamming", **kw)
    for budget in (1, 1000, 24 * 100 * 7 + 5, 128 * 100 * 13 + 1):
        assert_identical(ours(codes, labels, keys, distance="hamming", memory_budget=budget, **kw), default)
    assert_same(default, brute_force(codes, labels, keys, distance="hamming", **kw))


@pytest.mark.parametrize("labels_kind", ["class", "multi_hot", "relevance"])
def test_chunk_size_invariance_float(labels_kind):
    q, ql, kw = split(data("gallery_ids", seed=71))
    if labels_kind == "multi_hot":
        ql, kw["gallery_labels"] = multi_hot(40, 4, 72), multi_hot(50, 4, 73)
    elif labels_kind == "relevance":
        ql, kw["gallery_labels"] = ql.double(), kw["gallery_labels"].double()
        kw["relevance"] = graded_relevance
    default = ours(q, ql, ALL_KEYS, **kw)
    for budget in (1, 24 * 50 * 3, 128 * 50 * 6):
        assert_identical(ours(q, ql, ALL_KEYS, memory_budget=budget, **kw), default)


def test_deterministic():
    codes, labels = tie_heavy()
    a = ours(codes, labels, ALL_KEYS, distance="hamming", memory_budget=5000)
    b = ours(codes, labels, ALL_KEYS, distance="hamming", memory_budget=5000)
    assert_identical(a, b)
    q, ql, kw = split(data("gallery_ids", seed=81))
    assert_identical(ours(q, ql, ALL_KEYS, **kw), ours(q, ql, ALL_KEYS, **kw))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean"])
def test_exact_duplicates_tie_by_gallery_index_for_any_chunk_size(distance, dtype):
    """Gallery items with bitwise-equal embeddings have equal similarity to every
    query, so the stable rule puts the lower gallery index first, whatever the chunk
    size. Here item j (irrelevant) and item j + n (relevant) are copies: a relevant
    item can never come first, so cmc@1 = 0 and map equals its brute-force value."""
    g = torch.Generator().manual_seed(91)
    n, dim = 37, 16
    base = torch.randn(n, dim, generator=g, dtype=dtype)
    gallery = torch.cat([base, base])
    gallery_labels = torch.cat([torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.long)])
    query = torch.randn(23, dim, generator=g, dtype=dtype)
    query_labels = torch.ones(23, dtype=torch.long)
    kw = dict(gallery=gallery, gallery_labels=gallery_labels, distance=distance)
    keys = ["cmc@1", "map", "precision@3", "mrr"]
    expected = brute_force(query, query_labels, keys, **kw)
    assert (expected["cmc@1"] == 0).all()
    for budget in (None, 1):
        assert_same(ours(query, query_labels, keys, memory_budget=budget, **kw), expected, atol=1e-9)


def test_progress_bar_gives_the_same_values():
    import tqdm  # noqa: F401  (a test dependency)
    q, ql, kw = split(data("gallery_ids", seed=82))
    assert_identical(ours(q, ql, K_KEYS, progress=True, memory_budget=2000, **kw), ours(q, ql, K_KEYS, **kw))


def test_half_precision_inputs_are_accepted():
    q, ql, kw = split(data("gallery", seed=83))
    q16 = q.to(torch.bfloat16)
    g16 = kw["gallery"].to(torch.bfloat16)
    got = ours(q16, ql, ALL_KEYS, gallery=g16, gallery_labels=kw["gallery_labels"])
    # the core widens half precision to float32; compare with the widened input
    expected = ours(q16.float(), ql, ALL_KEYS, gallery=g16.float(), gallery_labels=kw["gallery_labels"])
    assert_identical(got, expected)


# ---------------------------------------------------------------- exclusion and short lists


def test_item_with_the_query_id_is_never_retrieved_and_short_lists():
    """Gallery items 0-2 share the query's id and sit on top of it (and are relevant):
    only items 3 (relevant, farther) and 4 (irrelevant, nearer) are candidates."""
    query = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    gallery = torch.tensor([[1.0, 0.0], [1.0, 0.01], [1.0, 0.02], [0.0, 1.0], [1.0, 0.5]], dtype=torch.float64)
    gallery_labels = torch.tensor([0, 0, 0, 0, 1])
    kw = dict(gallery=gallery, gallery_labels=gallery_labels, query_ids=torch.tensor([7]),
              gallery_ids=torch.tensor([7, 7, 7, 1, 2]), distance="euclidean")
    keys = ["cmc@1", "cmc@2", "precision@4", "precision_adaptive@4", "precision_capped@4", "recall@4",
            "mrr", "map", "map@5", "map_hits@5", "r_precision", "fall_out@4", "auroc", "ndcg@4", "acg@5", "precision@5"]
    r = {k: v.item() for k, v in ours(query, torch.tensor([0]), keys, **kw).items()}
    assert r["cmc@1"] == 0.0 and r["cmc@2"] == 1.0
    assert r["precision@4"] == 0.25  # divides by k even past the end of the list
    assert r["precision@5"] == 0.2
    assert r["precision_adaptive@4"] == 0.5  # ... or by the 2 candidates
    assert r["precision_capped@4"] == 1.0 and r["recall@4"] == 1.0  # R = 1: excluded relevant items not counted
    assert r["mrr"] == 0.5 and r["map"] == 0.5 and r["map@5"] == 0.5 and r["map_hits@5"] == 0.5
    assert r["r_precision"] == 0.0
    assert r["fall_out@4"] == 1.0 and r["auroc"] == 0.0
    assert math.isclose(r["ndcg@4"], 1 / math.log2(3))
    assert r["acg@5"] == 0.2
    assert_same(ours(query, torch.tensor([0]), keys, **kw), brute_force(query, torch.tensor([0]), keys, **kw))


def test_self_is_excluded_even_when_duplicated_elsewhere():
    """With gallery=None the query's own row is excluded but an exact copy of it
    (another row, another id) is a candidate like any other."""
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.1, 1.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 0])
    r = ours(x, labels, ["cmc@1", "map"], distance="cosine")
    assert r["cmc@1"][[0, 1, 3]].tolist() == [1.0, 1.0, 0.0] and torch.isnan(r["cmc@1"][2])  # row 2: a label of its own
    assert_same(r, brute_force(x, labels, ["cmc@1", "map"]))
    # sequence ids: rows 0 and 1 are one sequence, so neither retrieves the other
    r = ours(x, labels, ["cmc@1", "map", "precision_adaptive@3"], query_ids=torch.tensor([5, 5, 6, 7]))
    assert r["cmc@1"][:2].tolist() == [1.0, 1.0]  # row 3 (label 0) is nearer than row 2
    assert_same(r, brute_force(x, labels, ["cmc@1", "map", "precision_adaptive@3"], query_ids=torch.tensor([5, 5, 6, 7])))
    assert r["precision_adaptive@3"][0].item() == 0.5  # 2 candidates left


def test_query_with_every_gallery_item_excluded():
    q, ql = clustered(4, 3, 2, seed=5)
    gal, gl = clustered(6, 3, 2, seed=6)
    qids = torch.tensor([1, 2, 3, 4])
    gids = torch.tensor([1, 1, 1, 1, 1, 1])  # query 0 has no candidate at all
    keys = per_query_keys((1, 3, 6))
    r = rc.evaluate_embeddings(q, ql, keys, gallery=gal, gallery_labels=gl, query_ids=qids, gallery_ids=gids, reduce="none")
    for key in keys:
        assert torch.isnan(r[key][0]), key
        assert int(r.n_empty[key]) >= 1
    assert_same({k: r[k] for k in keys},
                brute_force(q, ql, keys, gallery=gal, gallery_labels=gl, query_ids=qids, gallery_ids=gids))


def test_empty_queries_are_counted_and_skipped():
    q, ql, kw = split(data("self", seed=9))
    per_query = ours(q, ql, ["map", "cmc@1"], **kw)
    r = rc.evaluate_embeddings(q, ql, ["map", "cmc@1"], **kw)
    assert int(r.n_empty["map"]) == 2 and int(r.n_queries) == 40
    torch.testing.assert_close(r["map"], per_query["map"].nanmean())
    zero = rc.evaluate_embeddings(q, ql, ["map"], empty="zero", **kw)
    torch.testing.assert_close(zero["map"], per_query["map"].nan_to_num(0.0).mean())
    with pytest.raises(ValueError, match=r"empty='error' forbids them"):
        rc.evaluate_embeddings(q, ql, ["map"], empty="error", **kw)


# ---------------------------------------------------------------- per class and categories


def test_per_class_macro_and_all():
    q, ql, kw = split(data("self", seed=101))
    keys = ["cmc@1", "map@r", "precision@3"]
    per_query = ours(q, ql, keys)
    labels = sorted(set(ql.tolist()))
    macro = rc.evaluate_embeddings(q, ql, keys, per_class="macro")
    full = rc.evaluate_embeddings(q, ql, keys, per_class="all")
    for key in keys:
        per_label = torch.stack([per_query[key][ql == c].nanmean() for c in labels])
        # the two singleton labels have only empty queries: NaN, left out of the macro mean
        assert int(torch.isnan(per_label).sum()) == 2
        torch.testing.assert_close(macro[key], per_label.nanmean())
        torch.testing.assert_close(full[key], per_label.nanmean())
        for c, v in zip(labels, per_label):
            torch.testing.assert_close(full[f"{key}/class={c}"], v, equal_nan=True)
        assert not any(k.startswith(f"{key}/class=") for k in macro)
    # empty="zero": empty queries count 0, so every label has a value
    zero = rc.evaluate_embeddings(q, ql, keys, per_class="macro", empty="zero")
    for key in keys:
        per_label = torch.stack([per_query[key][ql == c].nan_to_num(0.0).mean() for c in labels])
        torch.testing.assert_close(zero[key], per_label.mean())


def test_per_class_with_separate_gallery_uses_query_labels():
    q, ql, kw = split(data("gallery_ids", seed=102))
    per_query = ours(q, ql, ["map"], **kw)
    r = rc.evaluate_embeddings(q, ql, ["map"], per_class="all", **kw)
    labels = sorted(set(ql.tolist()))
    per_label = torch.stack([per_query["map"][ql == c].nanmean() for c in labels])
    torch.testing.assert_close(r["map"], per_label.nanmean())
    assert {k for k in r if k.startswith("map/class=")} == {f"map/class={c}" for c in labels}


def test_per_class_groups_2d_labels_by_row():
    """Labels ``[N, 2]``, relevant = equal first column, points on a line (euclidean).
    Each query's list, nearest first, and R:
    a (0): c d b e f, R=2 (b, c): cmc@1 1, map@r P@1/2 = 1/2
    b (5.8): d c e a f, R=2 (a, c): cmc@1 0, map@r P@2/2 = 1/4
    c (2): d a b e f, R=2 (a, b): cmc@1 0, map@r P@2/2 = 1/4
    d (3): c b a e f, R=1 (e): 0, 0;  e (10): b d c a f, R=1 (d): 0, 0
    f (50): nothing relevant (R=0): skipped.
    Rows [0, 0] = {a, c}, [0, 1] = {b}, [1, 0] = {d, e}, [2, 0] = {f}: the macro mean
    is over the three rows with a value, not over the relevance's classes (first column:
    map@r (1/2 + 1/4 + 1/4)/3 and 0, mean 1/6) nor over the queries (1/5)."""
    x = torch.tensor([[0.0], [5.8], [2.0], [3.0], [10.0], [50.0]], dtype=torch.float64)
    labels = torch.tensor([[0, 0], [0, 1], [0, 0], [1, 0], [1, 0], [2, 0]])
    kw = dict(distance="euclidean", relevance=FIRST_COLUMN)
    per_row = {"[0, 0]": (1 / 2, 3 / 8), "[0, 1]": (0.0, 1 / 4), "[1, 0]": (0.0, 0.0), "[2, 0]": (NAN, NAN)}
    macro = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], per_class="macro", **kw)
    assert math.isclose(macro["cmc@1"].item(), 1 / 6, abs_tol=1e-12)
    assert math.isclose(macro["map@r"].item(), 5 / 24, abs_tol=1e-12)
    full = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], per_class="all", **kw)
    assert [k for k in full if "/class=" in k] == [f"{key}/class={row}" for key in ("cmc@1", "map@r") for row in per_row]
    for row, (cmc, map_r) in per_row.items():
        for key, want in (("cmc@1", cmc), ("map@r", map_r)):
            got = full[f"{key}/class={row}"].item()
            assert (math.isnan(got) and math.isnan(want)) or math.isclose(got, want, abs_tol=1e-12), (key, row)
    plain = rc.evaluate_embeddings(x, labels, ["map@r"], **kw)
    assert math.isclose(plain["map@r"].item(), 1 / 5, abs_tol=1e-12)
    # without f: bool rows are the same groups, named as 0/1 integers, and the intervals
    # are those of 1-D labels numbering the rows in the same (sorted) order
    opts = dict(per_class="all", ci=0.9, n_resamples=50, distance="euclidean")
    bools = rc.evaluate_embeddings(x[:5], labels[:5].bool(), ["map@r"], **opts,
                                   relevance=lambda a, b: FIRST_COLUMN(a.long(), b.long()))
    assert [k for k in bools if "/class=" in k] == ["map@r/class=[0, 0]", "map@r/class=[0, 1]", "map@r/class=[1, 0]"]
    assert math.isclose(bools["map@r"].item(), 5 / 24, abs_tol=1e-12)
    first = torch.tensor([0, 0, 1])  # first column of rows 0, 1, 2
    codes = rc.evaluate_embeddings(x[:5], torch.tensor([0, 1, 0, 2, 2]), ["map@r"], **opts,
                                   relevance=lambda a, b: first[a].unsqueeze(1) == first[b].unsqueeze(0))
    assert math.isclose(codes["map@r"].item(), 5 / 24, abs_tol=1e-12)
    for row, code in zip(["[0, 0]", "[0, 1]", "[1, 0]"], range(3)):
        torch.testing.assert_close(bools.ci[f"map@r/class={row}"], codes.ci[f"map@r/class={code}"])
    torch.testing.assert_close(bools.ci["map@r"], codes.ci["map@r"])


def test_per_class_multi_hot_labels_group_by_row():
    """Multi-hot labels without a relevance callable: the per-query values of each
    distinct row, averaged (rows keyed here as Python tuples)."""
    g = torch.Generator().manual_seed(7)
    labels = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]])[torch.randint(0, 4, (40,), generator=g)]
    x = labels.double() @ torch.randn(3, 6, generator=g, dtype=torch.float64) + torch.randn(40, 6, generator=g,
                                                                                          dtype=torch.float64)
    keys = ["cmc@1", "map@r", "ndcg@5"]
    per_query = rc.evaluate_embeddings(x, labels, keys, reduce="none")
    full = rc.evaluate_embeddings(x, labels, keys, per_class="all")
    rows = sorted({tuple(r) for r in labels.tolist()})
    assert len(rows) == 4
    for key in keys:
        per_row = [per_query[key][torch.tensor([tuple(r) == row for r in labels.tolist()])].nanmean() for row in rows]
        torch.testing.assert_close(full[key], torch.stack(per_row).nanmean())
        for row, v in zip(rows, per_row):
            torch.testing.assert_close(full[f"{key}/class={list(row)}"], v)
    assert abs(full["map@r"].item() - per_query["map@r"].nanmean().item()) > 1e-4  # not the plain mean


@pytest.mark.parametrize("kind", ["list", "tensor"])
def test_categories(kind):
    q, ql, kw = split(data("gallery_ids", seed=103))
    names = ["left", "right", "up"]
    codes = torch.arange(40) % 3
    categories = [names[i] for i in codes.tolist()] if kind == "list" else codes
    keys = ["cmc@3", "map"]
    per_query = ours(q, ql, keys, **kw)
    r = rc.evaluate_embeddings(q, ql, keys, categories=categories, **kw)
    for i, name in enumerate(names):
        label = name if kind == "list" else str(i)
        for key in keys:
            torch.testing.assert_close(r[f"{key}/{label}"], per_query[key][codes == i].nanmean())
    assert list(r)[:2] == keys


# ---------------------------------------------------------------- bad inputs

X = torch.randn(4, 8)
L = torch.tensor([0, 0, 1, 1])
G = torch.randn(5, 8)
GL = torch.tensor([0, 1, 1, 0, 1])
IDS = torch.tensor([0, 1, 2, 3])
GIDS = torch.tensor([0, 1, 2, 3, 4])
MH = torch.tensor([[1, 0], [0, 1], [1, 1], [0, 1]])


def FIRST_COLUMN(a: Tensor, b: Tensor) -> Tensor:
    """A relevance rule on ``[N, C]`` labels: the first columns are equal."""
    return a[:, 0].unsqueeze(1) == b[:, 0].unsqueeze(0)


def ev(query=X, labels=L, metrics=("cmc@1",), **kw):
    return rc.evaluate_embeddings(query, labels, list(metrics), **kw)


BAD = [
    # (id, call, exception, message regex)
    ("query not a tensor", lambda: ev(query=X.tolist()), TypeError, r"query must be a torch.Tensor; got list"),
    ("query 1-d", lambda: ev(query=X[0], labels=L[:1]), ValueError, r"query must be 2-D \[items, dim\]; got shape \(8,\)"),
    ("query empty", lambda: ev(query=X[:0], labels=L[:0]), ValueError, r"query is empty; got shape \(0, 8\)"),
    ("query int with cosine", lambda: ev(query=X.long()), TypeError,
     r"query must be a floating-point tensor \(integer or bool codes only with distance='hamming'\); got torch.int64"),
    ("query complex", lambda: ev(query=X.to(torch.complex64)), TypeError, r"query must be a floating-point tensor"),
    ("mismatched dims", lambda: ev(gallery=G[:, :7], gallery_labels=GL), ValueError,
     r"query and gallery must have the same dimension; got 8 and 7"),
    ("empty gallery", lambda: ev(gallery=G[:0], gallery_labels=GL[:0]), ValueError, r"gallery is empty; got shape \(0, 8\)"),
    ("gallery 3-d", lambda: ev(gallery=G.unsqueeze(0), gallery_labels=GL), ValueError, r"gallery must be 2-D"),
    ("labels too short", lambda: ev(labels=L[:3]), ValueError,
     r"query_labels must have one entry per embedding; got shape \(3,\) for 4 embeddings"),
    ("labels 0-d", lambda: ev(labels=torch.tensor(1)), ValueError, r"query_labels must have one entry per embedding; got shape \(\)"),
    ("gallery labels too long", lambda: ev(gallery=G, gallery_labels=torch.zeros(6, dtype=torch.long)), ValueError,
     r"gallery_labels must have one entry per embedding; got shape \(6,\) for 5 embeddings"),
    ("labels float 1-d", lambda: ev(labels=L.float() + 0.5), ValueError,
     r"query_labels must be integer class labels; got 0.5 at position 0 \(float labels are taken when every value is a "
     r"whole number within int64\)$"),
    ("labels bool 1-d", lambda: ev(labels=L.bool()), TypeError, r"query_labels must be integer class labels; got torch.bool"),
    ("labels not a tensor", lambda: ev(labels=[0, 0, 1, 1]), TypeError, r"query_labels must be a torch.Tensor; got list"),
    ("labels 3-d", lambda: ev(labels=MH.unsqueeze(2)), ValueError, r"query_labels must be 1-D class labels or 2-D multi-hot"),
    ("multi-hot float", lambda: ev(labels=MH.float() / 2), ValueError,
     r"query_labels as multi-hot \[N, classes\] must hold only 0 and 1; got 0.5 at position \(\d, \d\)$"),
    ("1-d vs multi-hot", lambda: ev(gallery=G, gallery_labels=torch.ones(5, 2, dtype=torch.long)), ValueError,
     r"query_labels and gallery_labels must both be 1-D or both multi-hot; got shapes \(4,\) and \(5, 2\)"),
    ("multi-hot class count", lambda: ev(labels=MH, gallery=G, gallery_labels=torch.ones(5, 3, dtype=torch.long)), ValueError,
     r"multi-hot labels must have the same number of classes; got 2 and 3"),
    ("gallery without labels", lambda: ev(gallery=G), ValueError, r"gallery and gallery_labels go together: give both or neither"),
    ("labels without gallery", lambda: ev(gallery_labels=GL), ValueError, r"gallery and gallery_labels go together"),
    ("NaN query", lambda: ev(query=torch.where(torch.arange(8) == 3, NAN, X)), ValueError, r"query embeddings contain NaN or inf"),
    ("inf query", lambda: ev(query=torch.where(torch.arange(8) == 3, float("inf"), X)), ValueError, r"query embeddings contain NaN or inf"),
    ("NaN gallery", lambda: ev(gallery=torch.where(torch.arange(8) == 0, NAN, G), gallery_labels=GL), ValueError,
     r"gallery embeddings contain NaN or inf"),
    ("query on meta", lambda: ev(query=X.to("meta")), ValueError,
     r"query and query_labels and gallery and gallery_labels and query_ids and gallery_ids must be on the same device; got meta and cpu"),
    ("gallery on meta", lambda: ev(gallery=G.to("meta"), gallery_labels=GL), ValueError,
     r"query and query_labels and gallery and gallery_labels must be on the same device; got cpu and cpu and meta and cpu"),
    ("ids on meta", lambda: ev(query_ids=IDS.to("meta")), ValueError, r"must be on the same device"),
    ("ids 2-d", lambda: ev(query_ids=IDS.view(2, 2)), ValueError,
     r"query_ids must be 1-D with one entry per embedding; got shape \(2, 2\) for 4 embeddings"),
    ("ids too short", lambda: ev(gallery=G, gallery_labels=GL, query_ids=IDS, gallery_ids=GIDS[:4]), ValueError,
     r"gallery_ids must be 1-D with one entry per embedding; got shape \(4,\) for 5 embeddings"),
    ("ids float", lambda: ev(query_ids=IDS.float()), TypeError, r"query_ids must be an integer tensor; got torch.float32"),
    ("ids bool", lambda: ev(gallery=G, gallery_labels=GL, query_ids=IDS, gallery_ids=GIDS.bool()), TypeError,
     r"gallery_ids must be an integer tensor; got torch.bool"),
    ("ids not a tensor", lambda: ev(query_ids=[0, 1, 2, 3]), TypeError, r"query_ids must be a torch.Tensor; got list"),
    ("query ids without gallery ids", lambda: ev(gallery=G, gallery_labels=GL, query_ids=IDS), ValueError,
     r"query_ids and gallery_ids go together: give both or neither"),
    ("gallery ids without query ids", lambda: ev(gallery=G, gallery_labels=GL, gallery_ids=GIDS), ValueError,
     r"query_ids and gallery_ids go together"),
    ("gallery ids without gallery", lambda: ev(gallery_ids=IDS), ValueError,
     r"gallery_ids needs a gallery; with gallery=None the query_ids serve both sides"),
    ("unknown distance", lambda: ev(distance="manhattan"), ValueError,
     r"distance must be one of 'cosine', 'dot', 'euclidean', 'squared_euclidean', 'hamming' or a callable; got 'manhattan'"),
    ("distance not a string", lambda: ev(distance=2), ValueError, r"distance must be one of .* or a callable; got 2"),
    ("distance callable of the wrong shape", lambda: ev(distance=lambda a, b: torch.zeros(a.shape[0])), ValueError,
     r"a distance callable must return \[queries, gallery\] = \(4, 4\); got \(4,\)"),
    ("distance callable not a tensor", lambda: ev(distance=lambda a, b: 1.0), ValueError,
     r"a distance callable must return \[queries, gallery\] = \(4, 4\); got float"),
    ("hamming float codes", lambda: ev(distance="hamming"), ValueError,
     r"distance='hamming' needs binary codes in \{0, 1\} or \{-1, 1\}; query has other values"),
    ("hamming int codes 0..2", lambda: ev(query=torch.randint(0, 3, (4, 8)) + torch.eye(4, 8, dtype=torch.long) * 2, distance="hamming"),
     ValueError, r"needs binary codes .* query has other values"),
    ("hamming gallery codes", lambda: ev(query=(X > 0).long(), gallery=G, gallery_labels=GL, distance="hamming"), ValueError,
     r"needs binary codes .* gallery has other values"),
    ("hamming ternary codes", lambda: ev(query=torch.tensor([[0, 1, -1, 1]] * 4), distance="hamming"), ValueError,
     r"needs binary codes"),
    ("memory_budget zero", lambda: ev(memory_budget=0), ValueError, r"memory_budget must be a positive number of bytes; got 0"),
    ("memory_budget negative", lambda: ev(memory_budget=-5), ValueError, r"memory_budget must be a positive number of bytes; got -5"),
    ("memory_budget float", lambda: ev(memory_budget=1e6), ValueError, r"memory_budget must be an int \(number of bytes\); got 1000000.0 of type float"),
    ("memory_budget bool", lambda: ev(memory_budget=True), ValueError, r"memory_budget must be an int \(number of bytes\); got True of type bool"),
    ("memory_budget str", lambda: ev(memory_budget="1MB"), ValueError, r"memory_budget must be an int \(number of bytes\); got '1MB' of type str"),
    ("per_class with 3-D labels", lambda: ev(labels=MH.view(4, 2, 1), per_class="macro", relevance=FIRST_COLUMN), ValueError,
     r"per_class groups the queries by equal label, \[N\] values or \[N, C\] rows; got query labels of shape \(4, 2, 1\)$"),
    ("per_class with [N, 0] labels", lambda: ev(labels=MH[:, :0], per_class="all", relevance=lambda a, b: torch.ones(len(a), len(b))),
     ValueError, r"per_class groups the queries by equal label, .* got query labels of shape \(4, 0\)$"),
    ("per_class with NaN labels", lambda: ev(labels=torch.tensor([[0.5, 1.0], [0.5, NAN], [1.0, 1.0], [0.5, NAN]]), per_class="macro",
                                            relevance=FIRST_COLUMN), ValueError,
     r"per_class groups the queries by equal label; NaN labels equal nothing, not even themselves"),
    ("per_class with complex labels", lambda: ev(labels=MH.to(torch.complex64), per_class="macro", relevance=FIRST_COLUMN), TypeError,
     r"per_class groups the queries by equal label and needs real labels; got torch.complex64$"),
    ("per_class unknown", lambda: ev(per_class="micro"), ValueError, r"per_class must be None, 'macro' or 'all'; got 'micro'"),
    ("per_class with reduce none", lambda: ev(per_class="macro", reduce="none"), ValueError,
     r"per_class reduces over each label's queries; it cannot go with reduce='none'"),
    ("unknown key", lambda: ev(metrics=["nDCG@3"]), ValueError, r"unknown metric 'nDCG' in key 'nDCG@3'; did you mean ndcg@3\? known keys: "),
    ("no keys", lambda: ev(metrics=[]), ValueError, r"metrics must name at least one key"),
    ("ties with faiss", lambda: ev(ties="optimistic", backend="faiss"), NotImplementedError,
     r"ties='optimistic' needs backend='torch'; got backend='faiss'"),
    ("auroc@k expected", lambda: ev(metrics=["auroc@3"], ties="expected"), NotImplementedError,
     r"auroc@3 has no closed form under ties='expected'"),
    ("ties unknown", lambda: ev(ties="random"), ValueError,
     r"ties must be one of 'stable', 'expected', 'optimistic', 'pessimistic'; got 'random'"),
    ("empty policy", lambda: ev(empty="drop"), ValueError, r"empty must be one of 'skip', 'zero', 'one', 'error'; got 'drop'"),
    ("reduce", lambda: ev(reduce="sum"), ValueError, r"reduce must be one of 'mean', 'median', 'min', 'max', 'none'; got 'sum'"),
    ("categories length", lambda: ev(categories=torch.tensor([0, 1, 2])), ValueError,
     r"categories must have one entry per query; got 3 for 4"),
    ("categories float", lambda: ev(categories=torch.tensor([0.5, 1.0, 0.5, 1.0])), TypeError,
     r"categories must be an integer tensor or a sequence of labels; got torch.float32"),
]


@pytest.mark.parametrize("call,exc,message", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


# Values the checks above cannot see (they depend on label values or on what a
# callable returns): they must be refused, never turned into a wrong number.


def test_multi_hot_labels_must_be_0_or_1():
    for bad in (torch.tensor([[1, 0], [0, -1], [1, 1], [0, 1]]), torch.tensor([[2, 0], [0, 1], [1, 1], [0, 1]])):
        with pytest.raises(ValueError, match=r"multi-hot"):
            ev(labels=bad, metrics=["map", "ndcg@2"])


def test_relevance_of_the_wrong_shape_is_refused():
    """A relevance callable must return [c, G] gains; a [c] result must not broadcast."""
    with pytest.raises(ValueError, match=r"relevance"):
        ev(metrics=["map"], relevance=lambda a, b: torch.ones(a.shape[0], dtype=torch.float64))


def test_negative_relevance_is_refused():
    with pytest.raises(ValueError, match=r"(?i)gain|relevance"):
        ev(metrics=["map", "recall@2"], relevance=lambda a, b: (a.unsqueeze(1) == b.unsqueeze(0)).double() - 0.5)
