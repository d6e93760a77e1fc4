"""The training loop learns: a tiny Transformer solves the copy task; the history has one loss per step."""
from __future__ import annotations

import torch
from tiny import tiny_config

from transformer_course.data import copy_task
from transformer_course.models import DecoderOnly
from transformer_course.train import accuracy, train


def test_a_tiny_decoder_learns_to_copy():
    torch.manual_seed(0)
    model = DecoderOnly(tiny_config(vocab_size=10, max_len=12, positional="rope", n_layers=1))
    g = torch.Generator().manual_seed(0)
    history = train(model, lambda: copy_task(32, 5, 10, generator=g), steps=40, lr=2e-2, progress=False)
    assert len(history["loss"]) == 40
    assert sum(history["loss"][-5:]) < 0.1 * sum(history["loss"][:5])
    assert not model.training
    inputs, targets = copy_task(200, 5, 10, generator=123)
    with torch.no_grad():
        assert accuracy(model(inputs), targets) > 0.9
