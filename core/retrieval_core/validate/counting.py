"""The register of input checks, and a counter of their calls for tests.

Every check of :mod:`retrieval_core.validate` is declared with :func:`check` (a
decorator): the register :data:`CHECKS` lists them by name, and inside
:func:`count_checks` each call is counted under the check's name and, when its first
argument is a string, the input it names (``"check_embeddings(query)"``), so a test
can assert that a public call checks each input once. A check called by another check
is part of it and not counted. Outside the context manager a call costs one test more.

Example:
    >>> from retrieval_core.validate import check_ties
    >>> with count_checks() as counts:
    ...     check_ties("stable")
    >>> dict(counts)
    {'check_ties(stable)': 1}
"""
from __future__ import annotations

import functools
from collections import Counter
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, TypeVar

__all__ = ["CHECKS", "check", "count_checks"]

F = TypeVar("F", bound=Callable)

# every declared check, by name (tests read it: no check outside the register)
CHECKS: Dict[str, Callable] = {}
_counters: List[Counter] = []  # the open count_checks() contexts, innermost last
_depth: List[str] = []  # the checks running now, while counting (the outermost is counted)


def check(function: F) -> F:
    """Declare ``function`` an input check: registered in :data:`CHECKS`, counted in :func:`count_checks`."""
    name = function.__name__

    @functools.wraps(function)
    def counted(*args, **kwargs):
        if not _counters:
            return function(*args, **kwargs)
        if not _depth:  # a check made inside another check is part of it, not counted
            what = f"{name}({args[0]})" if args and isinstance(args[0], str) else name
            for counter in _counters:
                counter[what] += 1
        _depth.append(name)
        try:
            return function(*args, **kwargs)
        finally:
            _depth.pop()

    CHECKS[name] = counted
    return counted  # type: ignore[return-value]


@contextmanager
def count_checks() -> Iterator[Counter]:
    """A ``Counter`` of the checks called inside the block (``name`` or ``name(input)``)."""
    counter: Counter = Counter()
    _counters.append(counter)
    try:
        yield counter
    finally:
        _counters.remove(counter)

