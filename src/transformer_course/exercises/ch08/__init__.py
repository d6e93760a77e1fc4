"""Checkers for chapter 8 (残差、LayerNorm 与 Transformer Block).

Each exercise lists the typical mistakes it recognises (LayerNorm's among them: the variance as
E[x²] − E[x]², which only inputs with a large mean and a small spread expose) and the shortcuts its
statement forbids; ``tests/test_exercises.py`` proves that every one of them is rejected with its
own hint. The last ordinary case of each exercise is the first case's twin (its sizes, new values).
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ...ffn import FeedForward
from ...multihead import MultiHeadAttention
from ...norm import LayerNorm
from .._core import Case, Exercise, Forbidden, Mistake, randn as _randn
from .warmup_schedule import WARMUP_LR, check_warmup_lr  # noqa: F401  (check_warmup_lr: the chapter's)


# ---- 练习 1: LayerNorm by hand --------------------------------------------------------------
# The cases use a large eps (0.1 to 0.5) so that where eps sits makes a visible difference.

LARGE_MEAN_NOTE = "这一组输入的均值约为 1e4、波动只有 1 左右：方差要先减去均值再平方，否则相减抵消会吃掉全部精度"


def _layer_norm_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(11)
    dims = [(2, 3, 5, 0.1), (1, 4, 8, 0.25), (3, 2, 6, 0.5), (2, 3, 5, 0.1)]  # (B, T, C, eps); the first's twin
    cases: list[tuple | Case] = [(3 + 2 * _randn(g, b, t, c), 1 + _randn(g, c), _randn(g, c), eps)
                                 for b, t, c, eps in dims]
    # A mean of 10^4 and a spread of ~1, on a grid of 1/16 (C = 16): every value, sum and centred square
    # is exact in float32, so a two-pass variance is exact, while E[x²] − E[x]² subtracts two numbers
    # near 10^8, where float32 steps by 8.
    x = 10_000 + torch.randint(-24, 25, (3, 4, 16), generator=g) / 16
    return cases + [Case((x, 1 + _randn(g, 16), _randn(g, 16), 0.1), note=LARGE_MEAN_NOTE)]


def _naive_ln(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = (x * x).mean(dim=-1, keepdim=True) - mean * mean  # E[x²] − E[x]²: cancels catastrophically
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _unbiased(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=True)  # divides by C − 1
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _across_tokens(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    mean = x.mean(dim=-2, keepdim=True)  # (B, 1, C): over the T tokens, not the C features
    var = x.var(dim=-2, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _eps_outside(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / (torch.sqrt(var) + eps) * weight + bias  # eps outside the root


def _x_hat(x: Tensor, eps: float) -> Tensor:
    """The normalised x, before the weight and bias: (B, T, C)."""
    return (x - x.mean(dim=-1, keepdim=True)) / torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps)


def _course_ln(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    norm = LayerNorm(x.shape[-1], eps=eps)  # the course package's
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
    return norm(x)


def _layer_norm_reference(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    mean = x.mean(dim=-1, keepdim=True)  # (B, T, 1): over each token's C features
    var = x.var(dim=-1, keepdim=True, unbiased=False)  # the biased variance, two-pass
    return (x - mean) / torch.sqrt(var + eps) * weight + bias  # (B, T, C)


LAYER_NORM = Exercise(
    name="layer_norm",
    reference=_layer_norm_reference,
    make_cases=_layer_norm_cases,
    mistakes=(
        Mistake("方差用了无偏估计（除以 C−1，x.var() 的默认值）；"
                "LayerNorm 用有偏方差：x.var(dim=-1, unbiased=False)。",
                _unbiased),
        Mistake("统计量算错了维度：LayerNorm 对每个 token 自己的 C 个特征（最后一维，dim=-1）求均值和方差，"
                "不跨 token。",
                _across_tokens),
        Mistake("eps 应加在根号里面：sqrt(var + eps)，而不是 sqrt(var) + eps。",
                _eps_outside),
        Mistake("没有减去均值：这是 RMSNorm 的做法。LayerNorm 先减均值 μ，再除以 sqrt(var + eps)。",
                lambda x, w, b, eps: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w + b),
        Mistake("忘了可学习的缩放 weight（γ）和平移 bias（β）：归一化之后还要乘 weight、加 bias。",
                lambda x, w, b, eps: _x_hat(x, eps)),
        Mistake("顺序不对：应先乘 weight 再加 bias（x̂ · γ + β），你算的是 (x̂ + β) · γ。",
                lambda x, w, b, eps: (_x_hat(x, eps) + b) * w),
        Mistake("数值不稳定：均值很大（约 1e4）而波动很小时，E[x²] − E[x]² 是两个约 1e8 的数相减，"
                "float32 在那里的间隔是 8，方差只剩噪声（甚至成了负数）。"
                "先减去均值再平方：((x − μ)²).mean()，或 x.var(unbiased=False)。",
                _naive_ln),
    ),
    forbidden=(
        Forbidden("本题要求用 mean、var、sqrt 等基本运算手写 LayerNorm，"
                  "不要调用 torch.nn.functional.layer_norm（或 nn.LayerNorm）",
                  functions=(F.layer_norm, torch.layer_norm, torch.native_layer_norm, F.group_norm, F.instance_norm),
                  example=lambda x, w, b, eps: F.layer_norm(x, (x.shape[-1],), w, b, eps)),
        Forbidden("本题要求手写 LayerNorm，不要调用课程包（tc.LayerNorm）",
                  course=True, example=lambda x, w, b, eps: _course_ln(x, w, b, eps)),
    ),
)
check_layer_norm = LAYER_NORM.check


# ---- 练习 2: RMSNorm by hand ----------------------------------------------------------------

def _rms_norm_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(12)
    dims = [(2, 5, 4, 0.1), (3, 2, 7, 0.3), (1, 6, 9, 0.2), (2, 5, 4, 0.1)]  # (B, T, C, eps); the first's twin
    return [(1 + 2 * _randn(g, b, t, c), 1 + _randn(g, c), eps) for b, t, c, eps in dims]


def _rms_norm_reference(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def _rms_of_centred(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    centred = x - x.mean(dim=-1, keepdim=True)  # LayerNorm's first step, not RMSNorm's
    return centred / torch.sqrt(centred.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


RMS_NORM = Exercise(
    name="rms_norm",
    reference=_rms_norm_reference,
    make_cases=_rms_norm_cases,
    mistakes=(
        Mistake("RMSNorm 不减均值：直接用 x 除以均方根 sqrt(mean(x²) + eps)，你先减去了均值（那是 LayerNorm）。",
                _rms_of_centred),
        Mistake("应除以均方根 sqrt(mean(x²) + eps)：你用了平方和（没有除以特征数 C）。",
                lambda x, w, eps: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w),
        Mistake("RMSNorm 除以的是均方根 sqrt(mean(x²) + eps)，不是标准差 x.std()。",
                lambda x, w, eps: x / (x.std(-1, keepdim=True) + eps) * w),
        Mistake("eps 应加在根号里面：sqrt(mean(x²) + eps)，而不是 sqrt(mean(x²)) + eps。",
                lambda x, w, eps: x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + eps) * w),
        Mistake("忘了乘可学习的缩放 weight（γ）。",
                lambda x, w, eps: x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)),
        Mistake("均值的分母差了一：mean(x²) 是平方和除以 C，你除以的是 C − 1。",
                lambda x, w, eps: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - 1) + eps) * w),
    ),
)
check_rms_norm = RMS_NORM.check


# ---- 练习 3: a pre-LN block from its parts ---------------------------------------------------

_Sublayer = Callable[[Tensor], Tensor]  # the attention, the FFN or a norm: (B, T, C) -> (B, T, C)

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
    for b, t, c, h in [(2, 3, 8, 2), (1, 5, 12, 3), (3, 4, 6, 1), (2, 3, 8, 2)]:  # (B, T, C, heads); twin
        mha = _randomise(MultiHeadAttention(c, h), g)
        ffn = _randomise(FeedForward(c, 2 * c + 4), g)
        norm1, norm2 = _randomise(LayerNorm(c), g), _randomise(LayerNorm(c), g)

        def attn(x: Tensor, mha: MultiHeadAttention = mha) -> Tensor:
            return mha(x)[0]  # (B, T, C)

        cases.append((3 * _randn(g, b, t, c), attn, ffn, norm1, norm2))
    return cases


def _block_reference(x: Tensor, attn: _Sublayer, ffn: _Sublayer, norm1: _Sublayer, norm2: _Sublayer) -> Tensor:
    with torch.no_grad():
        x = x + attn(norm1(x))  # (B, T, C)
        return x + ffn(norm2(x))


def _post_ln(x: Tensor, attn: _Sublayer, ffn: _Sublayer, norm1: _Sublayer, norm2: _Sublayer) -> Tensor:
    x = norm1(x + attn(x))  # the norm after the residual sum
    return norm2(x + ffn(x))


def _normalised_residual(x: Tensor, attn: _Sublayer, ffn: _Sublayer, norm1: _Sublayer, norm2: _Sublayer) -> Tensor:
    h = norm1(x)
    x = h + attn(h)  # the residual carries norm1(x), not x
    h = norm2(x)
    return h + ffn(h)


def _no_ffn_residual(x: Tensor, attn: _Sublayer, ffn: _Sublayer, norm1: _Sublayer, norm2: _Sublayer) -> Tensor:
    x = x + attn(norm1(x))
    return ffn(norm2(x))  # no "x +"


def _norms_swapped(x: Tensor, attn: _Sublayer, ffn: _Sublayer, norm1: _Sublayer, norm2: _Sublayer) -> Tensor:
    x = x + attn(norm2(x))  # norm2 before the attention, norm1 before the FFN
    return x + ffn(norm1(x))


def _ffn_first(x: Tensor, attn: _Sublayer, ffn: _Sublayer, norm1: _Sublayer, norm2: _Sublayer) -> Tensor:
    x = x + ffn(norm1(x))  # the FFN before the attention
    return x + attn(norm2(x))


PRE_LN_BLOCK = Exercise(
    name="pre_ln_block",
    reference=_block_reference,
    make_cases=_block_cases,
    reference_dtype=None,  # the parts are float32 modules
    mistakes=(
        Mistake("这是 Post-LN（原始 Transformer）：norm(x + f(x))。Pre-LN 是 x + f(norm(x))，残差路径上不做归一化。",
                _post_ln),
        Mistake("残差加回的应是未归一化的 x：x + attn(norm1(x))，而不是 norm1(x) + attn(norm1(x))。",
                _normalised_residual),
        Mistake("FFN 外面也要有残差连接：x + ffn(norm2(x))。",
                _no_ffn_residual),
        Mistake("两个子层各有自己的 LayerNorm：注意力之前用 norm1，FFN 之前用 norm2，你把它们用反了。",
                _norms_swapped),
        Mistake("顺序反了：先注意力（token 之间交换信息），再 FFN（每个 token 各自变换）。",
                _ffn_first),
    ),
)
check_pre_ln_block = PRE_LN_BLOCK.check

# ---- 练习 4: a warm-up schedule: its own module ----------------------------------------


EXERCISES = (LAYER_NORM, RMS_NORM, PRE_LN_BLOCK, WARMUP_LR)
