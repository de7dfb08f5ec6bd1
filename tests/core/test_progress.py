"""Tests for the text progress bar."""

from __future__ import annotations

import io

import pytest

from ccmc_lite.core import TextProgress


def test_text_progress_prints_evenly_spaced_lines():
    out = io.StringIO()
    bar = TextProgress(100, label="run", updates=4, stream=out, width=4)
    for step in range(1, 101):
        bar.update(step, loss=1.0 / step)
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("run [#---]  25% step 25/100 | loss 0.0400")
    assert lines[-1] == "run [####] 100% step 100/100 | loss 0.0100"  # no clock time
    silent = TextProgress(10, enabled=False, stream=out)
    silent.update(10)
    assert len(silent.lines) == 1 and len(out.getvalue().splitlines()) == 4
    with pytest.raises(ValueError, match="total must be >= 1"):
        TextProgress(0)
