"""Set-level keys through evaluate_embeddings equal the set metrics computed directly."""
import pytest
import torch

import retrieval_core as rc
from retrieval_core.set_metrics import clustering_scores, fnmr_at_fmr, pcf


def data(n=120, d=8, classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    x = torch.randn(classes, d, generator=g)[labels] + 0.8 * torch.randn(n, d, generator=g)
    return x.double(), labels


def all_pairs(q, ql, g, gl, exclude_diagonal):
    d = torch.cdist(q, g)  # euclidean
    pos = ql.unsqueeze(1) == gl.unsqueeze(0)
    keep = torch.ones_like(pos)
    if exclude_diagonal:
        keep.fill_diagonal_(False)
    return d[pos & keep], d[~pos & keep]


@pytest.mark.parametrize("budget", [None, 3000])
def test_fnmr_over_all_pairs_self_gallery(budget):
    x, labels = data()
    r = rc.evaluate_embeddings(x, labels, ["fnmr@0.1", "fnmr@0.01"], distance="euclidean", memory_budget=budget)
    pos, neg = all_pairs(x, labels, x, labels, exclude_diagonal=True)
    want = fnmr_at_fmr(pos, neg, [0.1, 0.01])
    assert r["fnmr@0.1"].item() == pytest.approx(want[0].item(), abs=1e-12)
    assert r["fnmr@0.01"].item() == pytest.approx(want[1].item(), abs=1e-12)


def test_fnmr_with_a_gallery_and_sequence_ids():
    x, labels = data()
    q, ql, g, gl = x[:40], labels[:40], x[40:], labels[40:]
    qid, gid = torch.arange(40) // 4, torch.arange(80) // 4  # ids 0..9 shared by both sides
    r = rc.evaluate_embeddings(q, ql, ["fnmr@0.05"], gallery=g, gallery_labels=gl, distance="euclidean",
                               query_ids=qid, gallery_ids=gid)
    d = torch.cdist(q, g)
    pos = ql.unsqueeze(1) == gl.unsqueeze(0)
    keep = qid.unsqueeze(1) != gid.unsqueeze(0)
    want = fnmr_at_fmr(d[pos & keep], d[~pos & keep], [0.05])[0]
    assert r["fnmr@0.05"].item() == pytest.approx(want.item(), abs=1e-12)


def test_nmi_ami_and_pcf():
    x, labels = data()
    r = rc.evaluate_embeddings(x, labels, ["nmi", "ami", "pcf@0.5", "cmc@1"])
    nmi, ami = clustering_scores(x, labels)
    assert r["nmi"].item() == nmi.item() and r["ami"].item() == ami.item()
    assert r["pcf@0.5"].item() == pcf(x, 0.5).item()
    assert list(r) == ["nmi", "ami", "pcf@0.5", "cmc@1"]
    both = rc.evaluate_embeddings(x[:50], labels[:50], ["pcf@0.9"], gallery=x[50:], gallery_labels=labels[50:])
    assert both["pcf@0.9"].item() == pcf(x, 0.9).item()  # query and gallery together


def test_set_level_keys_are_rejected_in_score_mode_and_need_class_labels():
    with pytest.raises(ValueError, match=r"nmi: embedding-set metrics need embeddings"):
        rc.evaluate_scores(torch.rand(2, 3), torch.ones(2, 3), ["nmi"])
    x, labels = data()
    multi = torch.nn.functional.one_hot(labels).bool()
    with pytest.raises(ValueError, match=r"nmi and ami need 1-D class labels"):
        rc.evaluate_embeddings(x, multi, ["nmi"])
    with pytest.raises(ValueError, match=r"fnmr takes a number after '@'"):
        rc.evaluate_embeddings(x, labels, ["fnmr@abc"])


def test_progress_bar_gives_the_same_values(capsys):
    x, labels = data()
    plain = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"])
    shown = rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], progress=True, memory_budget=20_000)
    assert {k: v.item() for k, v in plain.items()} == {k: v.item() for k, v in shown.items()}
    assert "retrieval-metrics" in capsys.readouterr().err
