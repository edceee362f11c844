"""What ranks compare before a distributed evaluation (issue 18, item 4), in one
process: the texts of option values, the message, and that every option of every
distributed entry point and adapter is compared (a new option fails here until
it is compared, or listed as data)."""
from __future__ import annotations

import functools
import inspect

import pytest
import torch

import ignite_retrieval as ir
import lightning_retrieval as lr
from retrieval_core import distributed as D
from retrieval_core.distributed import evaluation
from retrieval_core.distributed.agreement import canonical, disagreement, option_texts

# each rank's own data (rows, ids, categories, ...) and the communicator: never compared
DATA = {"query", "query_labels", "gallery", "gallery_labels", "query_ids", "gallery_ids", "categories",
        "confidence", "group", "exclude"}  # exclude: each rank's own queries' pairs
NOT_RESULT = {"progress"}  # who prints a progress bar: rank 0
IGNITE_OWN = {"output_transform", "device", "skip_unrolling"}  # how each rank reads its engine, where it keeps state


def _graded(q, g):
    return (q.unsqueeze(1) == g.unsqueeze(0)).double()


def _pair():
    return (lambda q, g: (q.unsqueeze(1) == g.unsqueeze(0)).double(),
            lambda q, g: (q.unsqueeze(1) != g.unsqueeze(0)).double())


def _closure(value):
    return lambda q, g: _graded(q, g) * 0 + value


def test_equal_values_give_equal_texts():
    assert canonical(1) == canonical(1.0) == canonical(torch.tensor(1).item())
    assert canonical({"b": [1, 2], "a": None}) == canonical({"a": None, "b": (1, 2.0)})
    assert canonical(torch.arange(3)) == canonical(torch.arange(3).clone())
    assert canonical(torch.device("cpu")) == canonical(torch.device("cuda", 1))  # each rank's own device
    assert canonical(_closure(1)) == canonical(_closure(2))  # captured values are each rank's own
    assert canonical(_graded) == canonical(_graded)


def test_different_values_give_different_texts():
    first, second = _pair()
    different = [
        (["cmc@1", "map@r"], ["map@r", "cmc@1"]), (1, 2), (1, True), (0.9, 0.95), (None, 0), ("a", "b"),
        (torch.arange(3), torch.arange(1, 4)), (torch.arange(3), torch.arange(3).double()),
        (first, second), (_graded, first), (functools.partial(_graded), functools.partial(first)),
        (functools.partial(torch.cdist, p=1), functools.partial(torch.cdist, p=2)), (torch.float32, torch.float64),
    ]
    for a, b in different:
        assert canonical(a) != canonical(b), (a, b)


class Unreadable:
    def __repr__(self):
        raise RuntimeError("no repr")


def test_a_value_that_cannot_be_read_still_gets_a_text():
    # a rank must not stop before the exchange (the others would wait for it)
    assert option_texts({"x": Unreadable()})["x"] == f"<{__name__}.Unreadable, unreadable>"


def test_long_texts_are_cut_with_a_digest():
    a, b = option_texts({"k": list(range(200))})["k"], option_texts({"k": list(range(199)) + [0]})["k"]
    assert len(a) < 100 and a != b and "(digest " in a


def test_message_names_each_option_and_each_rank():
    every = [{"ties": "'stable'", "k": "1"}, {"ties": "'expected'", "k": "1"}, {"ties": "'stable'", "k": "1", "x": "2"}]
    assert disagreement(every, "W") == (
        "W: the processes were given different options (each must be the same on every process): "
        "ties: 'stable' on ranks 0 and 2 vs 'expected' on rank 1; x: <not given> on ranks 0 and 1 vs 2 on rank 2")
    assert disagreement([{"k": "1"}, {"k": "1"}], "W") is None
    assert disagreement([None, None], "W") is None


def test_one_process_compares_nothing():
    D.agree_options({"ties": "stable"}, what="W")  # no process group: no exchange, no error
    assert D.agree(lambda: (1, 2), options={"a": 1}) == (1, [2])


# -- every option of every entry point is compared -------------------------------------

class _Captured(Exception):
    pass


@pytest.mark.parametrize("entry", [D.evaluate_embeddings_across_ranks, D.evaluate_split])
def test_distributed_entry_points_compare_every_option(entry, monkeypatch):
    params = [p for p in inspect.signature(entry).parameters]
    options = [p for p in params if p not in DATA | NOT_RESULT]
    markers = {p: object() for p in options}
    captured = {}

    def agree(fn, *, options=None, what="", **kwargs):
        if options is None:  # the gallery sizes' exchange (relevance pairs, exclude=), before the check
            return None, [2]
        captured.update(options=options, what=what)
        raise _Captured

    monkeypatch.setattr(evaluation, "world_size", lambda group=None: 2)
    monkeypatch.setattr(evaluation, "agree", agree)
    with pytest.raises(_Captured):
        entry(torch.zeros(2, 2), torch.zeros(2, dtype=torch.int64), **markers)
    got = captured["options"]
    # evaluate_split: every rank holds the same data, so whether exclude= was given is compared too
    presence = {"exclude"} if entry is D.evaluate_split else set()
    assert set(got) == set(options) | presence, set(got) ^ (set(options) | presence)
    for p in options:  # each is the value given (the same object: nothing dropped or replaced)
        assert got[p] is markers[p], p
    assert captured["what"] == f"distributed.{entry.__name__}"


def _adapter_classes(module):
    return [getattr(module, n) for n in module.__all__
            if inspect.isclass(getattr(module, n)) and not inspect.isabstract(getattr(module, n))
            and n not in ("RetrievalMetric",)]


# per-parameter values other than the default, for the adapters' constructors
OTHER = {
    "metrics": ["mrr", "ndcg@3"], "ties": "expected", "empty": "zero", "reduce": "max", "ci": 0.9,
    "ci_method": "beta", "n_resamples": 50, "seed": 4, "keep_per_query": False, "distance": "dot",
    "relevance": _graded, "per_class": "macro", "memory_budget": 1 << 20, "top_k": 4, "ignore_zero_hits": False,
    "relevance_threshold": 0.5, "gain_function": "linear_rank", "empty_target_action": "skip", "ignore_index": -1,
    "aggregation": "max", "adaptive_k": True, "max_fpr": 0.5, "max_k": 7, "min_precision": 0.5,
    "n_items": 9, "item_popularity": torch.ones(5), "item_categories": torch.arange(5),
    "item_embeddings": torch.ones(5, 2), "tail_ratio": 0.3,
}
BASE = {"metrics": ["ndcg@3", "mrr"], "top_k": 2}
NEEDS = {"ci_method": {"ci": 0.9, "metrics": ["hit_rate@3"]}, "compact": {"keep_per_query": False}}


@pytest.mark.parametrize("cls", _adapter_classes(ir) + _adapter_classes(lr), ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_adapters_compare_every_option(cls):
    if cls.__name__ == "EmbeddingMetrics":
        base = {"metrics": ["cmc@1", "map@r"]}
    else:
        base = {k: v for k, v in BASE.items() if k in inspect.signature(cls).parameters}
    params = [p for p, v in inspect.signature(cls).parameters.items()
              if v.kind not in (v.VAR_KEYWORD, v.VAR_POSITIONAL) and p not in IGNITE_OWN | NOT_RESULT]
    agreed = cls(**base)._agreed_options()
    assert set(params) <= set(agreed), set(params) - set(agreed)
    assert agreed["metric"] == cls.__qualname__
    for p in params:  # another value of each changes what ranks compare
        other = dict(base, **NEEDS.get(p, {}))
        first = option_texts(cls(**other)._agreed_options())
        other[p] = True if p == "compact" else OTHER[p]
        second = option_texts(cls(**other)._agreed_options())
        assert first != second, p
