"""Where does a training step spend its time, and how long does it take?

Used by the benchmarks that compare the batched trainer with the per-run loop: the top
operations of one call by self CPU, so that ``results.json`` says not only how large the
ratio is but what bounds it; and the best of interleaved repeats, so that a ratio is not
one lucky or unlucky timing on a shared machine.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference_training import train_looped  # noqa: F401  (the per-run baseline)


def timed_rounds(repeats: int, **timers: Callable[[], float]) -> dict[str, list[float]]:
    """Every timing of each timer (each returns seconds), in ``repeats`` interleaved rounds.

    One round calls every timer once, in the order given. A load spike on the shared
    machine then slows one round of each path rather than all repeats of one.
    """
    times: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(repeats):
        for name, timer in timers.items():
            times[name].append(timer())
    return times


def round_ratios(times: dict[str, list[float]], slow: str, fast: str) -> list[float]:
    """``slow / fast`` in each round of :func:`timed_rounds`: how much the ratio varies.

    The benchmarks report the ratio of the best timings; these per-round ratios show the
    spread that the shared machine's load puts around it.
    """
    return [round(s / f, 2) for s, f in zip(times[slow], times[fast], strict=True)]


def top_ops(fn: Callable[[], object], n: int = 6, by_shape: bool = False) -> list[list[object]]:
    """``[[op name, % of self CPU time, calls], ...]`` of ``fn()``, largest first.

    ``by_shape=True`` counts each operation separately for each list of input shapes and
    adds the shapes: ``[[op name, shapes, %, calls], ...]``.
    """
    with profile(activities=[ProfilerActivity.CPU], record_shapes=by_shape) as prof:
        fn()
    averages = prof.key_averages(group_by_input_shape=by_shape)
    events = [e for e in averages if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: -e.self_cpu_time_total)
    rows = []
    for e in events[:n]:
        share = round(100 * e.self_cpu_time_total / total, 1)
        shapes = [list(s) for s in e.input_shapes if s]
        rows.append([e.key, shapes, share, e.count] if by_shape else [e.key, share, e.count])
    return rows
