"""One harness for the multi-process (gloo, CPU) tests of every adapter.

A *suite* is a module with ``SCENARIOS: dict[name, fn(rank, world) -> result]``
and ``WORLDS`` (the world sizes it is written for); ``"module:NAME"`` names
another such dict of that module. :func:`run_group` starts
``world`` processes (``python -m tests.distributed.harness``, one per rank, a
free port for the rendezvous), and every rank runs every scenario of the given
suites in order, inside one process group; the parent gets, per rank, each
scenario's outcome:

* ``{"value": result}`` — what the function returned (any picklable object);
* ``{"error": type name, "message": str, "traceback": str}`` — what it raised.

:func:`value` and :func:`error` read an outcome and fail with the child's
traceback when it is not what the test expects. :func:`shared_results` runs every
registered suite once per world size and caches the outcome for the whole test
session, so the ignite and the torchmetrics tests share one start-up (process
start-up and imports dominate the run time).

Never hangs: collectives time out after ``COLLECTIVE_TIMEOUT_S`` and the whole
group after ``timeout_s``; then, or as soon as one rank dies, every rank still
running is killed and :class:`HarnessError` carries each rank's exit status and
the end of its stderr. The rendezvous port is picked free and retried when another
process took it first.

    python -m tests.distributed.harness RANK WORLD PORT OUT_DIR SUITE [SUITE ...]
"""
from __future__ import annotations

import datetime
import functools
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[2]
COLLECTIVE_TIMEOUT_S = 60
GROUP_TIMEOUT_S = 300
# every suite; shared_results(world) runs those whose WORLDS hold ``world``
SUITES = ("tests.distributed.harness_selftest", "tests.distributed.scenarios", "tests.distributed.sync_scenarios",
          "tests.adapters.lightning.ddp_cases", "tests.distributed.eval_scenarios",
          "tests.distributed.confidence_scenarios", "tests.distributed.agreement_scenarios",
          "tests.distributed.check_count_scenarios")
_PORT_TAKEN = ("address already in use", "EADDRINUSE", "Address in use")
# std::terminate in the C++ runtime (a thread of the gloo backend), not a scenario's failure
_RUNTIME_ABORT = "terminate called without an active exception"

Outcome = Dict[str, Any]
Results = List[Dict[str, Dict[str, Outcome]]]  # [rank][suite][scenario]


class HarnessError(AssertionError):
    """The group did not finish: a rank died, or the group ran past its time limit."""


# -- reading outcomes -------------------------------------------------------------

def capture(fn: Callable[[int, int], Any], rank: int, world: int) -> Outcome:
    """Run ``fn(rank, world)``; its value, or what it raised (with the traceback)."""
    try:
        return {"value": fn(rank, world)}
    except Exception as exc:  # recorded: the test decides whether it was expected
        return {"error": type(exc).__name__, "message": str(exc), "traceback": traceback.format_exc()}


def run_local(scenarios: Mapping[str, Callable[[int, int], Any]]) -> Dict[str, Outcome]:
    """Every scenario in this process, as rank 0 of 1 (no process group): the reference."""
    return {name: capture(fn, 0, 1) for name, fn in scenarios.items()}


def value(outcome: Outcome, where: str = "") -> Any:
    """The scenario's value; fails with the child's traceback when it raised."""
    if "error" in outcome:
        raise AssertionError(f"{where}: raised {outcome['error']}: {outcome['message']}\n{outcome['traceback']}")
    return outcome["value"]


def error(outcome: Outcome, where: str = "") -> Tuple[str, str]:
    """(exception type name, message) of a scenario expected to raise."""
    if "error" not in outcome:
        raise AssertionError(f"{where}: expected an error, got the value {outcome['value']!r:.500}")
    return outcome["error"], outcome["message"]


# -- the parent: start a group, collect its outcomes -------------------------------

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "<no stderr>"


def _start(world: int, suites: Sequence[str], out: Path, timeout_s: float) -> Tuple[bool, Results]:
    """One attempt; (port taken, results). Raises HarnessError on any other failure."""
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    procs, logs = [], []
    try:
        for rank in range(world):
            log = out / f"rank{rank}.stderr"
            logs.append(log)
            with open(log, "wb") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "tests.distributed.harness", str(rank), str(world), str(port), str(out),
                     *suites],
                    cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err))
        deadline, timed_out = time.monotonic() + timeout_s, False
        while True:
            codes = [p.poll() for p in procs]
            if all(c == 0 for c in codes) or any(c not in (None, 0) for c in codes):
                break  # done, or one rank died: the others would only wait for it
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.05)
    finally:
        for p in procs:  # only the processes started here
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()
    codes = [p.returncode for p in procs]
    if all(c == 0 for c in codes):
        import torch

        return False, [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(world)]
    stderr = [_tail(log) for log in logs]
    if any(any(t in s for t in _PORT_TAKEN) for s in stderr):
        return True, []
    if any(c == -signal.SIGABRT and _RUNTIME_ABORT in s for c, s in zip(codes, stderr)):
        return True, []  # the gloo runtime aborted a rank (seen once under load in CI): start again
    why = f"did not finish in {timeout_s:g} s (hang?); killed" if timed_out else "stopped: a rank failed"
    report = "\n".join(f"--- rank {r}: exit status {c}; stderr (end):\n{s}" for r, (c, s) in enumerate(zip(codes, stderr)))
    raise HarnessError(f"{world} processes running {', '.join(suites)} {why}\n{report}")


def run_group(world: int, suites: Sequence[str], timeout_s: float = GROUP_TIMEOUT_S, attempts: int = 3) -> Results:
    """Run every scenario of ``suites`` on ``world`` gloo processes: per rank,
    ``{suite: {scenario: outcome}}``. Started again (``attempts`` in all) only where the
    rendezvous port was taken or a rank was aborted by the C++ runtime itself
    (``_RUNTIME_ABORT``, SIGABRT): a failing scenario, a wrong value or a hang fails at once."""
    for _ in range(attempts):
        with tempfile.TemporaryDirectory(prefix="ddp-harness-") as tmp:
            taken, results = _start(world, suites, Path(tmp), timeout_s)
        if not taken:
            return results
    raise HarnessError(f"no free rendezvous port, or the runtime aborted a rank, in {attempts} attempts")


@functools.lru_cache(maxsize=None)
def shared_results(world: int) -> Results:
    """Every registered suite written for ``world``, run once per test session."""
    suites = [s for s in SUITES if world in importlib.import_module(s).WORLDS]
    return run_group(world, suites)


# -- the child: one rank ------------------------------------------------------------

def _rank_main(rank: int, world: int, port: int, out: str, suites: Sequence[str]) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    results: Dict[str, Dict[str, Outcome]] = {}
    try:
        for suite in suites:
            module, _, attr = suite.partition(":")
            scenarios = getattr(importlib.import_module(module), attr or "SCENARIOS")
            results[suite] = {}
            for name, fn in scenarios.items():
                results[suite][name] = capture(fn, rank, world)
                dist.barrier()  # the next scenario starts together on every rank
        torch.save(results, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    _rank, _world, _port, _out, *_suites = sys.argv[1:]
    _rank_main(int(_rank), int(_world), int(_port), _out, _suites)
