"""Every bad input gets a clear exception, never a wrong number."""
import pytest
import torch

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
     ValueError, r"preds and target must have the same shape; got \(2, 3\) and \(2, 4\)"),
    ("1-d without indexes", lambda: rc.evaluate_scores(F, FT, ["ndcg@2"]),
     ValueError, r"must be 2-D \[queries, candidates\], or 1-D with indexes=; got shape \(6,\)"),
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
     ValueError, r"unknown metric 'nDCG' in key 'nDCG@10'; known keys: .*ndcg@k"),
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
     ValueError, r"target gains must be >= 0; got a minimum of -2"),
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
    ("ties unknown", lambda: rc.evaluate_scores(P, T, ["ndcg@2"], ties="random"), ValueError, r"ties must be one of 'stable'; got 'random'"),
    ("ties later", lambda: rc.evaluate_scores(P, T, ["ndcg@2"], ties="expected"),
     NotImplementedError, r"ties='expected' is not implemented yet"),
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

