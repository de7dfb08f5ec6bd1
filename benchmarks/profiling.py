"""Where does a training step spend its time? The top operations of one call, by self CPU.

Used by the benchmarks that compare the batched trainer with the per-run loop, so that
``results.json`` says not only how large the ratio is but what bounds it.
"""

from __future__ import annotations

from collections.abc import Callable

from torch.profiler import ProfilerActivity, profile


def top_ops(fn: Callable[[], object], n: int = 6) -> list[list[object]]:
    """``[[op name, % of self CPU time, calls], ...]`` of ``fn()``, largest first."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: -e.self_cpu_time_total)
    return [[e.key, round(100 * e.self_cpu_time_total / total, 1), e.count] for e in events[:n]]
