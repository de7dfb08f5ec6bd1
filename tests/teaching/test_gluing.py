"""The glue registry: every number or string a page glues is kept, by name, as plain Python."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from ccmc_lite import glue
from ccmc_lite.teaching import glued_values


def test_glue_keeps_plain_scalars_and_skips_other_objects(capsys):
    fig = plt.figure()
    glue("t_float", np.float64(0.25), display=False)
    glue("t_int", np.int64(7), display=False)
    glue("t_tensor", torch.tensor(1.5), display=False)
    glue("t_bool", np.bool_(True), display=False)
    glue("t_text", "bigram", display=False)
    glue("t_array", np.arange(3), display=False)
    glue("t_fig", fig, display=False)
    plt.close(fig)
    got = glued_values()
    assert got["t_float"] == 0.25 and type(got["t_float"]) is float
    assert got["t_int"] == 7 and type(got["t_int"]) is int
    assert got["t_tensor"] == 1.5 and type(got["t_tensor"]) is float
    assert got["t_bool"] is True
    assert got["t_text"] == "bigram"
    assert "t_array" not in got and "t_fig" not in got
    glue("t_float", 0.5, display=False)  # the last value wins
    assert glued_values()["t_float"] == 0.5
    got["t_float"] = -1.0  # a copy
    assert glued_values()["t_float"] == 0.5
