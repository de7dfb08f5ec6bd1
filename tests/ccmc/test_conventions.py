"""Tests for the conversions between the paper's and the book's conventions."""

from __future__ import annotations

import pytest
import torch

from ccmc_lite.ccmc import from_column_stochastic, from_one_based, to_column_stochastic


def test_conventions_round_trip():
    P_cols = torch.tensor([[0.2, 0.5], [0.8, 0.5]])
    P = from_column_stochastic(P_cols)
    torch.testing.assert_close(P, P_cols.T.double())  # row i = column i of the paper's layout
    torch.testing.assert_close(to_column_stochastic(P), P_cols.double())
    assert from_one_based([1, 2, 1]).tolist() == [0, 1, 0]


def test_conventions_reject_wrong_layout():
    with pytest.raises(ValueError, match="P_columns must be column-stochastic"):
        from_column_stochastic([[0.2, 0.8], [0.5, 0.5]])
    with pytest.raises(ValueError, match="P must be row-stochastic"):
        to_column_stochastic([[0.2, 0.5], [0.8, 0.5]])
    with pytest.raises(ValueError, match="tokens must be numbered from 1"):
        from_one_based([0, 1])
