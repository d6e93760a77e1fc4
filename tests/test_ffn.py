"""Feed-forward networks: position-wise (no mixing along T), and the shapes of each variant."""
from __future__ import annotations

import pytest
import torch
from tiny import B, D_FF, D_MODEL, T

from transformer_course.ffn import FeedForward, SwiGLU, make_ffn
from transformer_course.utils import count_params


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "swiglu"])
def test_each_position_is_transformed_on_its_own(activation):
    ffn = make_ffn(activation, D_MODEL, D_FF)
    x = torch.randn(B, T, D_MODEL)
    # d out[b, i] / d x[b, j] is zero for every i != j: the Jacobian is block-diagonal in positions.
    jac = torch.autograd.functional.jacobian(ffn, x[0])  # (T, C, T, C)
    off_diagonal = ~torch.eye(T, dtype=torch.bool)
    assert (jac.permute(0, 2, 1, 3)[off_diagonal] == 0).all()
    assert jac.permute(0, 2, 1, 3)[~off_diagonal].abs().sum() > 0
    # and one position alone gives the same output as in the batch
    torch.testing.assert_close(ffn(x[:, 3:4]), ffn(x)[:, 3:4])


def test_swiglu_has_three_matrices_and_feedforward_two():
    assert isinstance(make_ffn("swiglu", D_MODEL, D_FF), SwiGLU)
    assert count_params(SwiGLU(D_MODEL, D_FF)) == 3 * D_MODEL * D_FF
    assert count_params(FeedForward(D_MODEL, D_FF)) == 2 * D_MODEL * D_FF + D_FF + D_MODEL
