"""The torchmetrics suite of the multi-process harness (``tests/distributed/harness.py``):
what each of 2 gloo ranks feeds to which metric.

A scenario's reference is one process fed rank 0's batches, then rank 1's: the
same rows in the same order as the gathered state (core's gather_cat concatenates
in rank order), so values must agree exactly, ``reduce="none"`` included.
Scenarios in ``ERRORS`` must raise on every rank (and in one process).
"""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

import torch
from torch.utils.data import DistributedSampler
from torchmetrics import MetricCollection
from torchmetrics.utilities.distributed import gather_all_tensors

import lightning_retrieval as lr
from tests.adapters.lightning.data import clustered_embeddings, dense_batches, flat_queries

WORLD = 2
WORLDS = (WORLD,)
INT_DTYPES = [d for d in (torch.uint8, getattr(torch, "uint16", None), getattr(torch, "uint32", None),
                          getattr(torch, "uint64", None), torch.int8, torch.int16, torch.int32, torch.int64) if d]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# ids that repeat with different rows: a ValueError on every rank
ERRORS = {"embedding_ids_from_zero": "repeat with different rows", "ranking_ids_from_zero": "repeat with different rows"}
RANK_KEYS = ["ndcg@5", "map@r", "mrr", "precision@3", "auroc"]
EMB_KEYS = ["cmc@1", "map@r", "ndcg@5", "precision@3"]

Call = Tuple[str, tuple, dict]  # (method, args, kwargs)


@dataclass
class Scenario:
    make: Callable[..., object]  # make(**metric_kwargs)
    feeds: Dict[int, List[Call]]
    local: bool = False  # sync_on_compute=False: each rank's own rows
    with_group: bool = False  # pass process_group=<a new group of both ranks>
    record_forward: bool = False
    reference_rows: List[Call] = field(default_factory=list)  # when not "rank 0 then rank 1"


def _dense_calls(batches, method="update", ids=False, categories=False) -> List[Call]:
    out = []
    for p, t, i, c in batches:
        kw = {}
        if ids:
            kw["ids"] = i
        if categories:
            kw["categories"] = c
        out.append((method, (p, t), kw))
    return out


def _flat_calls(indexes, preds, target, n) -> List[Call]:
    return [("update", (preds[r], target[r], indexes[r]), {}) for r in torch.arange(preds.numel()).chunk(n)]


def _sampler_rows(n_items: int, rank: int, batch: int) -> List[torch.Tensor]:
    """The batches of indices DistributedSampler gives ``rank`` (padding repeats items)."""
    order = torch.tensor(list(DistributedSampler(range(n_items), num_replicas=WORLD, rank=rank, shuffle=False)))
    return list(order.split(batch))


def _embedding_calls(x, y, rows_list, **flags) -> List[Call]:
    calls = []
    for rows in rows_list:
        kw = {"ids": rows}
        kw.update({k: v[rows] for k, v in flags.items()})
        calls.append(("update", (x[rows], y[rows]), kw))
    return calls


def scenarios() -> Dict[str, Scenario]:
    s: Dict[str, Scenario] = {}
    b = dense_batches(31, [5, 3, 6, 4])
    # uneven update counts (3 vs 1), per-query values, mean and median
    s["ranking_uneven"] = Scenario(lambda **kw: lr.RankingMetrics(RANK_KEYS, **kw),
                                   {0: _dense_calls(b[:3]), 1: _dense_calls(b[3:])})
    s["ranking_uneven_median_none"] = Scenario(
        lambda **kw: MetricCollection({"med": lr.RankingMetrics(RANK_KEYS, reduce="median", **kw),
                                       "none": lr.RankingMetrics(["ndcg@5"], reduce="none", **kw)}),
        {0: _dense_calls(b[:1]), 1: _dense_calls(b[1:])})
    # forward on every batch: local batch values, global compute, no hang with 1 vs 3 calls
    s["ranking_forward"] = Scenario(lambda **kw: lr.RankingMetrics(RANK_KEYS, **kw),
                                    {0: _dense_calls(b[:1], "forward"), 1: _dense_calls(b[1:], "forward")},
                                    record_forward=True)
    # a rank with no data
    s["ranking_empty_rank"] = Scenario(lambda **kw: lr.RankingMetrics(RANK_KEYS, **kw),
                                       {0: _dense_calls(b), 1: []})
    s["ranking_compact_empty_rank"] = Scenario(lambda **kw: lr.RankingMetrics(RANK_KEYS, compact=True, **kw),
                                               {0: [], 1: _dense_calls(b)})
    # repeated queries across ranks removed by id; categories
    s["ranking_ids_repeats"] = Scenario(
        lambda **kw: lr.RankingMetrics(RANK_KEYS, reduce="none", **kw),
        {0: _dense_calls(b[:2], ids=True, categories=True),
         1: _dense_calls(b[2:], ids=True, categories=True) + _dense_calls(b[:1], ids=True, categories=True)},
        reference_rows=_dense_calls(b, ids=True, categories=True))
    s["ranking_local"] = Scenario(lambda **kw: lr.RankingMetrics(RANK_KEYS, **kw),
                                  {0: _dense_calls(b[:3]), 1: _dense_calls(b[3:])}, local=True)
    s["ranking_process_group"] = Scenario(lambda **kw: lr.RankingMetrics(RANK_KEYS, **kw),
                                          {0: _dense_calls(b[:2]), 1: _dense_calls(b[2:])}, with_group=True)
    # a user's dist_sync_fn gets torchmetrics' own treatment (here: its padding gather; uneven sizes)
    s["ranking_custom_sync_fn"] = Scenario(lambda **kw: lr.RankingMetrics(RANK_KEYS, dist_sync_fn=custom_sync, **kw),
                                           {0: _dense_calls(b[:3]), 1: _dense_calls(b[3:])})
    s["all_ranks_empty"] = Scenario(
        lambda **kw: MetricCollection({"r": lr.RankingMetrics(["mrr"], **kw), "e": lr.EmbeddingMetrics(["cmc@1"], **kw)}),
        {0: [], 1: []})

    # embeddings: DistributedSampler padding removed by ids; uneven batch counts
    x, y = clustered_embeddings(32, 23)
    cats = torch.arange(23) % 3
    s["embedding_sampler_padding"] = Scenario(
        lambda **kw: lr.EmbeddingMetrics(EMB_KEYS, **kw),
        {r: _embedding_calls(x, y, _sampler_rows(23, r, 5), categories=cats) for r in range(WORLD)},
        reference_rows=_embedding_calls(x, y, [torch.arange(23)], categories=cats))
    is_query = torch.arange(23) % 4 == 0
    s["embedding_empty_rank_flags"] = Scenario(
        lambda **kw: lr.EmbeddingMetrics(EMB_KEYS, distance="euclidean", **kw),
        {0: [], 1: _embedding_calls(x, y, list(torch.arange(23).split(7)), is_query=is_query, is_gallery=~is_query)})
    s["embedding_no_ids_uneven"] = Scenario(
        lambda **kw: lr.EmbeddingMetrics(EMB_KEYS + ["nmi"], **kw),
        {0: [("update", (x[:4], y[:4]), {})], 1: [("update", (x[4:10], y[4:10]), {}), ("update", (x[10:], y[10:]), {})]})

    # DistributedSampler padding whose repeat was recomputed with a rounding-level
    # difference (as another batch on a GPU may give): still dropped
    padded = []
    for r in range(WORLD):
        rows_r = _sampler_rows(23, r, 5)
        is_pad = r + WORLD * torch.arange(sum(len(t) for t in rows_r)) >= 23
        xr = x[torch.cat(rows_r)]
        xr = torch.where(is_pad[:, None], torch.nextafter(xr, torch.full_like(xr, torch.inf)), xr)  # one unit
        padded.append([("update", (e, y[i]), {"ids": i}) for e, i in zip(xr.split(5), rows_r)])
    s["embedding_padding_recomputed"] = Scenario(lambda **kw: lr.EmbeddingMetrics(EMB_KEYS, **kw),
                                                 {0: padded[0], 1: padded[1]},
                                                 reference_rows=_embedding_calls(x, y, [torch.arange(23)]))
    # ids counted from 0 in every batch: repeated with different rows, an error
    s["embedding_ids_from_zero"] = Scenario(
        lambda **kw: lr.EmbeddingMetrics(EMB_KEYS, **kw),
        {0: [("update", (x[:6], y[:6]), {"ids": torch.arange(6)})],
         1: [("update", (x[6:16], y[6:16]), {"ids": torch.arange(10)}),
             ("update", (x[16:], y[16:]), {"ids": torch.arange(7)})]})
    s["ranking_ids_from_zero"] = Scenario(
        lambda **kw: lr.RankingMetrics(RANK_KEYS, **kw),
        {0: [("update", (p, t), {"ids": torch.arange(len(i))}) for p, t, i, _ in b[:2]],
         1: [("update", (p, t), {"ids": torch.arange(len(i))}) for p, t, i, _ in b[2:]]})
    # every dtype one process accepts: labels (integers; multi-hot bool/uint8), embeddings (floats)
    multi_hot = torch.nn.functional.one_hot(y, 4)
    variants = [(f"labels_{d}", x, y.to(d)) for d in INT_DTYPES]
    variants += [(f"multi_hot_{d}", x, multi_hot.to(d)) for d in (torch.bool, torch.uint8)]
    variants += [(f"embeddings_{d}", x.to(d), y) for d in FLOAT_DTYPES]
    for name, xd, yd in variants:
        s[f"embedding_{name.replace('torch.', '')}"] = Scenario(
            lambda **kw: lr.EmbeddingMetrics(EMB_KEYS, **kw),
            {0: _embedding_calls(xd, yd, [torch.arange(0, 5)], is_query=is_query),
             1: _embedding_calls(xd, yd, [torch.arange(5, 12), torch.arange(12, 23)], is_query=is_query)})

    # drop-ins: queries split across ranks (equal ids form one query), uneven counts, empty rank
    indexes, preds, target = flat_queries(33, 30, 12)
    calls = _flat_calls(indexes, preds, (target > 0).long(), 5)  # binary, as torchmetrics wants

    def dropins(**kw):
        return MetricCollection({
            "map": lr.RetrievalMAP(top_k=5, **kw),
            "ndcg": lr.RetrievalNormalizedDCG(**kw),
            "mrr_skip": lr.RetrievalMRR(empty_target_action="skip", aggregation="median", **kw),
            "fall_out": lr.RetrievalFallOut(top_k=3, **kw),
            "auroc": lr.RetrievalAUROC(max_fpr=0.5, **kw),
        }, compute_groups=False)

    s["dropins_uneven"] = Scenario(dropins, {0: calls[:4], 1: calls[4:]})
    s["dropins_empty_rank"] = Scenario(dropins, {0: [], 1: calls})
    s["dropin_curve_uneven"] = Scenario(lambda **kw: lr.RetrievalPrecisionRecallCurve(max_k=6, **kw),
                                        {0: calls[:1], 1: calls[1:]})
    # drop-in states of other dtypes: indexes of every integer dtype, preds of every
    # floating dtype, bool / uint8 targets
    for k, d in enumerate(INT_DTYPES + FLOAT_DTYPES):
        p = preds.to(d) if d in FLOAT_DTYPES else preds
        idx = indexes.to(d) if d in INT_DTYPES else indexes
        tgt = (target > 0).to(torch.bool if k % 2 else torch.uint8)
        typed = _flat_calls(idx, p, tgt, 5)
        s[f"dropins_{str(d).replace('torch.', '')}"] = Scenario(
            lambda **kw: lr.RetrievalMAP(top_k=5, **kw), {0: typed[:2], 1: typed[2:]})

    # drop-ins with DistributedSampler padding (23 queries of 8 entries, one sample
    # = one query): the per-entry ids drop the repeated query; without them it counts twice
    g = torch.Generator().manual_seed(40)
    q_preds, q_target = torch.rand(23, 8, generator=g), (torch.rand(23, 8, generator=g) < 0.3).long()
    q_target[1, 2] = 1

    def query_calls(rows_list, ids=True):
        calls = []
        for rows in rows_list:
            kw = {"ids": (rows[:, None] * 8 + torch.arange(8)).reshape(-1)} if ids else {}
            calls.append(("update", (q_preds[rows].reshape(-1), q_target[rows].reshape(-1),
                                     rows.repeat_interleave(8)), kw))
        return calls

    def sampler_dropins(**kw):
        return MetricCollection({"map": lr.RetrievalMAP(top_k=10, **kw), "mrr": lr.RetrievalMRR(**kw),
                                 "ndcg": lr.RetrievalNormalizedDCG(top_k=3, **kw),
                                 "curve": lr.RetrievalPrecisionRecallCurve(max_k=4, **kw)})

    whole = query_calls([torch.arange(23)])
    s["dropins_sampler_ids"] = Scenario(
        sampler_dropins, {r: query_calls(_sampler_rows(23, r, 5)) for r in range(WORLD)}, reference_rows=whole)
    s["dropins_sampler_without_ids"] = Scenario(
        sampler_dropins, {r: query_calls(_sampler_rows(23, r, 5), ids=False) for r in range(WORLD)},
        reference_rows=query_calls([torch.arange(23)], ids=False))
    # RankingMetrics with the sampler's padding and query ids
    s["ranking_sampler_ids"] = Scenario(
        lambda **kw: lr.RankingMetrics(["map@10", "ndcg@3"], **kw),
        {r: [("update", (q_preds[rows], q_target[rows]), {"ids": rows}) for rows in _sampler_rows(23, r, 5)]
         for r in range(WORLD)},
        reference_rows=[("update", (q_preds, q_target), {"ids": torch.arange(23)})])
    return s


CUSTOM_SYNC_CALLS: List[Tuple[int, ...]] = []


def custom_sync(tensor, group=None):
    """A user-supplied dist_sync_fn (torchmetrics' default gather, wrapped); its
    calls are counted, so the test sees it was used."""
    CUSTOM_SYNC_CALLS.append(tuple(tensor.shape))
    return gather_all_tensors(tensor, group)


def apply(metric, calls: List[Call]):
    outs = []
    for method, args, kwargs in calls:
        fn = metric if method == "forward" else getattr(metric, method)
        outs.append(fn(*args, **kwargs))
    return outs


def plain(value):
    """Results as plain containers of float64 tensors (dicts sorted by key)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value.detach().to(torch.float64).cpu()


def run(name: str, rank: int, world: int) -> Dict[str, Any]:
    """One scenario on this rank (in a harness group): ``compute`` (and the
    ``forward`` values, when recorded) as plain tensors, and how many times the
    user's ``custom_sync`` ran."""
    import torch.distributed as dist

    sc = CASES[name]
    kwargs: Dict[str, Any] = {}
    if sc.local:
        kwargs["sync_on_compute"] = False
    if sc.with_group:
        kwargs["process_group"] = dist.new_group(list(range(world)))
    CUSTOM_SYNC_CALLS.clear()
    metric = sc.make(**kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = apply(metric, sc.feeds[rank])
        result = {"compute": plain(metric.compute()), "custom_sync_calls": len(CUSTOM_SYNC_CALLS)}
    # what the metrics said about computing without ids (see test_ddp)
    result["id_warnings"] = [str(w.message) for w in caught if "without ids" in str(w.message)]
    if sc.record_forward:
        result["forward"] = plain(outs)
    return result


CASES = scenarios()
SCENARIOS = {name: functools.partial(run, name) for name in CASES}  # the harness's entry points
