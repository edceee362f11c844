"""The validation-loop path (QrelsJudge -> RankingMetrics with ``n_relevant`` / ``ideal``) on
2 gloo processes (the shared harness): uneven shares of the batches and a query repeated
as DistributedSampler pads give, on every rank and for both adapters, the one-process
result, which is trec_eval's on the run written from the same lists."""
from __future__ import annotations

import functools

import pytest
import torch

pytest.importorskip("numpy")
pytest.importorskip("ignite")
pytest.importorskip("torchmetrics")

from retrieval_core.trec import evaluate_trec, read_run, write_run  # noqa: E402
from tests.distributed import harness  # noqa: E402
from tests.distributed.topk_scenarios import KEYS, PADDED, SCENARIOS, SEED, share  # noqa: E402
from tests.unit.trec.cases import make_loop  # noqa: E402

SUITE = "tests.distributed.topk_scenarios"
TREC = ["map", "ndcg", "ndcg_cut_10", "recip_rank", "P_5", "recall_100", "Rprec", "success_1", "map_cut_10"]


@functools.lru_cache(maxsize=None)
def _ranks():
    return harness.run_group(2, [SUITE])


def test_the_shares_are_uneven_and_repeat_a_query():
    rows = [[q for b in share(rank, 2) for q in b.queries] for rank in range(2)]
    assert 0 < len(rows[0]) != len(rows[1]) and rows[0][-1] in rows[1]
    assert sorted(set(rows[0] + rows[1])) == sorted(q for b in share(0, 1) for q in b.queries)


def test_the_one_process_reference_is_trec_eval(tmp_path):
    qrels, batches = make_loop(SEED)
    rows = [(q, i, s) for b in batches for q, i, s in zip(b.queries, b.doc_index, b.scores.double())]
    write_run(tmp_path / "run", torch.stack([r[1] for r in rows]), torch.stack([r[2] for r in rows]),
              query_ids=[r[0] for r in rows], doc_ids=qrels.docs.ids())
    want = evaluate_trec(qrels, read_run(tmp_path / "run", docs=qrels.docs), TREC)
    for name, outcome in harness.run_local(SCENARIOS).items():
        got = harness.value(outcome, name)
        assert name in PADDED or sorted(got["per_query"]) == sorted(want.per_query())
        for key, trec in zip(KEYS, TREC):
            assert got["summary"][key] == pytest.approx(want.summary()[trec], abs=1e-12, rel=0), (name, key)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_two_processes_equal_one():
    reference = harness.run_local(SCENARIOS)
    for rank, suites in enumerate(_ranks()):
        for name in SCENARIOS:
            got = harness.value(suites[SUITE][name], f"rank {rank}, {name}")
            want = harness.value(reference[name], name)
            if name in PADDED:  # the repeated query counted twice: the ids above do matter
                assert any(abs(got["summary"][k] - want["summary"][k]) > 1e-6 for k in KEYS), (rank, name)
                continue
            assert got["per_query"] == want["per_query"], (rank, name)
            for key in KEYS:
                assert got["summary"][key] == pytest.approx(want["summary"][key], abs=1e-12, rel=0), (rank, name, key)
