"""The ignite suite of the multi-process harness (``harness.py``): cases run by
every rank of a group and, as the reference, by one process without a process group.

Each case builds the same data on every rank (fixed seeds), gives each rank its
share, runs the metric (through an ``Engine`` when the rank has batches, by
``compute()`` alone when it has none: both enter the same collectives) and returns
the result (the harness records an error raised).

Shares:
* ``uneven``: batches of different sizes, dealt round-robin to the first
  ``max(world - 1, 2)`` ranks (or to the only one): with 3 processes rank 2 sees no
  batch, and ranks hold different numbers of batches;
* ``sampler``: a shuffled ``DistributedSampler`` (it pads with repeated samples
  when the dataset does not divide), ids passed so the repeats are dropped;
* ``nobody``: no rank sees data (NotComputableError everywhere).

Repeated ids: DistributedSampler's padding repeats a sample, which is dropped (also
when the repeat was recomputed with a rounding-level difference); ids counted from 0
in every batch repeat with different rows, an error on every rank. Labels and
embeddings of every dtype that one process accepts sync exactly.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List

import torch
from torch.utils.data import DistributedSampler

from ignite.engine import Engine

import ignite_retrieval as ir

N_QUERIES = 37
N_ITEMS = 23
BATCH_SIZES = (7, 5, 9, 3, 8, 1, 4)  # sums to 37


def _ranking_data():
    g = torch.Generator().manual_seed(11)
    preds = torch.randint(0, 6, (N_QUERIES, N_ITEMS), generator=g).float()  # many ties
    level = torch.randint(1, 4, (N_QUERIES, N_ITEMS), generator=g)
    target = torch.where(torch.rand(N_QUERIES, N_ITEMS, generator=g) < 0.2, level, torch.zeros_like(level))
    target[::6] = 0  # queries with no relevant item
    categories = torch.arange(N_QUERIES) % 3
    return preds, target, categories


def _embedding_data(multi_hot: bool = False):
    g = torch.Generator().manual_seed(12)
    n = 41
    labels = torch.randint(0, 5, (n,), generator=g)
    x = torch.randn(n, 6, generator=g) + 1.5 * torch.nn.functional.one_hot(labels, 6).float()
    x[5] = x[4]  # equal embeddings: a tie across items
    if multi_hot:
        extra = torch.nn.functional.one_hot(torch.randint(0, 5, (n,), generator=g), 5).bool()
        return x, torch.nn.functional.one_hot(labels, 5).bool() | extra
    return x, labels


def _uneven_rows(n: int, rank: int, world: int) -> List[torch.Tensor]:
    """Row index batches of this rank (see module docstring)."""
    sizes, start, batches = list(BATCH_SIZES), 0, []
    while start < n:  # cover n rows with the size pattern
        for s in sizes:
            if start >= n:
                break
            batches.append(torch.arange(start, min(start + s, n)))
            start += s
    holders = 1 if world == 1 else max(world - 1, 2)
    return [b for i, b in enumerate(batches) if i % holders == rank]


def _sampler_rows(n: int, rank: int, world: int, batch_size: int = 4) -> List[torch.Tensor]:
    sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=3)
    idx = torch.tensor(list(sampler))
    return list(idx.split(batch_size))


def _run(metric, batches: List[Any]) -> Any:
    if not batches:
        return metric.compute()
    evaluator = Engine(lambda engine, batch: batch)
    metric.attach(evaluator, "result")
    return evaluator.run(batches).metrics["result"]


def _ranking_case(make_metric: Callable, share: str, *, ids: bool = False, categories: bool = False,
                  as_dict: bool = True) -> Callable[[int, int], Any]:
    def case(rank: int, world: int) -> Any:
        preds, target, cats = _ranking_data()
        rows = {"uneven": _uneven_rows, "sampler": _sampler_rows}[share](N_QUERIES, rank, world) if share != "nobody" else []
        batches = []
        for r in rows:
            if as_dict:
                b = {"y_pred": preds[r], "y": target[r], "loss": 0.0}
                if ids:
                    b["ids"] = r
                if categories:
                    b["categories"] = cats[r]
            else:
                b = (preds[r], target[r])
            batches.append(b)
        return _run(make_metric(), batches)
    return case


def _embedding_case(make_metric: Callable, share: str, *, ids: bool = True, flags: bool = False,
                    multi_hot: bool = False) -> Callable[[int, int], Any]:
    def case(rank: int, world: int) -> Any:
        x, labels = _embedding_data(multi_hot)
        n = x.shape[0]
        rows = {"uneven": _uneven_rows, "sampler": _sampler_rows}[share](n, rank, world)
        batches = []
        for r in rows:
            b = {"embeddings": x[r], "labels": labels[r]}
            if ids:
                b["ids"] = r
            if flags:
                b["is_query"] = r % 3 != 0
                b["is_gallery"] = r % 2 == 0
            batches.append(b)
        return _run(make_metric(), batches)
    return case


def _mixed_ids_case(rank: int, world: int) -> Any:
    """ids given on rank 0 only: every rank must raise the same error (no hang)."""
    preds, target, _ = _ranking_data()
    rows = _uneven_rows(N_QUERIES, rank, world)
    batches = [{"y_pred": preds[r], "y": target[r], **({"ids": r} if rank == 0 else {})} for r in rows]
    return _run(ir.RankingMetrics(["ndcg@5"]), batches)


def _padding_recomputed_case(rank: int, world: int) -> Any:
    """DistributedSampler padding whose repeated rows were recomputed two units in
    the last place away (as a GPU may give in another batch): still dropped."""
    x, labels = _embedding_data()
    n = x.shape[0]
    idx = torch.tensor(list(DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=3)))
    is_pad = rank + world * torch.arange(idx.numel()) >= n  # global positions past the dataset: the repeats
    emb = x[idx]
    up = torch.nextafter(emb, torch.full_like(emb, torch.inf))  # one unit in the last place, every entry
    emb = torch.where(is_pad[:, None], torch.nextafter(up, torch.full_like(up, torch.inf)), emb)
    batches = [{"embeddings": e, "labels": labels[i], "ids": i} for e, i in zip(emb.split(4), idx.split(4))]
    return _run(ir.EmbeddingMetrics(EMB_KEYS), batches)


def _ids_from_zero_case(kind: str) -> Callable[[int, int], Any]:
    """ids counted from 0 in every batch: they repeat with different rows (an error)."""
    def case(rank: int, world: int) -> Any:
        if kind == "ranking":
            preds, target, _ = _ranking_data()
            rows = _uneven_rows(N_QUERIES, rank, world)
            batches = [{"y_pred": preds[r], "y": target[r], "ids": torch.arange(len(r))} for r in rows]
            return _run(ir.RankingMetrics(RANK_KEYS), batches)
        x, labels = _embedding_data()
        rows = _uneven_rows(x.shape[0], rank, world)
        batches = [{"embeddings": x[r], "labels": labels[r], "ids": torch.arange(len(r))} for r in rows]
        return _run(ir.EmbeddingMetrics(EMB_KEYS), batches)
    return case


INT_DTYPES = [d for d in (torch.uint8, getattr(torch, "uint16", None), getattr(torch, "uint32", None),
                          getattr(torch, "uint64", None), torch.int8, torch.int16, torch.int32, torch.int64) if d]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _dtypes_case(rank: int, world: int) -> Dict[str, Any]:
    """Labels of every integer dtype, multi-hot labels of bool and uint8, embeddings
    of every floating dtype: each gathered and evaluated (uneven share, flags)."""
    x, labels = _embedding_data()
    multi_hot = torch.nn.functional.one_hot(labels, 5)
    rows = _uneven_rows(x.shape[0], rank, world)
    variants = [(f"labels {d}", x, labels.to(d)) for d in INT_DTYPES]
    variants += [(f"multi-hot {d}", x, multi_hot.to(d)) for d in (torch.bool, torch.uint8)]
    variants += [(f"embeddings {d}", x.to(d), labels) for d in FLOAT_DTYPES]
    out = {}
    for name, emb, lab in variants:
        batches = [{"embeddings": emb[r], "labels": lab[r], "ids": r, "is_query": r % 3 != 0} for r in rows]
        out[name] = _run(ir.EmbeddingMetrics(EMB_KEYS), batches)
    return out


def _id_warnings_case(rank: int, world: int) -> Dict[str, Any]:
    """The warnings about computing without ids (a list per metric): RankingMetrics
    and EmbeddingMetrics without ids, compact, a rec_sys drop-in, and with ids."""
    import warnings

    out = {}
    for name, make, case in (("ranking", lambda: ir.RankingMetrics(["mrr"]), _ranking_case),
                             ("compact", lambda: ir.RankingMetrics(["mrr"], compact=True), _ranking_case),
                             ("hit_rate", lambda: ir.HitRate(top_k=3), _ranking_case),
                             ("embeddings", lambda: ir.EmbeddingMetrics(["cmc@1"]), _embedding_case)):
        for ids in (False, True):
            if name == "compact" and ids:
                continue
            metric = make()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                case(lambda: metric, "sampler", ids=ids)(rank, world)
                metric.compute()  # a second compute: no second warning
            out[f"{name} ids={ids}"] = [str(w.message) for w in caught if "without ids" in str(w.message)]
    return out


RANK_KEYS = ["ndcg@5", "map@r", "mrr", "hit_rate@3", "precision@2", "recall@10"]
EMB_KEYS = ["cmc@1", "map@r", "precision_capped@5", "ndcg@3"]

CASES: Dict[str, Callable[[int, int], Any]] = {
    "ranking_uneven_categories": _ranking_case(lambda: ir.RankingMetrics(RANK_KEYS), "uneven", categories=True),
    "ranking_uneven_tuples_zero": _ranking_case(lambda: ir.RankingMetrics(RANK_KEYS, empty="zero"), "uneven", as_dict=False),
    "ranking_compact": _ranking_case(lambda: ir.RankingMetrics(RANK_KEYS, compact=True), "uneven"),
    "ranking_compact_one": _ranking_case(lambda: ir.RankingMetrics(RANK_KEYS, compact=True, empty="one"), "uneven", as_dict=False),
    "ranking_sampler_ids_none": _ranking_case(lambda: ir.RankingMetrics(RANK_KEYS, reduce="none"), "sampler", ids=True),
    "ranking_sampler_ids_median": _ranking_case(lambda: ir.RankingMetrics(RANK_KEYS, reduce="median"), "sampler", ids=True, categories=True),
    "ranking_sampler_without_ids": _ranking_case(lambda: ir.RankingMetrics(RANK_KEYS, empty="zero"), "sampler"),
    "ranking_nobody": _ranking_case(lambda: ir.RankingMetrics(RANK_KEYS), "nobody"),
    "ranking_mixed_ids": _mixed_ids_case,
    "hitrate_uneven": _ranking_case(lambda: ir.HitRate(top_k=[1, 3, 5]), "uneven", as_dict=False),
    "hitrate_sampler_ids": _ranking_case(lambda: ir.HitRate(top_k=[5, 1], ignore_zero_hits=False), "sampler", ids=True),
    "ndcg_uneven": _ranking_case(lambda: ir.NDCG(top_k=[1, 5, 10], relevance_threshold=2), "uneven", as_dict=False),
    "ndcg_sampler_ids": _ranking_case(lambda: ir.NDCG(top_k=[3, 10], gain_function="linear_rank"), "sampler", ids=True),
    "mrr_uneven": _ranking_case(lambda: ir.MRR(top_k=[1, 4, 10], ignore_zero_hits=False), "uneven", as_dict=False),
    "mrr_sampler_ids": _ranking_case(lambda: ir.MRR(), "sampler", ids=True),
    "mrr_nobody": _ranking_case(lambda: ir.MRR(), "nobody"),
    "embeddings_sampler_ids": _embedding_case(lambda: ir.EmbeddingMetrics(EMB_KEYS + ["nmi"]), "sampler"),
    "embeddings_uneven_flags": _embedding_case(lambda: ir.EmbeddingMetrics(EMB_KEYS), "uneven", flags=True),
    "embeddings_sampler_flags": _embedding_case(lambda: ir.EmbeddingMetrics(EMB_KEYS, distance="euclidean"), "sampler", flags=True),
    "embeddings_uneven_multi_hot": _embedding_case(lambda: ir.EmbeddingMetrics(EMB_KEYS, reduce="none"), "uneven", multi_hot=True),
    "embeddings_uneven_no_ids": _embedding_case(lambda: ir.EmbeddingMetrics(EMB_KEYS, per_class="macro"), "uneven", ids=False),
    "embeddings_padding_recomputed": _padding_recomputed_case,
    "embeddings_ids_from_zero": _ids_from_zero_case("embedding"),
    "ranking_ids_from_zero": _ids_from_zero_case("ranking"),
    "embeddings_every_dtype": _dtypes_case,
    "id_warnings": _id_warnings_case,
}
SCENARIOS = CASES  # the harness's name
WORLDS = (2, 3)


def same(a: Any, b: Any, tol: float = 1e-9) -> bool:
    """Equal up to ``tol``, NaN equal to NaN, through dicts and lists."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], tol) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    return a == b
