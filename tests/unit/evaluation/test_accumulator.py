"""The framework-neutral accumulator (retrieval_core.evaluation.accumulator): a plain loop
over it gives the one-call entry points' results; each update checks its input once,
through every adapter; its state fits torchmetrics' add_state and ignite's checkpoints."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Dict, Iterator

import pytest
import torch

import retrieval_core as rc
from retrieval_core.evaluation.accumulator import (
    AttributeState, EmbeddingAccumulator, FlatAccumulator, ScoreAccumulator, agree, options_digest,
)
from retrieval_core.validate import embeddings as validate_embeddings
from retrieval_core.validate import tensors as validate_tensors


def _scores(seed: int, b: int = 6, n: int = 9):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 4, (b, n), generator=g).float(), (torch.rand(b, n, generator=g) < 0.3).long()


@contextmanager
def counting(*functions) -> Iterator[Dict[str, int]]:
    """Count the calls of ``functions`` wherever retrieval_core's modules bound them."""
    counts = {f.__name__: 0 for f in functions}
    patched = []
    for f in functions:
        def counted(*args, _f=f, **kwargs):
            counts[_f.__name__] += 1
            return _f(*args, **kwargs)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("retrieval_core") and getattr(module, f.__name__, None) is f:
                patched.append((module, f.__name__, f))
                setattr(module, f.__name__, counted)
    try:
        yield counts
    finally:
        for module, name, f in patched:
            setattr(module, name, f)


STRUCTURE = (validate_tensors.check_score_batch, validate_tensors.check_scores)


def _ignite_update(preds, target):
    from ignite_retrieval import RankingMetrics
    metric = RankingMetrics(["mrr@3", "ndcg"])
    return lambda: metric.update((preds, target))


def _lightning_update(preds, target):
    from lightning_retrieval import RankingMetrics
    metric = RankingMetrics(["mrr@3", "ndcg"])
    return lambda: metric.update(preds, target)


def _plain_update(preds, target):
    acc = ScoreAccumulator(["mrr@3", "ndcg"])
    state = acc.new_state()
    return lambda: acc.update(state, preds, target)


@pytest.mark.parametrize("adapter", [_plain_update, _ignite_update, _lightning_update])
def test_a_score_update_checks_its_input_once(adapter):
    preds, target = _scores(0)
    update = adapter(preds, target)
    with counting(*STRUCTURE) as counts:
        update()
        update()
    assert sum(counts.values()) == 2, counts  # one structure check per update


@pytest.mark.parametrize("adapter", ["plain", "ignite", "lightning"])
def test_an_embedding_update_checks_its_input_once(adapter):
    x, labels = torch.randn(8, 3), torch.arange(8) % 3
    if adapter == "plain":
        acc = EmbeddingAccumulator(["cmc@1"])
        state = acc.new_state()
        update = lambda: acc.update(state, x, labels)  # noqa: E731
    elif adapter == "ignite":
        from ignite_retrieval import EmbeddingMetrics
        metric = EmbeddingMetrics(["cmc@1"])
        update = lambda: metric.update((x, labels))  # noqa: E731
    else:
        from lightning_retrieval import EmbeddingMetrics
        metric = EmbeddingMetrics(["cmc@1"])
        update = lambda: metric.update(x, labels)  # noqa: E731
    with counting(validate_embeddings.check_embeddings, validate_embeddings.check_labels) as counts:
        update()
        update()
    assert counts == {"check_embeddings": 2, "check_labels": 2}


def test_a_flat_update_checks_its_input_once():
    from lightning_retrieval import RetrievalMAP
    metric = RetrievalMAP()
    with counting(*STRUCTURE) as counts:
        metric.update(torch.tensor([0.9, 0.2, 0.5]), torch.tensor([1, 0, 1]), indexes=torch.tensor([0, 0, 1]))
    assert sum(counts.values()) == 1, counts


def test_a_plain_loop_equals_one_call():
    preds, target = _scores(1, b=20)
    keys = ["mrr@3", "ndcg@5", "map", "precision@2"]
    acc = ScoreAccumulator(keys, ties="expected", empty="zero")
    state = acc.new_state()
    assert [acc.update(state, preds[i:i + 7], target[i:i + 7]) for i in range(0, 20, 7)] == [7, 7, 6]
    synced = acc.sync(state, acc.agreed_options())
    assert synced.rows == 20 and synced.processes == 1
    got, want = acc.compute(synced.state), rc.evaluate_scores(preds, target, keys, ties="expected", empty="zero")
    assert {k: v.item() for k, v in got.items()} == {k: v.item() for k, v in want.items()}


def test_compact_state_sums_and_counts():
    preds, target = _scores(2, b=12)
    acc = ScoreAccumulator(["mrr", "ndcg@3"], compact=True)
    state = acc.new_state()
    acc.update(state, preds[:5], target[:5])
    acc.update(state, preds[5:], target[5:])
    assert set(state) == {"sums", "invalid"} and acc.rows(state) == 12
    want = rc.evaluate_scores(preds, target, ["mrr", "ndcg@3"])
    got = acc.compute(state)
    assert all(abs(got[k].item() - want[k].item()) < 1e-12 for k in want)


def test_state_spec_is_what_add_state_takes_and_new_state_holds():
    acc = ScoreAccumulator(["mrr"])
    spec = acc.state_spec()
    assert [(name, kind) for name, _, kind in spec] == [("values", "cat"), ("ids", "cat"), ("categories", "cat"),
                                                        ("confidence", "cat"), ("invalid", "sum")]
    assert set(acc.new_state()) == {name for name, _, _ in spec}


def test_a_state_in_attributes_is_updated_in_place():
    class Holder:
        pass

    acc, holder = ScoreAccumulator(["mrr"]), Holder()
    for name, default, _ in acc.state_spec():
        setattr(holder, name, default)
    preds, target = _scores(3)
    acc.update(AttributeState(holder, [n for n, _, _ in acc.state_spec()]), preds, target, ids=torch.arange(6))
    assert len(holder.values) == 1 and len(holder.ids) == 1 and int(holder.invalid.sum()) == 0


def test_strict_inputs_refuses_an_optional_input_dropped_midway():
    preds, target = _scores(4)
    strict, lax = ScoreAccumulator(["mrr"], strict_inputs=True), ScoreAccumulator(["mrr"])
    for acc in (strict, lax):
        state = acc.new_state()
        acc.update(state, preds, target, ids=torch.arange(6))
        if acc is strict:
            with pytest.raises(ValueError, match="^'ids' was given in earlier batches and is missing in this one"):
                acc.update(state, preds, target)
        else:  # counted at compute
            acc.update(state, preds, target)
            with pytest.raises(ValueError, match="^ids were given for 6 of 12 rows"):
                acc.compute(state)


def test_embeddings_in_batches_equal_one_call():
    g = torch.Generator().manual_seed(5)
    x, labels = torch.randn(30, 4, generator=g), torch.randint(0, 4, (30,), generator=g)
    keys = ["cmc@1", "map@r", "precision@3"]
    acc = EmbeddingAccumulator(keys)
    state = acc.new_state()
    for i in range(0, 30, 8):
        acc.update(state, x[i:i + 8], labels[i:i + 8], ids=torch.arange(i, min(i + 8, 30)))
    acc.update(state, x[:2], labels[:2], ids=torch.arange(2))  # repeated as DistributedSampler pads
    got = acc.compute(acc.sync(state, acc.agreed_options()).state, processes=2)
    want = rc.evaluate_embeddings(x, labels, keys)
    assert {k: got[k].item() for k in keys} == {k: want[k].item() for k in keys}


def test_flat_entries_drop_repeated_ids_and_check_values_once():
    acc = FlatAccumulator()
    state = acc.new_state()
    acc.update(state, torch.tensor([0, 0, 1]), torch.tensor([0.9, 0.2, 0.5]), torch.tensor([1, 0, 1]),
               ids=torch.tensor([10, 11, 12]))
    acc.update(state, torch.tensor([0, 5]), torch.tensor([0.9, 0.4]), torch.tensor([1, 3]), ids=torch.tensor([10, 13]),
               ignore_index=3)
    indexes, preds, target = acc.entries(state)
    assert indexes.tolist() == [0, 0, 1] and target.tolist() == [1, 0, 1]
    seen = []
    acc.entries(state, check_target=seen.append)
    assert [t.tolist() for t in seen] == [[1, 0, 1]]


def test_options_digest_and_agreement_on_one_process():
    assert options_digest(ScoreAccumulator, {"k": 1}).equal(options_digest(ScoreAccumulator, {"k": 1}))
    assert not options_digest(ScoreAccumulator, {"k": 1}).equal(options_digest(FlatAccumulator, {"k": 1}))
    assert agree({"k": 1}, what="mine") == 1  # one process: nothing to compare, the group's size
