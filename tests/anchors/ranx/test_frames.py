"""The DataFrame and file readers (retrieval_core.trec.frames) against ranx 0.3.21's own: the same
parquet and JSON files (written by ranx, and by us) read by both give the same qrels and runs and,
through ``ranx.evaluate`` and ``evaluate_trec(complete=True)`` (ranx's mean is trec_eval's ``-c``
mean, docs/trec.md), the same values per query; and where ranx reads otherwise, shown by a value:

* ranx's ``from_df`` asserts that the id columns are ``object``: pandas 3 reads text as its ``str``
  dtype, so ``ranx.Qrels.from_parquet`` and ``from_df`` on a DataFrame of text fail (AssertionError)
  unless the ids are cast to object; we read both (and integer ids as their digits);
* a document twice for a query: ranx keeps the last row, we refuse it (as trec_eval does).

ranx compiles its numba kernels on first use (cached afterwards): one module fixture evaluates
every case once, with one thread.
"""
from __future__ import annotations

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
ranx = pytest.importorskip("ranx")

from retrieval_core.trec import (  # noqa: E402
    evaluate_trec, qrels_from_dict, qrels_from_file, qrels_from_frame, run_from_dict, run_from_file, write_file,
)
from tests.anchors.ranx.test_evaluate_trec import ranx_per_query  # noqa: E402
from tests.unit.trec.cases import random_case  # noqa: E402

MEASURES = {"map": "map", "ndcg@10": "ndcg_cut_10", "precision@5": "P_5", "mrr": "recip_rank"}
OBJECT_IDS = {"q_id": object, "doc_id": object}


def ranx_read(path, kind):
    """ranx's Qrels or Run from a file: JSON by ``from_file``, parquet by ``from_df`` with object ids."""
    cls = ranx.Qrels if kind == "qrels" else ranx.Run
    if str(path).endswith(".json"):
        return cls.from_file(str(path))
    return cls.from_df(pd.read_parquet(path).astype(OBJECT_IDS))


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    out = []
    for seed in range(2):
        qrels_d, run_d = random_case(seed, ties=False)
        folder = tmp_path_factory.mktemp(f"case{seed}")
        files = {}
        for suffix in ("json", "parquet"):  # written by ranx, and by us
            ranx.Qrels(qrels_d).save(str(folder / f"ranx_qrels.{suffix}"))
            ranx.Run(run_d).save(str(folder / f"ranx_run.{suffix}"))
            write_file(folder / f"our_qrels.{suffix}", qrels_from_dict(qrels_d))
            write_file(folder / f"our_run.{suffix}", run_from_dict(run_d))
            for who in ("ranx", "our"):
                files[who, suffix] = (folder / f"{who}_qrels.{suffix}", folder / f"{who}_run.{suffix}")
        qrels, run = ranx_read(files["ranx", "parquet"][0], "qrels"), ranx_read(files["ranx", "parquet"][1], "run")
        values = ranx_per_query(qrels.to_dict(), run.to_dict(), list(MEASURES), make_comparable=True)
        out.append(dict(qrels=qrels_d, run=run_d, files=files, ranx=values))
    return out


def test_both_read_the_same_files_alike_and_evaluate_them_alike(cases):
    for case in cases:
        for (who, suffix), (qrels_path, run_path) in case["files"].items():
            qrels, run = qrels_from_file(qrels_path), run_from_file(run_path)
            assert qrels.to_dict() == dict(ranx_read(qrels_path, "qrels").to_dict()) == case["qrels"], (who, suffix)
            assert run.to_dict() == dict(ranx_read(run_path, "run").to_dict()) == case["run"], (who, suffix)
            ours = evaluate_trec(qrels, run, list(MEASURES.values()), complete=True).per_query()
            for ranx_name, name in MEASURES.items():
                for q, value in case["ranx"][ranx_name].items():
                    assert ours[q][name] == pytest.approx(value, abs=1e-12), (who, suffix, ranx_name, q)


def test_ranx_refuses_pandas_text_and_integer_ids_which_we_read(tmp_path):
    df = pd.DataFrame({"q_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "a"], "score": [1, 0, 2]})
    df.to_parquet(tmp_path / "q.parquet", index=False)
    if df["q_id"].dtype != object:  # pandas 3: text is the str dtype
        with pytest.raises(AssertionError, match="must be `object`"):
            ranx.Qrels.from_df(df)
        with pytest.raises(AssertionError, match="must be `object`"):
            ranx.Qrels.from_parquet(str(tmp_path / "q.parquet"))
    want = {"q1": {"a": 1, "b": 0}, "q2": {"a": 2}}
    assert dict(ranx.Qrels.from_df(df.astype(OBJECT_IDS)).to_dict()) == want
    assert qrels_from_frame(df).to_dict() == qrels_from_file(tmp_path / "q.parquet").to_dict() == want
    numeric = pd.DataFrame({"q_id": [7, 7], "doc_id": [1, 2], "score": [1, 0]})
    with pytest.raises(AssertionError, match="must be `object`"):
        ranx.Qrels.from_df(numeric)
    assert qrels_from_frame(numeric).to_dict() == {"7": {"1": 1, "2": 0}}


def test_a_duplicate_row_is_the_last_one_for_ranx_and_refused_here():
    df = pd.DataFrame({"q_id": ["q", "q"], "doc_id": ["a", "a"], "score": [2, 0]}).astype(OBJECT_IDS)
    assert dict(ranx.Qrels.from_df(df).to_dict()) == {"q": {"a": 0}}
    with pytest.raises(ValueError, match=r"document 'a' appears twice for query 'q' \(rows 0 and 1\)"):
        qrels_from_frame(df)
