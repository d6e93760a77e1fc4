"""RNN and LSTM from scratch equal torch.nn.RNN / torch.nn.LSTM with the same weights."""
from __future__ import annotations

import torch
from tiny import B, T

from transformer_course.rnn import LSTM, RNN, RecurrentLM

INPUT, HIDDEN = 5, 6


def _copy_weights(ours: RNN | LSTM, ref: torch.nn.RNNBase) -> None:
    with torch.no_grad():
        ours.ih.weight.copy_(ref.weight_ih_l0)
        ours.ih.bias.copy_(ref.bias_ih_l0)
        ours.hh.weight.copy_(ref.weight_hh_l0)
        ours.hh.bias.copy_(ref.bias_hh_l0)


def test_lstm_equals_torch_lstm():
    ours, ref = LSTM(INPUT, HIDDEN), torch.nn.LSTM(INPUT, HIDDEN, batch_first=True)
    _copy_weights(ours, ref)
    x, h0, c0 = torch.randn(B, T, INPUT), torch.randn(B, HIDDEN), torch.randn(B, HIDDEN)
    hs, (h, c) = ours(x, (h0, c0))
    ref_hs, (ref_h, ref_c) = ref(x, (h0[None], c0[None]))
    assert hs.shape == (B, T, HIDDEN)
    torch.testing.assert_close(hs, ref_hs)
    torch.testing.assert_close((h, c), (ref_h[0], ref_c[0]))


def test_rnn_equals_torch_rnn():
    ours, ref = RNN(INPUT, HIDDEN), torch.nn.RNN(INPUT, HIDDEN, batch_first=True)
    _copy_weights(ours, ref)
    x = torch.randn(B, T, INPUT)
    hs, h = ours(x)
    ref_hs, ref_h = ref(x)
    torch.testing.assert_close(hs, ref_hs)
    torch.testing.assert_close(h, ref_h[0])


def test_recurrent_lm_is_causal():
    model = RecurrentLM(11, HIDDEN, cell="rnn")
    idx = torch.randint(0, 11, (B, T))
    changed = idx.clone()
    changed[:, 4:] = (changed[:, 4:] + 1) % 11
    assert model(idx).shape == (B, T, 11)
    torch.testing.assert_close(model(idx)[:, :4], model(changed)[:, :4])
