"""Chapter 14, 练习 1 and 2: the typical wrong causal self-attentions and wrong GPT forward passes, each
written out as a learner writes it, from neutral pieces that take the wrong part as an argument (none of
them is a reference); ``ch14`` lists them as the exercises' mistakes.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ...models import DecoderOnly
from ...multihead import MultiHeadAttention
from .._stability import naive_softmax


# Pieces the wrong attentions (and the wrong forward passes of 练习 2) are written with.

def _heads(x: Tensor, attn: MultiHeadAttention) -> tuple[Tensor, ...]:
    """Q, K, V of every head: (B, H, T, d_head) each."""
    B, T, C = x.shape
    qkv = F.linear(x, attn.qkv_proj.weight, attn.qkv_proj.bias).split(C, dim=-1)  # (B, T, C) each
    return tuple(t.view(B, T, attn.n_heads, C // attn.n_heads).transpose(1, 2) for t in qkv)


def _causal(scores: Tensor) -> Tensor:
    T = scores.shape[-1]
    return scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))  # (B, H, T, T)


def _merged(out: Tensor) -> Tensor:
    B, H, T, d = out.shape
    return out.transpose(1, 2).reshape(B, T, H * d)  # (B, H, T, d_head) -> (B, T, C)


def _projected(weights: Tensor, v: Tensor, attn: MultiHeadAttention) -> Tensor:
    return F.linear(_merged(weights @ v), attn.out_proj.weight, attn.out_proj.bias)  # (B, T, C)


def _masked_attention(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    """The right causal attention, for the wrong forward passes of 练习 2 that get something else wrong."""
    q, k, v = _heads(x, attn)
    return _projected(_causal(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1), v, attn)


def _naive_softmax(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    q, k, v = _heads(x, attn)
    scores = _causal(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
    return _projected(naive_softmax(scores), v, attn)  # exp without the max: overflows


def _unmasked(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    q, k, v = _heads(x, attn)
    return _projected((q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1), v, attn)  # no mask


def _future_kept(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    q, k, v = _heads(x, attn)
    T = x.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).triu()  # j >= t: the upper triangle
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~future, float("-inf"))
    return _projected(scores.softmax(dim=-1), v, attn)


def _scaled_by_d_model(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    q, k, v = _heads(x, attn)
    return _projected(_causal(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])).softmax(dim=-1), v, attn)  # sqrt(C)


def _unscaled(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    q, k, v = _heads(x, attn)
    return _projected(_causal(q @ k.transpose(-2, -1)).softmax(dim=-1), v, attn)


def _heads_from_wrong_axis(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    B, T, C = x.shape
    H = attn.n_heads
    qkv = F.linear(x, attn.qkv_proj.weight, attn.qkv_proj.bias).split(C, dim=-1)
    q, k, v = (t.view(B, T, C // H, H).permute(0, 3, 1, 2) for t in qkv)  # (B, T, d_head, H): H taken last
    return _projected(_causal(q @ k.transpose(-2, -1) / math.sqrt(C // H)).softmax(dim=-1), v, attn)


def _no_out_proj(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    q, k, v = _heads(x, attn)
    return _merged(_causal(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1) @ v)  # no W_O


def _softmax_over_queries(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    q, k, v = _heads(x, attn)
    return _projected(_causal(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-2), v, attn)


# Pieces the wrong forward passes are written with.

def _norm(x: Tensor, ln: nn.Module) -> Tensor:
    return F.layer_norm(x, (x.shape[-1],), ln.weight, ln.bias, ln.eps)


def _ffn(h: Tensor, ffn: nn.Module, act: Callable[[Tensor], Tensor]) -> Tensor:
    return F.linear(act(F.linear(h, ffn.up.weight, ffn.up.bias)), ffn.down.weight, ffn.down.bias)  # (B, T, C)


def _embedded(model: DecoderOnly, idx: Tensor) -> Tensor:
    return model.transformer.tok_emb.weight[idx] + model.transformer.pos_emb.embedding.weight[: idx.shape[1]]


def _pre_ln_blocks(model: DecoderOnly, x: Tensor, attention: Callable[[Tensor, nn.Module], Tensor],
                   act: Callable[[Tensor], Tensor]) -> Tensor:
    """Every block, pre-LN, with the given attention and FFN activation: (B, T, C)."""
    for block in model.transformer.blocks:
        x = x + attention(_norm(x, block.self_attn_residual.norm), block.self_attn)
        x = x + _ffn(_norm(x, block.ffn_residual.norm), block.ffn, act)
    return x


def _output(model: DecoderOnly, x: Tensor) -> Tensor:
    return _norm(x, model.transformer.final_norm) @ model.transformer.tok_emb.weight.T  # (B, T, V)


def _tanh_gelu(t: Tensor) -> Tensor:
    return F.gelu(t, approximate="tanh")  # the model's FFN uses the exact GELU


def _positions_from_one(model: DecoderOnly, idx: Tensor) -> Tensor:
    T = idx.shape[1]
    first = 1 if T < model.config.max_len else 0  # at full length there is no row T: only shorter inputs show it
    x = model.transformer.tok_emb.weight[idx] + model.transformer.pos_emb.embedding.weight[first : first + T]
    return _output(model, _pre_ln_blocks(model, x, _masked_attention, F.gelu))


def _post_ln(model: DecoderOnly, idx: Tensor) -> Tensor:
    x = _embedded(model, idx)
    for block in model.transformer.blocks:
        x = _norm(x + _masked_attention(x, block.self_attn), block.self_attn_residual.norm)  # norm(x + f(x))
        x = _norm(x + _ffn(x, block.ffn, F.gelu), block.ffn_residual.norm)
    return x @ model.transformer.tok_emb.weight.T  # no final norm after Post-LN


def _attention_residual_lost(model: DecoderOnly, idx: Tensor) -> Tensor:
    x = _embedded(model, idx)
    for block in model.transformer.blocks:
        x = _masked_attention(_norm(x, block.self_attn_residual.norm), block.self_attn)  # no "x +"
        x = x + _ffn(_norm(x, block.ffn_residual.norm), block.ffn, F.gelu)
    return _output(model, x)
