"""tc.count_flops / flops_by_op: the formulas the chapters teach, on meta and real tensors."""
from __future__ import annotations

import torch
from tiny import D_MODEL, N_HEADS, T, tiny_config

from transformer_course.models import DecoderOnly
from transformer_course.multihead import MultiHeadAttention
from transformer_course.utils import LINEAR_OPS, count_flops, flops_by_op


def test_attention_flops_are_the_projections_plus_the_two_score_products():
    for device in ("meta", "cpu"):
        layer = MultiHeadAttention(D_MODEL, N_HEADS).to(device)
        x = torch.ones(1, 2 * T, D_MODEL, device=device)  # (1, N, C); meta: shapes only
        n, c = 2 * T, D_MODEL
        by_op = flops_by_op(lambda: layer(x, need_weights=True))
        assert by_op == {"aten.addmm": 2 * n * 4 * c * c, "aten.bmm": 2 * 2 * n * n * c}, (device, by_op)
        assert count_flops(lambda: layer(x, need_weights=True)) == 8 * n * c * c + 4 * n * n * c
        assert count_flops(lambda: layer(x, need_weights=True), LINEAR_OPS) == 8 * n * c * c


def test_a_decoder_step_counts_every_linear_once():
    config = tiny_config(n_layers=3)
    model = DecoderOnly(config).eval()
    idx = torch.zeros(1, 1, dtype=torch.long)
    c, d_ff, v = config.d_model, config.d_ff, config.vocab_size
    per_layer = 2 * (4 * c * c + 2 * c * d_ff)  # Q, K, V, O and the FFN's two matrices
    assert count_flops(lambda: model(idx), LINEAR_OPS) == 3 * per_layer + 2 * c * v  # + the LM head
    assert count_flops(lambda: None) == 0 and torch.is_grad_enabled()  # no_grad only inside
