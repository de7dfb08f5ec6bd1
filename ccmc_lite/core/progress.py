"""A progress bar that prints plain text lines.

``tqdm.auto`` renders as a JavaScript widget whose HTML needs a CDN; this one prints a
handful of ordinary lines (``[#####-----]  50% step 500/1000 | loss 0.6123``), so the built
book shows exactly what a terminal shows. The lines carry no clock time: the same run prints
the same lines on any machine (the trainer records its wall time in ``TrainResult.seconds``).
"""

from __future__ import annotations

import sys
from typing import TextIO

from .validation import check_bool, check_int, check_size

__all__ = ["TextProgress"]


class TextProgress:
    """Print ``updates`` evenly spaced progress lines, labelled ``label``, over ``total`` steps.

    The last line comes at ``step == total``; ``enabled=False`` prints nothing; ``stream``
    defaults to ``sys.stdout``.
    """

    def __init__(
        self,
        total: int,
        *,
        label: str = "",
        updates: int = 5,
        enabled: bool = True,
        stream: TextIO | None = None,
        width: int = 20,
    ) -> None:
        self.total = check_size("total", total, minimum=1)
        self.updates = check_size("updates", updates, minimum=1, limit=10**4)
        self.width = check_size("width", width, minimum=1, limit=1000)
        self.label = label
        self.enabled = check_bool("enabled", enabled)
        self.stream = stream
        self._next = 1
        self.lines: list[str] = []

    def _due(self, step: int) -> bool:
        return step >= self._next * self.total / self.updates - 1e-9

    def update(self, step: int, **metrics: float) -> None:
        """Report that ``step`` steps are done; prints a line when one is due."""
        step = check_int("step", step, minimum=0, maximum=self.total)
        if not self._due(step):
            return
        while self._due(step):
            self._next += 1
        frac = min(step / self.total, 1.0)
        filled = round(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        parts = [f"{self.label} " if self.label else "", f"[{bar}] {100 * frac:3.0f}%"]
        parts.append(f" step {step}/{self.total}")
        for key, value in metrics.items():
            parts.append(f" | {key} {value:.4f}")
        line = "".join(parts)
        self.lines.append(line)
        if self.enabled:
            print(line, file=self.stream or sys.stdout, flush=True)
