"""The metric specifications (metrics/spec.py) hold every fact, and the rest of the core reads them:
every registered name has a complete spec, every form parses to the depth its spec implies,
and the facts that used to be scattered (lists of names, a second depth computation) are gone."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import retrieval_core as rc
from retrieval_core.metrics import kernels as K
from retrieval_core.metrics.keys import depth_needed, parse_metrics
from retrieval_core.metrics.spec import ALIASES, AT_K, AT_R, AT_X, REGISTRY, WHOLE, MetricSpec, Names
from retrieval_core.trec.measures import IR_MEASURES, IR_MEASURES_OTHER, TREC_EVAL_MEASURES

ROOT = Path(rc.__file__).parent
FORMS = {AT_K, AT_R, AT_X, WHOLE}
EMPTY_RULES = (K.no_relevant, K.no_relevant_or_candidate, K.no_irrelevant, K.no_relevant_or_irrelevant,
               K.no_candidate)
ITEM_SET_LEVEL = {"coverage", "gini", "entropy", "personalization"}  # evaluate_topk's set-level keys


def keys_of(spec: MetricSpec):
    """(form, key) for every form of the spec."""
    out = []
    if spec.plain:
        out.append((spec.plain, spec.name))
    if AT_K in spec.cutoffs:
        out += [(AT_K, f"{spec.name}@1"), (AT_K, f"{spec.name}@7")]
    if AT_R in spec.cutoffs and spec.plain != AT_R:
        out.append((AT_R, f"{spec.name}@r"))
    if AT_X in spec.cutoffs:
        out.append((AT_X, f"{spec.name}@{spec.param_example}"))
    return out


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_name_has_a_complete_spec(name):
    spec = REGISTRY[name]
    assert spec.name == name and spec.cutoffs and spec.cutoffs <= FORMS
    assert spec.plain is None or spec.plain in spec.cutoffs
    # per-query (a kernel on a Ranking), set-level, or per-user of the recommended items: one of them
    assert [spec.kernel is not None, spec.set_metric is not None, spec.item_kernel is not None].count(True) == 1
    assert spec.items == (spec.item_kernel is not None or spec.name in ITEM_SET_LEVEL)
    assert spec.empty in EMPTY_RULES
    assert isinstance(spec.names, Names) and len(spec.names.trec_eval) == 2
    assert all(n is None or n in TREC_EVAL_MEASURES for n in spec.names.trec_eval)
    if spec.names.ir_measures:
        assert re.match(r"[A-Za-z]+", spec.names.ir_measures)[0] in set(IR_MEASURES) | set(IR_MEASURES_OTHER)
    if AT_X in spec.cutoffs:
        assert spec.param_name and spec.param_example is not None
        if spec.param_range is not None:
            assert spec.param_range[0] < spec.param_example < spec.param_range[1]
    if not spec.per_query:
        return
    assert len(inspect.signature(spec.kernel).parameters) == (3 if AT_X in spec.cutoffs else 2)
    for form, _ in keys_of(spec):  # a ties="expected" kernel, or the reason there is none
        assert spec.has_expected(form) or spec.no_expected.startswith("has no closed form under ties='expected'")
    if spec.expected is not None:
        assert len(inspect.signature(spec.expected).parameters) == len(inspect.signature(spec.kernel).parameters)


@pytest.mark.parametrize("name", sorted(n for n, s in REGISTRY.items() if s.per_query))
def test_every_form_ranks_to_the_depth_its_spec_says(name):
    for form, key in keys_of(REGISTRY[name]):
        (m,) = parse_metrics([key])
        assert m.form == form, key
        want = {AT_K: m.cutoff, AT_R: AT_R, WHOLE: WHOLE, AT_X: WHOLE}[form]  # a float parameter: the whole list
        assert m.depth == want, key
        assert depth_needed([m]) == (m.cutoff if form == AT_K else 0, form == AT_R, want == WHOLE), key


def test_aliases_point_at_specs_and_set_level_keys_have_no_depth():
    assert all(target in REGISTRY for target in ALIASES.values())
    assert depth_needed(parse_metrics(["nmi", "fnmr@0.1"])) == (0, False, False)
    assert parse_metrics(["fnmr@0.1"])[0].cutoff == 0.1  # set-level parameters stay the cutoff


def _core_sources():
    for path in sorted(ROOT.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path.read_text()


def test_the_scattered_facts_are_gone():
    """One depth function, no list of metric names outside the specs, no name compared by hand."""
    old = ("_UNBOUNDED", "_LOWER_IS_BETTER", "EXPECTED_KERNELS", "expected_kernel", "_NEED_ALL_CANDIDATES",
           "_OTHER_EMPTY")
    for rel, text in _core_sources():
        for name in old:
            assert name not in text, (rel, name)
        if rel != "metrics/keys.py":
            assert "def depth_needed" not in text, rel
            assert not re.search(r"\.cutoff is None|isinstance\([a-z]+\.cutoff, int\)", text), rel
        assert not re.search(r"spec\.name\s*(==|!=|in\b|not in\b)", text), rel  # facts, not names
        if rel not in ("metrics/spec.py", "metrics/tie_kernels.py", "evaluation/accumulator/flat.py"):
            assert '"auroc"' not in text, rel  # (tie_kernels: its __all__; accumulator/flat: a doctest's key)


def test_metrics_registry_module_is_gone():
    assert not (ROOT / "metrics" / "registry.py").exists()
    assert rc.REGISTRY is REGISTRY
