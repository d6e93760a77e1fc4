"""Batched generation of left-padded prompts of different lengths: each row's tokens equal that prompt's
generation alone (greedy), cached and uncached, for every positional scheme that reaches attention or the
input, with grouped-query attention and a sliding window too; and no real token attends to padding."""
from __future__ import annotations

import pytest
import torch

import transformer_course as tc

PROMPTS = [[5, 17, 3, 29, 8, 11, 2], [9, 1], [30, 4, 4, 21], [7]]  # lengths 7, 2, 4, 1
PAD = 0


def left_padded(prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, prompts))
    idx = torch.tensor([[PAD] * (width - len(p)) + p for p in prompts])  # (B, T)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])  # (B, T) 1 = real
    return idx, mask


def model_with(**changes) -> tc.DecoderOnly:
    config = tc.TransformerConfig(vocab_size=31, d_model=24, n_heads=4, n_layers=2, d_ff=40, max_len=32, **changes)
    tc.set_seed(2)
    return tc.DecoderOnly(config).eval()


VARIANTS = {"learned": {}, "sinusoidal": {"positional": "sinusoidal"}, "rope, GQA": {"positional": "rope",
            "n_kv_heads": 2}, "alibi": {"positional": "alibi"}, "rope, window 3": {"positional": "rope",
            "sliding_window": 3}}


@pytest.mark.parametrize("name", VARIANTS)
def test_each_row_continues_as_its_prompt_alone(name: str) -> None:
    model = model_with(**VARIANTS[name])
    idx, mask = left_padded(PROMPTS)
    for use_cache in (True, False):
        batched = tc.generate(model, idx, 9, use_cache=use_cache, temperature=0.0, attention_mask=mask)
        for row, prompt in enumerate(PROMPTS):
            alone = tc.generate(model, torch.tensor([prompt]), 9, use_cache=use_cache, temperature=0.0)
            assert torch.equal(batched[row, -(len(prompt) + 9):], alone[0]), (name, use_cache, row)


def test_padding_changes_nothing_for_real_tokens_and_nothing_is_nan() -> None:
    model = model_with(positional="rope")
    idx, mask = left_padded(PROMPTS)
    noisy = idx.masked_fill(mask == 0, 13)  # other padding ids: real tokens must not notice
    with torch.no_grad():
        a, b = model(idx, attention_mask=mask), model(noisy, attention_mask=mask)
        trace = model.inspect(idx, attention_mask=mask)
    assert torch.isfinite(a).all() and torch.equal(a[mask.bool()], b[mask.bool()])
    weights = trace.attention  # (L, B, H, T, Tk)
    real_query = mask.bool()[None, :, None, :, None]
    pad_key = ~mask.bool()[None, :, None, None, :]
    assert (weights * (real_query & pad_key)).abs().max() == 0  # no real token looks at padding
    with pytest.raises(ValueError, match="attention_mask"):
        model(idx, attention_mask=mask[:, 1:])
