"""Tiny shapes shared by the package tests: every dimension differs, so a swapped axis fails."""
from __future__ import annotations

import os

from transformer_course.config import TransformerConfig

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # Hugging Face models are built from configs: never download

B, T, D_MODEL, N_HEADS, D_FF, VOCAB, MAX_LEN = 2, 7, 24, 3, 40, 50, 16
D_HEAD = D_MODEL // N_HEADS  # 8


def tiny_config(**overrides: object) -> TransformerConfig:
    """A 2-layer config with the sizes above; keyword arguments override fields."""
    sizes = dict(vocab_size=VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=2, d_ff=D_FF, max_len=MAX_LEN)
    return TransformerConfig(**{**sizes, **overrides})
