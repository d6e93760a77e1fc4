"""What a forward pass computed inside, for looking at: ``model.inspect(...)`` returns a ``Trace``.

A ``Trace`` comes from the model's own forward pass (the same blocks, norms and caches, pre-LN and
post-LN alike); only the attention runs the readable ``scaled_dot_product_attention``, which also
returns its weights, instead of PyTorch's fused kernel. No hooks, no copy of a block.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class AttentionTrace:
    """One attention layer's queries, keys, values (after RoPE; keys and values include the cache) and weights."""

    queries: Tensor  # (B, H, T, d_head)
    keys: Tensor  # (B, H_kv, Tk, d_head); H_kv = H except with grouped-query attention
    values: Tensor  # (B, H_kv, Tk, d_head)
    weights: Tensor  # (B, H, T, Tk), each row sums to 1


@dataclass
class LayerTrace:
    """One block: its self-attention, its cross-attention (decoders of an ``EncoderDecoder``), its output and
    (``n_experts`` set) the experts each token was routed to."""

    self_attention: AttentionTrace
    cross_attention: AttentionTrace | None
    output: Tensor  # (B, T, C) the residual stream after the block
    experts: Tensor | None = None  # (B, T, k) each token's chosen experts, for a mixture-of-experts FFN


@dataclass
class Trace:
    """A forward pass: the logits and, per layer, a ``LayerTrace`` (``encoder_layers`` for ``EncoderDecoder``)."""

    logits: Tensor  # (B, T, V)
    layers: list[LayerTrace]
    encoder_layers: list[LayerTrace] | None = None

    @property
    def attention(self) -> Tensor:
        """Self-attention weights of every layer, ``(L, B, H, T, Tk)``."""
        return torch.stack([layer.self_attention.weights for layer in self.layers])

    @property
    def keys(self) -> Tensor:
        """Self-attention keys of every layer, ``(L, B, H, Tk, d_head)``."""
        return torch.stack([layer.self_attention.keys for layer in self.layers])
