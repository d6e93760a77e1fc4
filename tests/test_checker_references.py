"""The checkers' references are written by hand (a reference may not call what its exercise forbids: the
generic wrong attempts wrap it and go through the same watcher), so each is tied here to the package's own
implementation of the idea, on the checker's own cases: one idea, two writings, the same numbers."""
from __future__ import annotations

import torch

import transformer_course as tc
from transformer_course.exercises import ch05, ch06, ch08


def _cases(exercise):
    return [tuple(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in c.args)
            for c in exercise.cases()]


def test_layer_norm_and_rms_norm_references_are_the_package_norms():
    for x, weight, bias, eps in _cases(ch08.LAYER_NORM):
        norm = tc.LayerNorm(x.shape[-1], eps=eps).double()
        with torch.no_grad():
            norm.weight.copy_(weight), norm.bias.copy_(bias)
            torch.testing.assert_close(ch08.LAYER_NORM.reference(x, weight, bias, eps), norm(x))
    for x, weight, eps in _cases(ch08.RMS_NORM):
        norm = tc.RMSNorm(x.shape[-1], eps=eps).double()
        with torch.no_grad():
            norm.weight.copy_(weight)
            torch.testing.assert_close(ch08.RMS_NORM.reference(x, weight, eps), norm(x))


def test_split_heads_reference_is_the_package_split():
    for x, n_heads in _cases(ch05.SPLIT):
        torch.testing.assert_close(ch05.SPLIT.reference(x, n_heads), tc.split_heads(x, n_heads))


def test_positional_references_are_the_package_schemes():
    for positions, d_model in _cases(ch06.SINUSOIDAL):
        expected = tc.SinusoidalPositions(d_model)(positions).double()
        torch.testing.assert_close(ch06.SINUSOIDAL.reference(positions, d_model).double(), expected,
                                   atol=1e-5, rtol=0)
    for x, positions in _cases(ch06.ROPE):
        cos, sin = tc.RotaryEmbedding(x.shape[-1])(positions)  # (T, d) each
        torch.testing.assert_close(ch06.ROPE.reference(x, positions).double(),
                                   tc.apply_rope(x, cos.double(), sin.double()), atol=1e-5, rtol=0)
    for positions, n_heads in _cases(ch06.ALIBI):
        expected = tc.ALiBi(n_heads)(positions, positions).double()  # (H, T, T)
        torch.testing.assert_close(ch06.ALIBI.reference(positions, n_heads).double(), expected, atol=1e-5, rtol=1e-6)
