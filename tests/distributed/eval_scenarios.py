"""The suite of ``retrieval_core.distributed.evaluate_embeddings_across_ranks`` for the
multi-process harness (``harness.py``), and of the adapters dividing their compute.

Every rank builds the same data (fixed seeds) and passes its own rows (uneven
shares, some rank with none); a case returns, per rank, the distributed result
and, computed in the same process, the single-process result on the
concatenation of every rank's rows. The tests (``test_distributed_eval.py``)
require them to be equal bit for bit, on every rank.

Cases whose name ends in ``_sharded`` run with ``shard_gallery=True`` (and record
that no gallery embeddings were gathered); ``error_*`` cases must raise on every
rank; ``*_divided`` cases run an adapter and record how many queries each rank
evaluated.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import torch

import retrieval_core
from retrieval_core import distributed as D
from retrieval_core.distributed import evaluation, shares

N = 53
DIM = 6
K_AT = ["cmc@1", "precision@5", "ndcg@3", "recall@10", "fall_out@5", "map_hits@5", "precision_capped@5", "dcg@4"]
K_R = ["map@r", "r_precision", "precision@r", "ndcg@r", "f1@r"]
K_WHOLE = ["map", "mrr", "ndcg", "auroc"]
K_SET = ["nmi", "ami", "pcf@0.5", "fnmr@0.1"]
PER_QUERY = K_AT + K_R


def _data(seed: int = 21):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 5, (N,), generator=g)
    x = torch.randn(N, DIM, generator=g) + 1.5 * torch.nn.functional.one_hot(labels, DIM).float()
    x[5] = x[4]
    x[40] = x[4]  # equal embeddings on different ranks: ties broken by global position
    extra = torch.nn.functional.one_hot(torch.randint(0, 5, (N,), generator=g), 5).bool()
    multi_hot = torch.nn.functional.one_hot(labels, 5).bool() | extra
    ids = torch.arange(N) * 3 + 100
    ids[12] = ids[11]  # two items of one id exclude each other
    return x, labels, multi_hot, ids


def bounds(world: int, layout: str = "uneven", n: int = N) -> List[int]:
    """Row boundaries of each rank's share: uneven, one rank with no rows."""
    if world == 1:
        return [0, n]
    if layout == "first_empty":
        return [0, 0, n] if world == 2 else [0, 0, 30, n]
    if layout == "narrow":  # shards narrower than search.MIN_ROWS
        return [0, 5, n] if world == 2 else [0, 5, 9, n]
    return [0, 17, n] if world == 2 else [0, 17, 17, n]


def _rows(t, rank: int, world: int, layout: str = "uneven"):
    if t is None:
        return None
    b = bounds(world, layout, len(t))  # shorter inputs (a gallery): the same cuts, clamped
    return t[b[rank]:b[rank + 1]]


def plain(r) -> Dict[str, Any]:
    return {"keys": list(r), "values": dict(r), "n_queries": r.n_queries, "n_empty": dict(r.n_empty),
            "ci": dict(r.ci), "per_query": dict(r.per_query), "query_ids": r.query_ids, "neighbours": r.neighbours}


def _case(metrics, *, layout: str = "uneven", gallery: bool = False, ids: bool = False, labels: str = "class",
          categories: Optional[str] = None, shard: bool = False, transform: Optional[Callable] = None,
          gallery_rows: int = 40, **options) -> Callable[[int, int], Any]:
    """A case: the same data on every rank, each rank passes its share."""

    def case(rank: int, world: int) -> Dict[str, Any]:
        x, cls, multi_hot, item_ids = _data()
        if transform is not None:
            x = transform(x)
        lab = {"class": cls, "multi_hot": multi_hot}[labels]
        cats = None
        if categories == "tensor":
            cats = torch.arange(N) % 3
        elif categories == "strings":
            cats = ["abc"[i % 3] for i in range(N)]
        full: Dict[str, Any] = {"query_ids": item_ids if ids else None, "categories": cats}
        if gallery:  # a separate gallery: other points, ids overlapping the queries' in part
            g = torch.Generator().manual_seed(5)
            m = gallery_rows
            full.update(gallery=x[:m].flip(0) + 0.3 * torch.randn(m, DIM, generator=g),
                        gallery_labels=lab[:m].flip(0), gallery_ids=(item_ids[:m] + 3 * 20) if ids else None)
        mine = {k: _rows(v, rank, world, layout) for k, v in full.items()}
        recorded: List[tuple] = []
        original = D.gather_cat  # the distributed evaluation's gathers (its modules' own names)

        def recording(t, group=None):
            recorded.append((tuple(t.shape), str(t.dtype)))
            return original(t, group)

        evaluation.gather_cat = shares.gather_cat = recording
        try:
            got = D.evaluate_embeddings_across_ranks(_rows(x, rank, world, layout), _rows(lab, rank, world, layout),
                                                     metrics, shard_gallery=shard, **mine, **options)
        finally:
            evaluation.gather_cat = shares.gather_cat = original
        one = retrieval_core.evaluate_embeddings(x, lab, metrics, **{k: v for k, v in full.items()}, **options)
        gathered_embeddings = [s for s, d in recorded if d == str(x.dtype) and len(s) == 2 and s[1] == DIM]
        return {"dist": plain(got), "one": plain(one), "gathered_embeddings": gathered_embeddings}

    return case


def _graded(q_labels, g_labels):
    """A custom relevance: 2 for the same class, 1 for the next one, else 0."""
    diff = (q_labels.unsqueeze(1) - g_labels.unsqueeze(0)).abs()
    return torch.where(diff == 0, 2.0, torch.where(diff == 1, 1.0, 0.0))


def _l1(q, g):
    return torch.cdist(q.double(), g.double(), p=1)


def _codes(x):
    return (x > 0.3).to(torch.uint8)


def _far(x):
    """Points far from the origin and close together: float32 euclidean scores tie
    in clusters, which the exact order breaks."""
    return 1e4 + x * 1e-3


def _both(name: str, metrics_unsharded, metrics_sharded=None, **kw) -> Dict[str, Callable]:
    return {name: _case(metrics_unsharded, **kw),
            f"{name}_sharded": _case(metrics_sharded or metrics_unsharded, shard=True, **kw)}


CASES: Dict[str, Callable[[int, int], Any]] = {}
CASES.update(_both("self_class", PER_QUERY + K_WHOLE + K_SET, PER_QUERY))
CASES.update(_both("self_ids_categories", PER_QUERY + K_WHOLE, PER_QUERY, ids=True, categories="tensor",
                   reduce="none"))
CASES.update(_both("gallery_ids_euclidean", PER_QUERY + K_WHOLE + K_SET, PER_QUERY, gallery=True, ids=True,
                   distance="euclidean"))
CASES.update(_both("gallery_no_ids_dot", PER_QUERY + K_WHOLE, PER_QUERY, gallery=True, distance="dot",
                   reduce="median"))
CASES.update(_both("multi_hot", PER_QUERY + K_WHOLE, PER_QUERY, labels="multi_hot", distance="squared_euclidean"))
CASES.update(_both("multi_hot_gallery_ids", PER_QUERY + K_WHOLE, PER_QUERY, labels="multi_hot", gallery=True,
                   ids=True))
CASES.update(_both("relevance_graded", PER_QUERY + K_WHOLE, PER_QUERY, gallery=True, ids=True, relevance=_graded))
CASES.update(_both("hamming_ties", PER_QUERY + K_WHOLE, PER_QUERY, distance="hamming", transform=_codes, ids=True))
CASES.update(_both("euclidean_near_ties_small_chunks", PER_QUERY + K_WHOLE, PER_QUERY, distance="euclidean",
                   transform=_far, memory_budget=4096))
CASES.update(_both("float64_euclidean", PER_QUERY, distance="euclidean", transform=lambda x: x.double()))
CASES.update(_both("first_rank_empty", PER_QUERY + K_SET, PER_QUERY, layout="first_empty", ids=True))
CASES.update(_both("per_class_all_zero", PER_QUERY, per_class="all", empty="zero", categories="strings"))
CASES.update(_both("callable_distance", PER_QUERY + K_WHOLE, PER_QUERY, distance=_l1, gallery=True))
CASES.update(_both("narrow_shards", PER_QUERY, layout="narrow", ids=True))
CASES.update(_both("narrow_shards_euclidean", PER_QUERY, layout="narrow", distance="euclidean", gallery=True))
CASES.update(_both("tiny_gallery", ["cmc@1", "precision@3", "map@r"], gallery=True, gallery_rows=10))
# issue 18: embeddings that require grad (every path detaches them); dot products past
# float32's range (the gallery's scale is the whole gallery's on every shard)
CASES.update(_both("gallery_requires_grad_euclidean", PER_QUERY, gallery=True, distance="euclidean",
                   transform=lambda x: x.requires_grad_()))
CASES.update(_both("gallery_huge_dot", PER_QUERY, gallery=True, distance="dot", transform=lambda x: x * 2.0**62))
# issue 26: cutoffs past the gallery (precision@k divides by k) and past a shard, as one process computes them
CASES.update(_both("cutoff_past_gallery", ["cmc@1000", "precision@1000", "recall@40", "ndcg@30", "map@r"], gallery=True,
                   ids=True))
# issue 28: a float parameter ranks the whole list (rbp@p, refused when sharded: see the errors); err's
# g_max is each query's largest gain, the whole gallery's on every shard
CASES.update(_both("graded_rbp_err", PER_QUERY + ["rbp@0.8", "rbp@0.3", "err@4", "err"],
                   PER_QUERY + ["err@4", "err@60"], gallery=True, ids=True, relevance=_graded))
CASES["rbp_ties_expected"] = _case(["rbp@0.8", "rbp@0.5", "mrr"], distance="hamming", transform=_codes, ids=True,
                                   ties="expected")
CASES["set_level_gallery_ids"] = _case(K_SET, gallery=True, ids=True, distance="euclidean")
# intervals, per-query values and neighbours (issue 12): computed after the gather, equal to one process's
CASES["stats_self_categories"] = _case(PER_QUERY + K_WHOLE, categories="tensor", ci=0.9, keep_per_query=True,
                                       return_neighbours=5)
CASES["stats_gallery_ids_beta"] = _case(["cmc@1", "precision@1", "cmc@5"], gallery=True, ids=True, ci=0.95,
                                        ci_method="beta", keep_per_query=True, return_neighbours=4)
CASES["stats_median_first_empty"] = _case(PER_QUERY, layout="first_empty", ids=True, reduce="median", ci=0.8,
                                          keep_per_query=True, return_neighbours=3, distance="euclidean")
CASES["stats_per_class_all"] = _case(PER_QUERY, per_class="all", categories="strings", ci=0.9, n_resamples=200,
                                     keep_per_query=True)
CASES["stats_self_ids_hamming"] = _case(["cmc@1", "map@r"], ids=True, distance="hamming", transform=_codes, ci=0.9,
                                        seed=5, n_resamples=300, keep_per_query=True, return_neighbours=6)
# tie modes (a gallery every rank holds; shard_gallery=True is "stable" only on several processes)
CASES["hamming_ties_expected"] = _case(PER_QUERY + K_WHOLE, distance="hamming", transform=_codes, ids=True,
                                       ties="expected")
CASES["rounded_euclidean_ties_expected"] = _case(PER_QUERY + K_WHOLE, distance="euclidean", transform=torch.round,
                                                ties="expected")
CASES["rounded_dot_ties_pessimistic"] = _case(PER_QUERY + K_WHOLE, distance="dot", transform=torch.round,
                                              ties="pessimistic")


# issue 30: relevance pairs (two-tower) and exclude=, each rank passing its own queries' pairs (rows from 0,
# items by position in the whole gallery)
TWO_TOWER_KEYS = PER_QUERY + K_WHOLE


def _pairs(n_users: int, n_items: int, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, n_users, (n,), generator=g), torch.randint(0, n_items, (n,), generator=g)])


def _local_pairs(pairs: torch.Tensor, rank: int, world: int, layout: str, n_users: int = N) -> torch.Tensor:
    b = bounds(world, layout, n_users)
    mine = (pairs[0] >= b[rank]) & (pairs[0] < b[rank + 1])
    return torch.stack([pairs[0, mine] - b[rank], pairs[1, mine]])


def _sparse(pairs: torch.Tensor, n_users: int, n_items: int) -> torch.Tensor:
    dense = torch.zeros(n_users, n_items)
    dense[pairs[0], pairs[1]] = 1.0 + pairs[1].remainder(3).float()  # graded gains 1..3
    return dense.to_sparse_csr()


def _two_tower(layout: str = "uneven", sparse: bool = False, shard: bool = False, keys=TWO_TOWER_KEYS,
               none_on_rank_0: bool = False, **options):
    """Users against 40 items (rounded embeddings: exact ties), test pairs relevant, seen pairs excluded
    (``none_on_rank_0``: rank 0 passes ``exclude=None``, its users' seen items not excluded)."""

    def case(rank: int, world: int) -> Dict[str, Any]:
        x, _, _, _ = _data()
        users, items = torch.round(x), torch.round(x[:40].flip(0) * 0.7)
        truth = _pairs(N, 40, 150, 1).unique(dim=1)
        seen = _pairs(N, 40, 200, 2)
        my_users, my_items = _rows(users, rank, world, layout), _rows(items, rank, world, layout)
        my_truth, my_seen = (_local_pairs(p, rank, world, layout) for p in (truth, seen))
        if sparse:
            truth, my_truth = _sparse(truth, N, 40), _sparse(my_truth, my_users.shape[0], 40)
        if none_on_rank_0:
            my_seen = None if rank == 0 else my_seen
            seen = seen[:, seen[0] >= bounds(world, layout)[1]]
        got = D.evaluate_embeddings_across_ranks(my_users, None, keys, gallery=my_items, distance="dot",
                                                 relevance=my_truth, exclude=my_seen, shard_gallery=shard, **options)
        one = retrieval_core.evaluate_embeddings(users, None, keys, gallery=items, distance="dot",
                                                 relevance=truth, exclude=seen, **options)
        return {"dist": plain(got), "one": plain(one), "gathered_embeddings": []}

    return case


def _self_exclude(rank: int, world: int) -> Dict[str, Any]:
    """Class labels, the query set its own gallery, seen items excluded (items: global positions)."""
    x, labels, _, _ = _data()
    seen = _pairs(N, N, 120, 3)
    got = D.evaluate_embeddings_across_ranks(_rows(x, rank, world), _rows(labels, rank, world), PER_QUERY + K_WHOLE,
                                             exclude=_local_pairs(seen, rank, world, "uneven"), ties="optimistic",
                                             keep_per_query=True, return_neighbours=4)
    one = retrieval_core.evaluate_embeddings(x, labels, PER_QUERY + K_WHOLE, exclude=seen, ties="optimistic",
                                             keep_per_query=True, return_neighbours=4)
    return {"dist": plain(got), "one": plain(one), "gathered_embeddings": []}


CASES["two_tower_gallery_pairs"] = _two_tower(keep_per_query=True, return_neighbours=5)
CASES["two_tower_gallery_sparse_first_empty_expected"] = _two_tower("first_empty", sparse=True, ties="expected")
CASES["two_tower_gallery_narrow_small_chunks"] = _two_tower("narrow", memory_budget=4096)
CASES["two_tower_gallery_exclude_none_on_rank_0"] = _two_tower(none_on_rank_0=True)
CASES["self_gallery_exclude"] = _self_exclude


# -- errors: the same on every rank -------------------------------------------------------

def _nan_on_rank_1(rank: int, world: int):
    x, labels, _, _ = _data()
    mine = _rows(x, rank, world).clone()
    if rank == world - 1:
        mine[0, 0] = float("nan")
    return D.evaluate_embeddings_across_ranks(mine, _rows(labels, rank, world), ["cmc@1"])


def _dims_differ(rank: int, world: int):
    x, labels, _, _ = _data()
    mine = _rows(x, rank, world)
    return D.evaluate_embeddings_across_ranks(mine if rank == 0 else mine[:, :5], _rows(labels, rank, world), ["cmc@1"])


def _ids_on_rank_0(rank: int, world: int):
    x, labels, _, ids = _data()
    return D.evaluate_embeddings_across_ranks(_rows(x, rank, world), _rows(labels, rank, world), ["cmc@1"],
                                              query_ids=_rows(ids, rank, world) if rank == 0 else None)


def _relevance_fails_on_last_rank(rank: int, world: int):
    """A relevance callable that raises on one rank only, inside the sharded loop."""
    x, labels, _, _ = _data()

    def relevance(q, g):
        if rank == world - 1:
            raise ValueError("relevance refused on purpose")
        return _graded(q, g)

    return D.evaluate_embeddings_across_ranks(_rows(x, rank, world), _rows(labels, rank, world), ["ndcg@3"],
                                              relevance=relevance, shard_gallery=True)


def _simple(metrics, **options) -> Callable[[int, int], Any]:
    def case(rank: int, world: int):
        x, labels, _, _ = _data()
        return D.evaluate_embeddings_across_ranks(_rows(x, rank, world), _rows(labels, rank, world), metrics, **options)
    return case


def _undefined_queries(rank: int, world: int):
    x, labels, _, _ = _data()
    labels = labels.clone()
    labels[3] = 99  # no other item of its class
    return D.evaluate_embeddings_across_ranks(_rows(x, rank, world), _rows(labels, rank, world), ["map@r"],
                                              empty="error")


def _label_dtype_differs(rank: int, world: int):
    x, labels, _, _ = _data()
    mine = _rows(labels, rank, world)
    return D.evaluate_embeddings_across_ranks(_rows(x, rank, world), mine.to(torch.int32) if rank == 0 else mine,
                                              ["cmc@1"])


def _no_gallery_rows_sharded(rank: int, world: int):
    x, labels, _, _ = _data()
    return D.evaluate_embeddings_across_ranks(_rows(x, rank, world), _rows(labels, rank, world), ["cmc@1"],
                                              gallery=x[:0], gallery_labels=labels[:0], shard_gallery=True)


def _split_sizes_differ(rank: int, world: int):
    x, labels, _, _ = _data()
    return D.evaluate_split(x[: N - rank], labels[: N - rank], ["cmc@1"])


def _unknown_error_type(rank: int, world: int):
    def fn():
        if rank == 0:
            raise KeyError("missing on purpose")
        return None, None
    return D.agree(fn)


ERRORS: Dict[str, tuple] = {
    # name: (case, exception type, message part, also raised by one process)
    "error_nan_on_last_rank": (_nan_on_rank_1, "ValueError", "query embeddings contain NaN or inf (raised on rank",
                               False),
    "error_dims_differ": (_dims_differ, "ValueError", "ranks holding rows must agree on the embedding dimension",
                          False),
    "error_ids_on_rank_0": (_ids_on_rank_0, "ValueError", "every rank must pass query_ids (and gallery_ids) or none",
                            False),
    "error_relevance_fails_sharded": (_relevance_fails_on_last_rank, "ValueError",
                                      "relevance refused on purpose (raised on rank", False),
    "error_whole_list_sharded": (_simple(["cmc@1", "map", "mrr"], shard_gallery=True), "ValueError",
                                 "whole-list keys (map, mrr) need the whole gallery per query", True),
    "error_param_whole_list_sharded": (_simple(["cmc@1", "rbp@0.8"], shard_gallery=True), "ValueError",
                                       "whole-list keys (rbp@0.8) need the whole gallery per query", True),
    "error_ties_sharded": (_simple(["cmc@1"], shard_gallery=True, ties="expected"), "NotImplementedError",
                           "ties='expected' is not available with shard_gallery=True on several processes", False),
    "error_set_level_sharded": (_simple(["cmc@1", "nmi"], shard_gallery=True), "ValueError",
                                "set-level keys (nmi) need every embedding on one rank", True),
    "error_undefined_queries": (_undefined_queries, "ValueError", "empty='error' forbids them", True),
    "error_bad_shard_option": (_simple(["cmc@1"], shard_gallery="yes"), "TypeError",
                               "shard_gallery must be a bool; got 'yes'", True),
    "error_faiss_sharded": (_simple(["cmc@1"], shard_gallery=True, backend="faiss"), "ValueError",
                            "shard_gallery=True searches with the torch backend; got backend='faiss'", True),
    "error_label_dtype_differs": (_label_dtype_differs, "ValueError",
                                  "ranks holding rows must agree on the query label dtype", False),
    "error_no_gallery_rows_sharded": (_no_gallery_rows_sharded, "ValueError", "gallery is empty; got shape (0, 6)",
                                      True),
    "error_split_sizes_differ": (_split_sizes_differ, "ValueError",
                                 "evaluate_split needs the same rows on every rank (gathered states)", False),
    "error_exclude_sharded": (_two_tower(shard=True, keys=PER_QUERY), "ValueError",
                              "relevance pairs and exclude= need shard_gallery=False", False),
    "error_unknown_type": (_unknown_error_type, "RuntimeError", "KeyError: 'missing on purpose' (raised on rank 0",
                           False),
}
CASES.update({name: spec[0] for name, spec in ERRORS.items()})


# -- the adapters divide their compute ---------------------------------------------------

ADAPTER_KEYS = ["cmc@1", "map@r", "ndcg@3", "mrr", "nmi"]


def _counting(fn):
    """Run ``fn()`` counting the queries this rank evaluates per-query values for."""
    counted: List[int] = []
    original = shares._share_values

    def share_values(query, *args, **kwargs):
        counted.append(int(query.shape[0]))
        return original(query, *args, **kwargs)

    shares._share_values = share_values
    try:
        return fn(), sum(counted)
    finally:
        shares._share_values = original


def _adapter_rows(rank: int, world: int):
    """DistributedSampler-like shares with a repeated (padding) sample: ids drop it."""
    x, labels, _, _ = _data()
    idx = torch.arange(N + 1) % N  # sample 0 repeated at the end
    b = bounds(world, "uneven", N + 1)
    mine = idx[b[rank]:b[rank + 1]]
    return x, labels, mine


def _ignite_divided(rank: int, world: int):
    from ignite.engine import Engine

    import ignite_retrieval as ir

    x, labels, mine = _adapter_rows(rank, world)
    batches = [{"embeddings": x[r], "labels": labels[r], "ids": r, "is_query": r % 4 != 0} for r in mine.split(5)]
    metric = ir.EmbeddingMetrics(ADAPTER_KEYS, reduce="none")

    def run():
        if not batches:
            return metric.compute()
        engine = Engine(lambda e, b: b)
        metric.attach(engine, "m")
        return engine.run(batches).metrics["m"]

    result, evaluated = _counting(run)
    q = torch.arange(N) % 4 != 0
    one = retrieval_core.evaluate_embeddings(x[q], labels[q], ADAPTER_KEYS, gallery=x, gallery_labels=labels,
                                             query_ids=torch.arange(N)[q], gallery_ids=torch.arange(N),
                                             reduce="none")
    return {"result": result, "evaluated": evaluated, "one": {k: v.tolist() if v.ndim else v.item()
                                                             for k, v in one.items()}, "n_queries": int(q.sum())}


def _lightning(sync: bool):
    def case(rank: int, world: int):
        import lightning_retrieval as lr

        x, labels, mine = _adapter_rows(rank, world)
        metric = lr.EmbeddingMetrics(ADAPTER_KEYS, sync_on_compute=sync, ci=0.9, n_resamples=200)
        for r in mine.split(5):
            metric.update(x[r], labels[r], ids=r)
        result, evaluated = _counting(metric.compute)
        rows = torch.arange(N) if sync else torch.unique(mine)
        if rows.numel() == 0:  # unsynced, a rank without rows: NaN for every key
            return {"result": dict(result), "evaluated": evaluated, "one": None, "n_queries": 0}
        one = retrieval_core.evaluate_embeddings(x[rows], labels[rows], ADAPTER_KEYS, query_ids=rows, ci=0.9,
                                                 n_resamples=200, keep_per_query=True)
        return {"result": plain(result), "evaluated": evaluated, "one": plain(one), "n_queries": rows.numel()}
    return case


CASES["ignite_divided"] = _ignite_divided
CASES["lightning_divided"] = _lightning(True)
CASES["lightning_local_not_divided"] = _lightning(False)

SCENARIOS = CASES  # the harness's name
WORLDS = (2, 3)
