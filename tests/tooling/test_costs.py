"""tools/costs.py: the work counter and the roofline bound."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tools.costs import (
    H100_SXM,
    Hardware,
    Work,
    count_work,
    roofline_seconds,
    roofline_terms,
)

MACHINE = Hardware("test machine", flops_per_s=1e9, bytes_per_s=1e8, seconds_per_op=1e-3, source="")


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9))
def test_a_matrix_product_counts_2mnk_flops_and_its_operands_once(m, k, n):
    a, b = torch.randn(m, k), torch.randn(k, n)
    work = count_work(lambda: a @ b)
    assert work.matmul_flops == 2 * m * n * k
    assert work.elementwise_flops == 0
    assert work.bytes == 4 * (m * k + k * n + m * n)
    assert work.ops == 1


def test_elementwise_ops_count_one_flop_per_output_and_views_count_nothing():
    x = torch.randn(10, dtype=torch.float64)
    work = count_work(lambda: x.exp() + 1.0)  # exp, then add: two ops of 10 outputs each
    assert (work.ops, work.elementwise_flops, work.matmul_flops) == (2, 20.0, 0.0)
    assert work.bytes == 8 * (10 + 10) + 8 * (10 + 10)  # each reads 10 and writes 10 doubles
    views = count_work(lambda: x.view(2, 5).t()[0])
    assert (views.ops, views.bytes, views.flops) == (0, 0.0, 0.0)


def test_backward_is_counted_and_still_accumulates_gradients():
    w = torch.randn(3, 4, requires_grad=True)
    x = torch.randn(5, 3)
    fwd = count_work(lambda: (x @ w).sum())
    both = count_work(lambda: (x @ w).sum().backward())
    assert w.grad is not None and w.grad.shape == (3, 4)
    assert both.matmul_flops == 2 * fwd.matmul_flops  # dW = x^T g: one more product of 2*5*3*4
    assert both.ops > fwd.ops


def test_roofline_is_the_largest_of_arithmetic_traffic_and_operations():
    compute = Work(matmul_flops=1e9, elementwise_flops=0.0, bytes=1e6, ops=1)
    assert roofline_seconds(compute, MACHINE) == pytest.approx(1.0)
    memory = Work(matmul_flops=0.0, elementwise_flops=1e6, bytes=1e9, ops=1)
    assert roofline_seconds(memory, MACHINE) == pytest.approx(10.0)
    launches = Work(matmul_flops=1e3, elementwise_flops=0.0, bytes=1e3, ops=100)
    assert roofline_seconds(launches, MACHINE) == pytest.approx(0.1)
    # batching multiplies arithmetic and traffic, not the number of operations
    assert roofline_seconds(compute, MACHINE, runs=8) == pytest.approx(8.0)
    assert roofline_seconds(launches, MACHINE, runs=8) == pytest.approx(0.1)
    assert roofline_seconds(launches, MACHINE, runs=10**6) == pytest.approx(10.0)


def test_roofline_terms_name_each_bound_and_the_seconds_are_their_largest():
    work = Work(matmul_flops=1e9, elementwise_flops=0.0, bytes=1e9, ops=100)
    terms = roofline_terms(work, MACHINE, runs=2)
    assert terms == pytest.approx({"arithmetic": 2.0, "memory traffic": 20.0, "launches": 0.1})
    assert roofline_seconds(work, MACHINE, runs=2) == max(terms.values())


def test_the_h100_record_holds_the_datasheet_figures():
    assert H100_SXM.flops_per_s == 67e12 and H100_SXM.bytes_per_s == 3.35e12
    assert "datasheet" in H100_SXM.source and "assumed" in H100_SXM.source


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: count_work(3), TypeError, "fn must be callable"),
        (lambda: roofline_seconds("w", MACHINE), TypeError, "work must be a Work"),
        (lambda: roofline_seconds(Work(1, 1, 1, 1), "gpu"), TypeError, "hardware must be"),
        (lambda: roofline_seconds(Work(1, 1, 1, 1), MACHINE, runs=0), ValueError, "runs"),
        (lambda: Work(math.nan, 0, 0, 0), ValueError, "matmul_flops"),
        (lambda: Work(0, 0, -1.0, 0), ValueError, "bytes"),
        (lambda: Work(0, 0, 0, 1.5), TypeError, "ops"),
        (lambda: Hardware("x", 0.0, 1.0, 0.0, ""), ValueError, "flops_per_s"),
        (lambda: Hardware("x", 1.0, 1.0, -1e-6, ""), ValueError, "seconds_per_op"),
        (lambda: Hardware(3, 1.0, 1.0, 0.0, ""), TypeError, "name"),
    ],
)
def test_bad_arguments_name_themselves(call, error, words):
    with pytest.raises(error, match=words):
        call()
