"""The sync-free policy (``sizing.sync_free``): a constant number of host reads per
call, and the same values as the CPU policy.

On CUDA a host read of a device value (``bool(t.any())``, ``int(t.max())``,
``nonzero``...) waits for every queued kernel. The CUDA policy gathers such reads
into a few per call; here it is forced on CPU (``sizing.force_sync_free``) and
blocks are made small through sizing's CPU constants, so that a 16x larger input
runs 16x more blocks (and chunks): a read left inside a loop shows up as a count
that grows with the input.

(a) counts the host reads that Python sees (patched tensor methods), on CPU;
(b) counts CUDA's own synchronisation warnings where a GPU is present;
(c) checks the values of the forced sync-free policy against the CPU policy.
"""
from __future__ import annotations

import warnings
from typing import Callable, Dict

import pytest
import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

import retrieval_core as rc
from retrieval_core import sizing
from retrieval_core import rank_flat
from retrieval_core.evaluation.embeddings import embedding_values
from retrieval_core import score_values
from retrieval_core import parse_metrics
from tests.devices import on_device

TOPK_KEYS = ["ndcg@10", "map@10", "mrr@10", "precision@10", "recall@10"]
AT_R_KEYS = ["map@r", "r_precision", "ndcg@r", "precision@3"]
WHOLE_KEYS = ["map", "ndcg", "mrr", "auroc", "fall_out@5", "wap@4", "map_hits@3", "hit_rate@2", "f1@3"]
EMB_KEYS = ["cmc@1", "map@r", "ndcg@5", "precision@3"]
ALL_KEYS = TOPK_KEYS + AT_R_KEYS + WHOLE_KEYS + ["ndcg_exp@3", "dcg_exp@4", "acg@4", "dcg@2", "precision_capped@4",
                                                "precision_adaptive@30"]


# ----------------------------------------------------------------------------- data

def tied_dense(q: int, n: int, seed: int, levels: int = 6):
    """Scores with few distinct values (ties everywhere, across every cutoff), graded
    gains with about a third relevant, and a mask that keeps at least 3 per row."""
    g = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, levels, (q, n), generator=g).to(torch.float32) / levels
    target = torch.randint(1, 4, (q, n), generator=g) * (torch.rand(q, n, generator=g) < 0.35)
    mask = torch.rand(q, n, generator=g) < 0.8
    mask[:, :3] = True
    return preds, target.to(torch.float32), mask


def flat_of(preds: Tensor, target: Tensor, mask: Tensor, seed: int, shuffle: bool):
    """The flat form of masked dense rows (ids 3 * row - 50), optionally shuffled while
    each query keeps its entries' order of appearance."""
    q, n = preds.shape
    rows = torch.arange(q).unsqueeze(1).expand(q, n)[mask]
    ids, p, t = 3 * rows - 50, preds[mask], target[mask]
    if shuffle:
        g = torch.Generator().manual_seed(seed)
        order = torch.sort(torch.rand(q, generator=g)[rows], stable=True).indices
        ids, p, t = ids[order], p[order], t[order]
    return ids, p, t


def clusters(q: int, seed: int):
    """Embeddings around 6 class centres, with exact duplicates (tied similarities)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 6, (q,), generator=g)
    centres = torch.randn(6, 8, generator=g)
    x = centres[labels] + 0.3 * torch.randn(q, 8, generator=g)
    x[1::3] = x[0:-1:3][: x[1::3].shape[0]]  # every third row duplicates the one before
    labels[1::3] = labels[0:-1:3][: labels[1::3].shape[0]]
    return x, labels


# ------------------------------------------------------------------ counting host reads

READ_METHODS = ("item", "tolist", "numpy", "nonzero", "unique", "unique_consecutive", "masked_select",
                "bincount", "__bool__", "__int__", "__float__", "__index__", "__complex__")
READ_FUNCTIONS = ("nonzero", "argwhere", "unique", "unique_consecutive", "masked_select", "bincount")


def _is_mask_index(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, Tensor) and i.dtype == torch.bool for i in items)


def _repeats_by_tensor(input, repeats=None, *args, **kwargs) -> bool:
    """repeat_interleave reads its repeats when they are a tensor and no output_size is given."""
    if repeats is None:  # repeat_interleave(repeats): the repeats are the input
        return True
    return isinstance(repeats, Tensor) and kwargs.get("output_size") is None


class HostReads:
    """Counts, while ``on``, the calls that read device values on the host: the
    conversions (``bool``, ``int``, ``float``, ``item``, ``tolist``...), the ops whose
    output size depends on values (``nonzero``, ``unique``, ``masked_select``,
    ``bincount``, ``repeat_interleave`` by a tensor), boolean-mask indexing
    (``t[mask]``, ``t[mask] = v``), and tensors made from host data with a ``device=``
    (on CUDA a copy that synchronises). Nested calls (``torch.unique`` calling another
    counted method) count once: only the outermost call is a host read of ours.

    A copy to the host (``t.cpu()``) is a read; what it returns is host data, whose
    later conversions (``int(host[i])``) read nothing on any device: on CPU, where
    ``cpu()`` returns the tensor itself, the harness hands back a copy and keeps it
    (alive, so that its storage address stays its own) to recognise those reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.on = False
        self.depth = 0
        self.calls: Dict[str, int] = {}
        self.host: Dict[int, Tensor] = {}  # storage address -> a host copy made by cpu()
        for name in READ_METHODS:
            monkeypatch.setattr(torch.Tensor, name, self._wrap(getattr(torch.Tensor, name), f"Tensor.{name}",
                                                               lambda s, *a, **k: not self._on_host(s)))
        monkeypatch.setattr(torch.Tensor, "cpu", self._wrap(self._host_copy(torch.Tensor.cpu), "Tensor.cpu"))
        for name in READ_FUNCTIONS:
            monkeypatch.setattr(torch, name, self._wrap(getattr(torch, name), f"torch.{name}"))
        # indexing is seen by a TorchFunctionMode while counting (see _Indexing): patching
        # Tensor.__getitem__ would leave Tensor a sequence to CPython once undone
        monkeypatch.setattr(torch, "repeat_interleave", self._wrap(torch.repeat_interleave, "repeat_interleave",
                                                                   _repeats_by_tensor))
        # host data copied to a device (a synchronising copy on CUDA): tensors made with device=
        for name in ("tensor", "as_tensor"):
            monkeypatch.setattr(torch, name, self._wrap(getattr(torch, name), f"torch.{name}(device=)",
                                                        lambda *a, **k: k.get("device") is not None))

    def _host_copy(self, cpu: Callable) -> Callable:
        def copy(t: Tensor, *args, **kwargs) -> Tensor:
            out = cpu(t, *args, **kwargs)
            if out is t:  # on CPU: a copy of its own, as on CUDA
                out = t.clone()
            self.host[out.untyped_storage().data_ptr()] = out
            return out

        return copy

    def _on_host(self, t: Tensor) -> bool:
        return t.untyped_storage().data_ptr() in self.host

    def _wrap(self, fn: Callable, name: str, reads: Callable[..., bool] = None):
        def counted(*args, **kwargs):
            if self.on and self.depth == 0 and (reads is None or reads(*args, **kwargs)):
                self.calls[name] = self.calls.get(name, 0) + 1
            self.depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1

        return counted

    def note(self, name: str) -> None:
        if self.on and self.depth == 0:
            self.calls[name] = self.calls.get(name, 0) + 1

    def count(self, fn: Callable[[], object]) -> Dict[str, int]:
        self.calls, self.on = {}, True
        try:
            with _Indexing(self):
                fn()
        finally:
            self.on = False
        return dict(self.calls)


class _Indexing(TorchFunctionMode):
    """Boolean-mask indexing (``t[mask]``, ``t[mask] = v``) noted to a :class:`HostReads`.

    A mode, not a patch of ``Tensor.__getitem__``: setting that attribute gives the class a
    sequence slot that deleting it does not take back, after which ``torch.tensor`` of a
    list of 0-d tensors takes them for sequences (``len() of a 0-d tensor``)."""

    def __init__(self, reads: HostReads):
        super().__init__()
        self.reads = reads

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (Tensor.__getitem__, Tensor.__setitem__) and _is_mask_index(args[1]):
            self.reads.note("mask indexing" if func is Tensor.__getitem__ else "mask assignment")
        return func(*args, **(kwargs or {}))


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 256 entries (deep: 32) and embedding chunks of a few queries: the 1x
    inputs below already run several blocks. (The flat sort is split into id ranges
    only past memory bounds, never for these inputs: see the test of parts below.)"""
    monkeypatch.setattr(sizing, "CPU_BLOCK_ELEMENTS", 256)
    monkeypatch.setattr(sizing, "CPU_MEMORY_BUDGET", 128 * 40 * 4)  # 4 deep rows of a 40-item gallery


def dense_case(keys, use_mask: bool):
    def make(scale: int, device="cpu"):
        preds, target, mask = (x.to(device) for x in tied_dense(8 * scale, 40, seed=scale))
        return lambda: score_values(preds, target, keys, mask=mask if use_mask else None)
    return make


def flat_case(keys, shuffle: bool):
    def make(scale: int, device="cpu"):
        ids, p, t = (x.to(device) for x in flat_of(*tied_dense(8 * scale, 40, seed=scale), scale, shuffle))
        return lambda: score_values(p, t, keys, indexes=ids)
    return make


def rank_flat_case(shuffle: bool):
    def make(scale: int, device="cpu"):
        ids, p, t = (x.to(device) for x in flat_of(*tied_dense(8 * scale, 40, seed=scale), scale, shuffle))
        return lambda: rank_flat(ids, p, t, 5, need_ideal=True)
    return make


def embedding_case(keys, self_gallery: bool, multi_hot: bool = False):
    def make(scale: int, device="cpu"):
        x, labels = clusters(16 * scale, seed=scale)
        if multi_hot:
            labels = torch.nn.functional.one_hot(labels, 6) | torch.nn.functional.one_hot((labels + 1) % 6, 6)
        x, labels = x.to(device), labels.to(device)
        keys_ = parse_metrics(keys)
        if self_gallery:
            ids = torch.arange(x.shape[0], device=device) // 2  # pairs of rows share an id: both excluded
            return lambda: embedding_values(x, labels, keys_, gallery=x, gallery_labels=labels, query_ids=ids,
                                            gallery_ids=ids)
        gallery, gallery_labels = x[:40], labels[:40]  # the same gallery at every scale
        return lambda: embedding_values(x, labels, keys_, gallery=gallery, gallery_labels=gallery_labels)
    return make


def pairwise(q: Tensor, g: Tensor) -> Tensor:
    """A distance callable (L1), rounded so that exact ties occur."""
    return torch.cdist(q, g, p=1).mul(4).round()


def graded(a: Tensor, b: Tensor) -> Tensor:
    """A relevance callable: 2 for the same label, 1 for the next label, else 0."""
    return 2.0 * (a.unsqueeze(1) == b.unsqueeze(0)) + 1.0 * ((a.unsqueeze(1) + 1) % 6 == b.unsqueeze(0))


def embedding_options_case(keys, self_gallery: bool, **options):
    """Embeddings with a distance or relevance other than the defaults."""
    def make(scale: int, device="cpu"):
        x, labels = clusters(16 * scale, seed=scale)
        x, labels = x.to(device), labels.to(device)
        keys_ = parse_metrics(keys)
        if self_gallery:
            ids = torch.arange(x.shape[0], device=device) // 2
            return lambda: embedding_values(x, labels, keys_, gallery=x, gallery_labels=labels, query_ids=ids,
                                            gallery_ids=ids, **options)
        return lambda: embedding_values(x, labels, keys_, gallery=x[:40], gallery_labels=labels[:40], **options)
    return make


# Every case, and the most host reads per call its design allows. Embeddings with
# class labels also count R and candidates once per call (search.label_counts: per
# count a unique per key column, one more unique and a bincount: 3 reads without
# ids; with ids, counts by (label), (id, label) and (id): 3 + 4 + 3).
CASES = {
    "dense top-k": (dense_case(TOPK_KEYS, False), 1),  # the rows to re-rank after the loop
    "dense top-k masked": (dense_case(TOPK_KEYS, True), 1),
    "dense @r": (dense_case(AT_R_KEYS, True), 2),  # + the largest R
    "dense whole list": (dense_case(WHOLE_KEYS, True), 0),  # whole rows are sorted: no tie to fix
    "dense every kernel": (dense_case(ALL_KEYS, True), 1),  # largest R; whole rows: no tie to fix
    "flat grouped": (flat_case(TOPK_KEYS, False), 3),  # id range, number of queries, bucket sizes
    "flat shuffled": (flat_case(TOPK_KEYS, True), 3),
    "flat shuffled @r": (flat_case(AT_R_KEYS, True), 3),  # the largest R read with the bucket sizes
    "flat whole list": (flat_case(WHOLE_KEYS, True), 3),
    "rank_flat": (rank_flat_case(True), 3),
    "embeddings": (embedding_case(EMB_KEYS, False), 2 + 3),  # largest R, rows to re-rank; label counts
    "embeddings self-gallery": (embedding_case(EMB_KEYS, True), 2 + 10),
    "embeddings multi-hot": (embedding_case(EMB_KEYS, False, multi_hot=True), 2),  # largest R, rows to re-rank
    # euclidean: + the gallery's largest norm (EuclideanOrder, once per call)
    "embeddings euclidean": (embedding_options_case(EMB_KEYS, False, distance="euclidean"), 3 + 3),
    "embeddings euclidean self-gallery": (embedding_options_case(EMB_KEYS, True, distance="euclidean"), 3 + 10),
    "embeddings euclidean whole list": (embedding_options_case(["map", "mrr", "ndcg"], False, distance="euclidean"),
                                        2 + 3),  # no largest R
    # callables: + their outputs' tests, once after the loop
    "embeddings callable distance": (embedding_options_case(EMB_KEYS, False, distance=pairwise), 3 + 3),
    "embeddings custom relevance": (embedding_options_case(EMB_KEYS, False, relevance=graded), 3),
    "embeddings custom relevance self-gallery": (embedding_options_case(EMB_KEYS, True, relevance=graded), 3),
    "embeddings euclidean custom relevance": (
        embedding_options_case(EMB_KEYS, False, distance="euclidean", relevance=graded), 4),
}


@pytest.mark.parametrize("case", list(CASES))
def test_host_reads_do_not_grow_with_the_input(case, monkeypatch, small_blocks):
    make, most = CASES[case]
    reads = HostReads(monkeypatch)
    with sizing.force_sync_free(True):
        small, large = reads.count(make(1)), reads.count(make(16))
    assert small == large, f"{case}: {small} host reads for 1x, {large} for 16x"
    assert sum(small.values()) <= most, f"{case}: {small}"


@pytest.mark.parametrize("parts", [2, 5])
def test_flat_sort_split_by_memory_reads_per_part_only(parts, monkeypatch, small_blocks):
    """Past its memory bounds the flat sort takes id ranges one at a time (here forced
    by a small bucket): the id range is read once, then each range's entries, its
    number of queries and its bucket sizes; values stay those of the CPU policy."""
    from retrieval_core.ranking import flat, groups

    preds, target, mask = tied_dense(8 * parts, 40, seed=parts)
    ids, p, t = flat_of(preds, target, mask, parts, shuffle=True)  # ids -50, -47, ...: ranges of 8 queries
    monkeypatch.setattr(groups, "BUCKET_ENTRIES", -(-ids.numel() // parts))
    reads = HostReads(monkeypatch)
    for keys in (TOPK_KEYS, AT_R_KEYS):
        with sizing.force_sync_free(True):
            counted = reads.count(lambda: score_values(p, t, keys, indexes=ids))
            assert flat._n_sorted_parts(ids.numel(), 1, ids, 10**6) == parts
        assert sum(counted.values()) == 1 + 3 * parts, counted
        cpu, free = both_policies(lambda: score_values(p, t, keys, indexes=ids))
        assert torch.equal(free.query_ids, cpu.query_ids)
        assert_values_equal(free.values, cpu.values, f"{parts} parts")


def test_the_counter_sees_reads_inside_loops(monkeypatch, small_blocks):
    """The CPU policy tests ties block by block (free on CPU): the counter must see
    its reads grow, or the test above would prove nothing."""
    reads = HostReads(monkeypatch)
    make, _ = CASES["dense top-k"]
    with sizing.force_sync_free(False):
        small, large = reads.count(make(1)), reads.count(make(16))
    assert sum(large.values()) > sum(small.values()) > 0, (small, large)
    make, _ = CASES["flat shuffled"]
    with sizing.force_sync_free(False):
        small, large = reads.count(make(1)), reads.count(make(16))
    assert sum(large.values()) > sum(small.values()), (small, large)


def test_counter_counts_each_kind_of_read(monkeypatch):
    reads = HostReads(monkeypatch)
    t = torch.tensor([0.0, 1.0, 2.0])

    def every_read():
        bool(t.any()), int(t.max()), float(t.sum()), t.max().item(), t.tolist()
        t.nonzero(), torch.nonzero(t), torch.unique(t), t[t > 0], torch.repeat_interleave(t.long())
        u = t.clone()
        u[u > 1] = 0.0
        range(10)[t.long()[1]]
        torch.tensor(2.0, device=t.device), torch.tensor(2.0)
        host = t.cpu()  # a copy to the host reads; reading the copy afterwards does not
        int(host[1]), host[1:].tolist()

    counts = reads.count(every_read)
    assert counts == {"Tensor.__bool__": 1, "Tensor.__int__": 1, "Tensor.__float__": 1, "Tensor.item": 1,
                      "Tensor.tolist": 1, "Tensor.nonzero": 1, "torch.nonzero": 1, "torch.unique": 1,
                      "mask indexing": 1, "repeat_interleave": 1, "mask assignment": 1, "Tensor.__index__": 1,
                      "torch.tensor(device=)": 1, "Tensor.cpu": 1}
    assert reads.count(lambda: (t + 1).sort()) == {}  # no read: nothing counted


# ---------------------------------------------------------------- CUDA's own count

def cuda_synchronisations(fn: Callable[[], object]) -> int:
    """How many synchronisations CUDA's own debug mode warns of while ``fn`` runs (small
    blocks: ``sizing.pretend_free_memory(0)``)."""
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught, sizing.pretend_free_memory(0):
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum("synchroniz" in str(w.message) for w in caught)


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device: torch.cuda.set_sync_debug_mode needs one to count synchronisations")
@pytest.mark.parametrize("case", list(CASES))
def test_cuda_synchronisations_do_not_grow_with_the_input(case, monkeypatch):
    make, _ = CASES[case]
    # small CUDA blocks: a budget floor below the CPU sizes, and those made small
    monkeypatch.setattr(sizing, "CPU_BLOCK_ELEMENTS", 256)
    monkeypatch.setattr(sizing, "MIN_DEVICE_BUDGET", 128 * 40 * 4)

    def synchronisations(scale: int) -> int:
        return cuda_synchronisations(make(scale, "cuda"))

    make(1, "cuda")()  # warm-up: lazy CUDA initialisation (handles, kernels) is not ours to count
    small, large = synchronisations(1), synchronisations(16)
    assert small == large, f"{case}: {small} synchronisations for 1x, {large} for 16x"


# ------------------------------------------------------- same values as the CPU policy

def assert_values_equal(a: Tensor, b: Tensor, what: str) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype, what
    assert torch.equal(torch.isnan(a), torch.isnan(b)), f"{what}: NaN at other places"
    assert torch.equal(a.nan_to_num(), b.nan_to_num()), f"{what}: largest difference {(a - b).abs().nan_to_num().max()}"


def both_policies(fn: Callable[[], object]):
    with sizing.force_sync_free(False):
        cpu = fn()
    with sizing.force_sync_free(True):
        free = fn()
    return cpu, free




@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("levels", [2, 5, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.uint8])
def test_dense_values_equal_the_cpu_policy(seed, levels, dtype, small_blocks):
    preds, target, mask = tied_dense(24, 30, seed, levels)
    preds = (preds * levels).to(dtype) if not dtype.is_floating_point else preds.to(dtype)
    for m in (None, mask):
        for keys in (ALL_KEYS, TOPK_KEYS, AT_R_KEYS):
            cpu, free = both_policies(lambda: score_values(preds, target, keys, mask=m).values)
            assert_values_equal(free, cpu, f"{dtype} levels={levels} mask={m is not None} {keys[0]}")


def test_ties_crossing_the_cut_are_re_ranked_by_column():
    # every row: 12 equal scores, the relevant one at column 11; @10 must not see it
    preds = torch.zeros(5, 12)
    target = torch.zeros(5, 12)
    target[:, 11] = 1
    target[2, 3] = 1
    with sizing.force_sync_free(True):
        v = score_values(preds, target, ["hit_rate@10", "mrr@10"]).values
    assert v[:, 0].tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert v[:, 1].tolist() == [0.0, 0.0, 0.25, 0.0, 0.0]


def test_int64_scores_equal_to_the_padding_value_rank_before_padding():
    low = torch.iinfo(torch.int64).min
    preds = torch.tensor([[low, 5, low, low, 7], [1, low, low, 2, 3]])
    mask = torch.tensor([[True, True, False, True, True], [True, False, True, True, True]])
    target = torch.tensor([[0, 0, 1, 1, 0], [0, 1, 1, 0, 0]])
    for keys in (["mrr@4", "precision@3"], ["map@r", "recall@r"], ["map", "auroc"]):
        cpu, free = both_policies(lambda: score_values(preds, target, keys, mask=mask).values)
        assert_values_equal(free, cpu, str(keys))
    # row 0: 7, 5, then the real lows by column: 0, then 3 (relevant, rank 4; rank 3 if
    # misordered); row 1: 3, 2, 1, then the real low at column 2 (relevant) before the
    # padding at column 1 (rank 4; rank 5 if the padding came first)
    with sizing.force_sync_free(True):
        v = score_values(preds, target, ["mrr@4"], mask=mask).values
    assert v[:, 0].tolist() == [0.25, 0.25]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int16,
                                   torch.uint32])
def test_flat_values_equal_the_cpu_policy(seed, shuffle, dtype, small_blocks):
    preds, target, mask = tied_dense(30, 25, seed, levels=4)
    ids, p, t = flat_of(preds, target, mask, seed, shuffle)
    p = (p * 4).to(dtype) if not dtype.is_floating_point else p.to(dtype)
    for keys in (ALL_KEYS, TOPK_KEYS, AT_R_KEYS):
        cpu, free = both_policies(lambda: score_values(p, t, keys, indexes=ids))
        assert torch.equal(free.query_ids, cpu.query_ids)
        assert_values_equal(free.values, cpu.values, f"{dtype} shuffle={shuffle} {keys[0]}")


@pytest.mark.parametrize("ids", ["wide", "int32", "one query", "singletons"])
def test_flat_special_ids_and_scores(ids):
    g = torch.Generator().manual_seed(3)
    n = 300
    p = torch.randint(-3, 3, (n,), generator=g).to(torch.float32)
    p[::7] = -0.0  # equal to +0.0: ranked by position
    t = (torch.rand(n, generator=g) < 0.3).to(torch.int64)
    if ids == "wide":  # an id range past 2**31: the two-sort path
        idx = torch.randint(0, 5, (n,), generator=g) * (2**40) - 2**50
    elif ids == "int32":
        idx = torch.randint(-9, 9, (n,), generator=g).to(torch.int32)
    elif ids == "one query":
        idx = torch.full((n,), 4)
    else:
        idx = torch.randperm(n, generator=g)
    cpu, free = both_policies(lambda: score_values(p, t, ALL_KEYS, indexes=idx))
    assert torch.equal(free.query_ids, cpu.query_ids) and free.query_ids.dtype == idx.dtype
    assert_values_equal(free.values, cpu.values, ids)


@pytest.mark.parametrize("shuffle", [False, True])
def test_rank_flat_equals_the_cpu_policy(shuffle, small_blocks):
    preds, target, mask = tied_dense(30, 25, 1, levels=3)
    ids, p, t = flat_of(preds, target, mask, 1, shuffle)
    (cpu_ids, cpu), (free_ids, free) = both_policies(lambda: rank_flat(ids, p, t, 6, need_ideal=True))
    assert torch.equal(free_ids, cpu_ids)
    for field in ("relevance", "valid", "n_relevant", "n_candidates", "ideal", "scores"):
        assert torch.equal(getattr(free, field), getattr(cpu, field)), field
    assert free.complete == cpu.complete and free.inexact is None


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean", "hamming"])
@pytest.mark.parametrize("self_gallery", [False, True])
def test_embedding_values_equal_the_cpu_policy(distance, self_gallery, small_blocks):
    x, labels = clusters(60, seed=2)
    if distance == "hamming":
        x = (x > 0).to(torch.int64)
    keys = EMB_KEYS + ["map", "mrr", "ndcg@r"]
    kw = dict(distance=distance)
    if self_gallery:
        cpu, free = both_policies(lambda: rc.evaluate_embeddings(x, labels, keys, reduce="none", **kw))
    else:
        cpu, free = both_policies(lambda: rc.evaluate_embeddings(x[:25], labels[:25], keys, gallery=x[25:],
                                                                 gallery_labels=labels[25:], reduce="none", **kw))
    for k in keys:
        assert_values_equal(free[k], cpu[k], f"{distance} {k}")


def test_embedding_multi_hot_and_ids_equal_the_cpu_policy(small_blocks):
    x, labels = clusters(50, seed=4)
    multi = torch.nn.functional.one_hot(labels, 6) | torch.nn.functional.one_hot((labels * 5) % 6, 6)
    ids = torch.arange(50) // 3
    keys = EMB_KEYS + ["map", "ndcg"]
    cpu, free = both_policies(lambda: rc.evaluate_embeddings(x, multi, keys, query_ids=ids, reduce="none"))
    for k in keys:
        assert_values_equal(free[k], cpu[k], k)


def test_embedding_ties_crossing_the_cut_are_re_ranked(small_blocks):
    # gallery: 6 copies of one point; the relevant copy is the last: cmc@5 is 0
    gallery = torch.ones(6, 3)
    gallery_labels = torch.tensor([0, 0, 0, 0, 0, 1])
    query, query_labels = torch.ones(4, 3), torch.tensor([1, 1, 1, 0])
    with sizing.force_sync_free(True):
        r = rc.evaluate_embeddings(query, query_labels, ["cmc@5", "cmc@6"], gallery=gallery,
                                   gallery_labels=gallery_labels, reduce="none")
    assert r["cmc@5"].tolist() == [0.0, 0.0, 0.0, 1.0]
    assert r["cmc@6"].tolist() == [1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("case", ["dense", "dense @r", "flat shuffled", "embeddings"])
def test_device_values_equal_cpu(case, device, small_blocks):
    """On CUDA (its default policy: sync-free) the values equal CPU's (default policy);
    on CPU a plain run."""
    preds, target, mask = tied_dense(40, 30, 5, levels=4)
    if case == "dense":
        on_device(device, lambda p, t, m: score_values(p, t, ALL_KEYS, mask=m), preds, target, mask)
    elif case == "dense @r":
        on_device(device, lambda p, t: score_values(p, t, AT_R_KEYS), preds, target)
    elif case == "flat shuffled":
        ids, p, t = flat_of(preds, target, mask, 5, shuffle=True)
        on_device(device, lambda i, p, t: score_values(p, t, ALL_KEYS, indexes=i), ids, p, t)
    else:
        x, labels = clusters(60, seed=5)
        on_device(device, lambda x, y: rc.evaluate_embeddings(x, y, EMB_KEYS + ["map"], reduce="none"), x, labels)


# ------------------------------------------------------------------- the predicate

def test_policy_predicate_and_forcing():
    assert sizing.sync_free("cpu") is False and sizing.sync_free(torch.device("cuda", 0)) is True
    with sizing.force_sync_free(True):
        assert sizing.sync_free("cpu") is True
        with sizing.force_sync_free(False):
            assert sizing.sync_free("cuda") is False
        assert sizing.sync_free("cpu") is True
    assert sizing.sync_free("cpu") is False
    with pytest.raises(ValueError, match=r"enabled must be a bool; got 1"):
        with sizing.force_sync_free(1):
            pass


def test_memory_budget_none_is_the_device_share(monkeypatch):
    """memory_budget=None sizes embedding chunks from sizing (the CPU value here);
    an explicit budget still bounds them."""
    seen = []
    real = sizing.chunk_rows

    def spy(n_gallery, deep, budget, **kw):
        seen.append(budget)
        return real(n_gallery, deep, budget, **kw)

    monkeypatch.setattr(sizing, "chunk_rows", spy)
    x, labels = clusters(20, seed=0)
    rc.evaluate_embeddings(x, labels, ["cmc@1"])
    rc.evaluate_embeddings(x, labels, ["cmc@1"], memory_budget=12345)
    monkeypatch.setattr(sizing, "CPU_MEMORY_BUDGET", 4321)
    rc.evaluate_embeddings(x, labels, ["cmc@1"])
    assert seen == [256 * 2**20, 12345, 4321]


def test_label_chunks_follow_the_ranked_depth(monkeypatch):
    """The 1-D-label path sizes its chunks by the pairs and the depth it ranks to (the
    largest R for @r keys, the neighbours kept); gain matrices and whole lists by pairs."""
    seen = []
    real = sizing.chunk_rows

    def spy(n_gallery, deep, budget, **kw):
        seen.append((deep, kw.get("ranked")))
        return real(n_gallery, deep, budget, **kw)

    monkeypatch.setattr(sizing, "chunk_rows", spy)
    x, labels = clusters(20, seed=0)
    largest_r = int(torch.bincount(labels).max()) - 1  # the query itself is excluded
    rc.evaluate_embeddings(x, labels, ["cmc@3"])
    rc.evaluate_embeddings(x, labels, ["map@r"])
    rc.evaluate_embeddings(x, labels, ["cmc@1"], return_neighbours=5)
    rc.evaluate_embeddings(x, labels, ["auroc"])
    rc.evaluate_embeddings(x, labels, ["map@r"], ties="expected")
    assert seen == [(False, 3), (False, largest_r), (False, 5), (True, None), (True, None)]


@pytest.mark.parametrize("options", ["callable distance", "custom relevance", "euclidean custom relevance",
                                     "euclidean whole list", "euclidean duplicates"])
@pytest.mark.parametrize("self_gallery", [False, True])
def test_embedding_options_equal_the_cpu_policy(options, self_gallery, small_blocks):
    x, labels = clusters(60, seed=7)
    keys = EMB_KEYS + ["map", "ndcg@r", "mrr@3"]
    kw = {"callable distance": dict(distance=pairwise), "custom relevance": dict(relevance=graded),
          "euclidean custom relevance": dict(distance="euclidean", relevance=graded),
          "euclidean whole list": dict(distance="euclidean"),
          "euclidean duplicates": dict(distance="euclidean")}[options]
    if options == "euclidean whole list":
        keys = ["map", "mrr", "ndcg", "auroc"]
    if options == "euclidean duplicates":  # far from the origin: float32 scores 2q.g - |g|^2 tie and misorder
        x = 1e3 + x.round(decimals=1)
    if self_gallery:
        run = lambda: rc.evaluate_embeddings(x, labels, keys, reduce="none", **kw)  # noqa: E731
    else:
        run = lambda: rc.evaluate_embeddings(x[:25], labels[:25], keys, gallery=x[25:],  # noqa: E731
                                             gallery_labels=labels[25:], reduce="none", **kw)
    cpu, free = both_policies(run)
    for k in keys:
        assert_values_equal(free[k], cpu[k], f"{options} {k}")


@pytest.mark.parametrize("bad", ["distance", "negative gain", "integer gain", "nan gain"])
def test_callable_errors_are_the_same_after_the_loop(bad, small_blocks):
    """Sync-free, the callables' outputs are tested once after the loop: the same error
    (the first failing chunk's) as the per-chunk test of the CPU policy."""
    x, labels = clusters(40, seed=3)

    def distance(q, g):
        d = torch.cdist(q, g)
        return d.masked_fill(d > 2.5, float("nan")) if bad == "distance" else d

    def relevance(a, b):
        r = (a.unsqueeze(1) == b.unsqueeze(0)).to(torch.int64 if bad == "integer gain" else torch.float32)
        if bad == "nan gain":
            return r.masked_fill(r == 0, float("nan"))
        return r - (b.unsqueeze(0) == 5).to(r.dtype) * (1 + a.unsqueeze(1) % 3)  # -1..-3: minima differ by chunk

    kw = dict(distance=distance) if bad == "distance" else dict(relevance=relevance)
    messages = []
    for policy in (False, True):
        with sizing.force_sync_free(policy), pytest.raises(ValueError) as info:
            rc.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], **kw)
        messages.append(str(info.value))
    assert messages[0] == messages[1], messages
    expected = {"distance": "a distance callable returned NaN or inf; distances must be finite",
                "negative gain": "relevance gains must be finite and >= 0; got a minimum of -",
                "integer gain": "relevance gains must be finite and >= 0; got a minimum of -",
                "nan gain": "relevance gains must be finite and >= 0; got a minimum of nan"}[bad]
    assert messages[0].startswith(expected), messages[0]
    if bad == "integer gain":
        assert messages[0].split()[-1].lstrip("-").isdigit()  # printed as an int, as the gains' own minimum
