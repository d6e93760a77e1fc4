"""Checkers for chapter 8 (残差、LayerNorm 与 Transformer Block).

Each exercise lists the typical mistakes it recognises; ``tests/test_exercises.py`` proves that
every one of them is rejected with its own hint.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..ffn import FeedForward
from ..multihead import MultiHeadAttention
from ..norm import LayerNorm
from ._core import Exercise, Mistake, randn as _randn



# ---- 练习 1: LayerNorm by hand --------------------------------------------------------------
# The cases use a large eps (0.1 to 0.5) so that where eps sits makes a visible difference.

def _layer_norm_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(11)
    dims = [(2, 3, 5, 0.1), (1, 4, 8, 0.25), (3, 2, 6, 0.5)]  # (B, T, C, eps)
    return [(3 + 2 * _randn(g, b, t, c), 1 + _randn(g, c), _randn(g, c), eps) for b, t, c, eps in dims]


def _ln(x: Tensor, weight: Tensor, bias: Tensor, eps: float, *, dim: int = -1, unbiased: bool = False,
        eps_inside: bool = True) -> Tensor:
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
    std = torch.sqrt(var + eps) if eps_inside else torch.sqrt(var) + eps
    return (x - mean) / std * weight + bias


def _layer_norm_reference(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return _ln(x, weight, bias, eps)


LAYER_NORM = Exercise(
    name="layer_norm",
    reference=_layer_norm_reference,
    make_cases=_layer_norm_cases,
    mistakes=(
        Mistake("方差用了无偏估计（除以 C−1，x.var() 的默认值）；LayerNorm 用有偏方差：x.var(dim=-1, unbiased=False)。",
                lambda x, w, b, eps: _ln(x, w, b, eps, unbiased=True)),
        Mistake("统计量算错了维度：LayerNorm 对每个 token 自己的 C 个特征（最后一维，dim=-1）求均值和方差，不跨 token。",
                lambda x, w, b, eps: _ln(x, w, b, eps, dim=-2)),
        Mistake("eps 应加在根号里面：sqrt(var + eps)，而不是 sqrt(var) + eps。",
                lambda x, w, b, eps: _ln(x, w, b, eps, eps_inside=False)),
        Mistake("没有减去均值：这是 RMSNorm 的做法。LayerNorm 先减均值 μ，再除以 sqrt(var + eps)。",
                lambda x, w, b, eps: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w + b),
        Mistake("忘了可学习的缩放 weight（γ）和平移 bias（β）：归一化之后还要乘 weight、加 bias。",
                lambda x, w, b, eps: _ln(x, torch.ones_like(w), torch.zeros_like(b), eps)),
        Mistake("顺序不对：应先乘 weight 再加 bias（x̂ · γ + β），你算的是 (x̂ + β) · γ。",
                lambda x, w, b, eps: (_ln(x, torch.ones_like(w), torch.zeros_like(b), eps) + b) * w),
    ),
)
check_layer_norm = LAYER_NORM.check


# ---- 练习 2: RMSNorm by hand ----------------------------------------------------------------

def _rms_norm_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(12)
    dims = [(2, 5, 4, 0.1), (3, 2, 7, 0.3), (1, 6, 9, 0.2)]  # (B, T, C, eps)
    return [(1 + 2 * _randn(g, b, t, c), 1 + _randn(g, c), eps) for b, t, c, eps in dims]


def _rms_norm_reference(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


RMS_NORM = Exercise(
    name="rms_norm",
    reference=_rms_norm_reference,
    make_cases=_rms_norm_cases,
    mistakes=(
        Mistake("RMSNorm 不减均值：直接用 x 除以均方根 sqrt(mean(x²) + eps)，你先减去了均值（那是 LayerNorm）。",
                lambda x, w, eps: _rms_norm_reference(x - x.mean(-1, keepdim=True), w, eps)),
        Mistake("应除以均方根 sqrt(mean(x²) + eps)：你用了平方和（没有除以特征数 C）。",
                lambda x, w, eps: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w),
        Mistake("RMSNorm 除以的是均方根 sqrt(mean(x²) + eps)，不是标准差 x.std()。",
                lambda x, w, eps: x / (x.std(-1, keepdim=True) + eps) * w),
        Mistake("eps 应加在根号里面：sqrt(mean(x²) + eps)，而不是 sqrt(mean(x²)) + eps。",
                lambda x, w, eps: x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + eps) * w),
        Mistake("忘了乘可学习的缩放 weight（γ）。",
                lambda x, w, eps: _rms_norm_reference(x, torch.ones_like(w), eps)),
    ),
)
check_rms_norm = RMS_NORM.check


# ---- 练习 3: a pre-LN block from its parts ---------------------------------------------------

def _randomise(module: nn.Module, g: torch.Generator) -> nn.Module:
    """Seeded weights (norm gains away from 1) so that every part of the block matters."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            fan_in = p.shape[-1] if p.dim() > 1 else 1
            base = 1.0 if name == "weight" and p.dim() == 1 else 0.0  # a norm's gain
            p.copy_(base + _randn(g, *p.shape) / math.sqrt(fan_in) * (0.5 if base else 1.0))
    return module.eval()


def _block_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(13)
    cases = []
    for b, t, c, h in [(2, 3, 8, 2), (1, 5, 12, 3), (3, 4, 6, 1)]:  # (B, T, C, heads)
        mha = _randomise(MultiHeadAttention(c, h), g)
        ffn = _randomise(FeedForward(c, 2 * c + 4), g)
        norm1, norm2 = _randomise(LayerNorm(c), g), _randomise(LayerNorm(c), g)

        def attn(x: Tensor, mha: MultiHeadAttention = mha) -> Tensor:
            return mha(x)[0]  # (B, T, C)

        cases.append((3 * _randn(g, b, t, c), attn, ffn, norm1, norm2))
    return cases


def _pre_ln(x, attn, ffn, norm1, norm2):
    x = x + attn(norm1(x))  # (B, T, C)
    return x + ffn(norm2(x))


def _block_reference(x: Tensor, attn, ffn, norm1, norm2) -> Tensor:
    with torch.no_grad():
        return _pre_ln(x, attn, ffn, norm1, norm2)


def _no_ffn_residual(x, attn, ffn, norm1, norm2):
    x = x + attn(norm1(x))
    return ffn(norm2(x))


def _normalised_residual(x, attn, ffn, norm1, norm2):
    h = norm1(x)
    x = h + attn(h)
    h = norm2(x)
    return h + ffn(h)


PRE_LN_BLOCK = Exercise(
    name="pre_ln_block",
    reference=_block_reference,
    make_cases=_block_cases,
    mistakes=(
        Mistake("这是 Post-LN（原始 Transformer）：norm(x + f(x))。Pre-LN 是 x + f(norm(x))，残差路径上不做归一化。",
                lambda x, a, f, n1, n2: n2((lambda y: y + f(y))(n1(x + a(x))))),
        Mistake("残差加回的应是未归一化的 x：x + attn(norm1(x))，而不是 norm1(x) + attn(norm1(x))。",
                _normalised_residual),
        Mistake("FFN 外面也要有残差连接：x + ffn(norm2(x))。",
                _no_ffn_residual),
        Mistake("两个子层各有自己的 LayerNorm：注意力之前用 norm1，FFN 之前用 norm2，你把它们用反了。",
                lambda x, a, f, n1, n2: _pre_ln(x, a, f, n2, n1)),
        Mistake("顺序反了：先注意力（token 之间交换信息），再 FFN（每个 token 各自变换）。",
                lambda x, a, f, n1, n2: (lambda y: y + a(n2(y)))(x + f(n1(x)))),
    ),
)
check_pre_ln_block = PRE_LN_BLOCK.check

EXERCISES = (LAYER_NORM, RMS_NORM, PRE_LN_BLOCK)
