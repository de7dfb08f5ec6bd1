"""Glue for the build-only cells: the registry keeps every number or string a page glues, by
name, as plain Python; the build flag comes from the environment."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from tools.gluing import BOOK_BUILD_ENV, _in_book_build, glue, glued_values


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


def test_in_book_build_reads_the_environment(monkeypatch):
    for value, expected in (("1", True), (" 1 ", True), ("0", False), ("", False)):
        monkeypatch.setenv(BOOK_BUILD_ENV, value)
        assert _in_book_build() is expected
    monkeypatch.delenv(BOOK_BUILD_ENV)
    assert _in_book_build() is False
