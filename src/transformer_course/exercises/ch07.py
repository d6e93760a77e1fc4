"""Checkers for chapter 7 (前馈网络 FFN).

Each exercise lists the typical mistakes it recognises; ``tests/test_exercises.py`` proves that
every one of them is rejected with its own hint. The last case of each exercise is the first
case's twin (its sizes, new values); silencing also meets the first and the last neuron, a neuron
listed twice and an empty list.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from ._core import Exercise, Mistake, randn as _randn



# ---- 练习 1: the position-wise FFN with GELU ------------------------------------------------

def _ffn_cases() -> list[tuple[Tensor, ...]]:
    g = torch.Generator().manual_seed(7)
    dims = [(2, 3, 4, 16), (1, 5, 6, 24), (3, 2, 8, 12), (2, 3, 4, 16)]  # (B, T, C, d_ff): all differ; twin
    return [
        (_randn(g, b, t, c), _randn(g, c, f) / c**0.5, _randn(g, f), _randn(g, f, c) / f**0.5, _randn(g, c))
        for b, t, c, f in dims
    ]


def _ffn_reference(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    return F.gelu(x @ w1 + b1) @ w2 + b2  # (B, T, d_ff): expand, exact GELU; then (B, T, C): compress


def _sigmoid_gelu(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    h = x @ w1 + b1  # (B, T, d_ff)
    return (h * torch.sigmoid(1.702 * h)) @ w2 + b2  # x·σ(1.702x), not x·Φ(x)


FFN = Exercise(
    name="ffn",
    reference=_ffn_reference,
    make_cases=_ffn_cases,
    mistakes=(
        Mistake("缺少激活函数：没有 σ，两层线性变换合起来仍然只是一个线性变换。",
                lambda x, w1, b1, w2, b2: (x @ w1 + b1) @ w2 + b2),
        Mistake("激活函数用错了：本题要求 GELU（F.gelu），你用的是 ReLU。",
                lambda x, w1, b1, w2, b2: F.relu(x @ w1 + b1) @ w2 + b2),
        Mistake("GELU 用了 tanh 近似（GPT-2 的写法）；本题要求精确版本 F.gelu(h)，即 approximate='none'。",
                lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2),
        Mistake("第二层之后不要再加激活：FFN 是 W2·σ(W1·x + b1) + b2，σ 只在升维之后用一次。",
                lambda x, w1, b1, w2, b2: F.gelu(F.gelu(x @ w1 + b1) @ w2 + b2)),
        Mistake("忘了第一层的偏置 b1：σ 的输入是 x @ w1 + b1。",
                lambda x, w1, b1, w2, b2: F.gelu(x @ w1) @ w2 + b2),
        Mistake("忘了第二层的偏置 b2：输出是 GELU(x @ w1 + b1) @ w2 + b2。",
                lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1) @ w2),
        Mistake("GELU 用了 sigmoid 近似 x·σ(1.702x)；"
                "本题要求精确版本 F.gelu(h)（x·Φ(x)，Φ 是标准正态分布的累积分布函数）。",
                _sigmoid_gelu),
    ),
)
check_ffn = FFN.check


# ---- 练习 2: SwiGLU ----------------------------------------------------------------------------

def _swiglu_cases() -> list[tuple[Tensor, ...]]:
    g = torch.Generator().manual_seed(8)
    dims = [(2, 3, 4, 10), (1, 6, 8, 12), (3, 4, 6, 16), (2, 3, 4, 10)]  # (B, T, C, d_ff); the first's twin
    return [
        (_randn(g, b, t, c), _randn(g, c, f) / c**0.5, _randn(g, c, f) / c**0.5, _randn(g, f, c) / f**0.5)
        for b, t, c, f in dims
    ]


def _swiglu_reference(x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor) -> Tensor:
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down  # (B, T, d_ff) gated, then (B, T, C)


SWIGLU = Exercise(
    name="swiglu",
    reference=_swiglu_reference,
    make_cases=_swiglu_cases,
    mistakes=(
        Mistake("门控分支与数值分支弄反了：SiLU 应作用在 x @ w_gate 上，x @ w_up 保持线性。",
                lambda x, wg, wu, wd: (F.silu(x @ wu) * (x @ wg)) @ wd),
        Mistake("门用的是 sigmoid（这是最初的 GLU）；SwiGLU 的门是 SiLU：silu(g) = g · sigmoid(g)。",
                lambda x, wg, wu, wd: (torch.sigmoid(x @ wg) * (x @ wu)) @ wd),
        Mistake("SiLU 只作用在门控分支上，不要作用在两个分支的乘积上。",
                lambda x, wg, wu, wd: F.silu((x @ wg) * (x @ wu)) @ wd),
        Mistake("两个分支应逐元素相乘（门控：门决定放行多少），而不是相加。",
                lambda x, wg, wu, wd: (F.silu(x @ wg) + (x @ wu)) @ wd),
        Mistake("没有用到 w_up：SwiGLU 是 silu(x @ w_gate) 与 x @ w_up 逐元素相乘，再乘 w_down。",
                lambda x, wg, wu, wd: F.silu(x @ wg) @ wd),
    ),
)
check_swiglu = SWIGLU.check


# ---- 练习 3: silence hidden neurons of a ReLU FFN ---------------------------------------------

def _silence_cases() -> list[tuple[Tensor, ...]]:
    g = torch.Generator().manual_seed(9)
    cases = []
    for n, c, f, k in [(5, 6, 16, 3), (3, 8, 12, 2), (7, 5, 20, 4), (5, 6, 16, 3)]:  # (N, C, d_ff, silenced); twin
        neurons = torch.randperm(c, generator=g)[:k]  # (k,) indices below C and d_ff
        cases.append((_randn(g, n, c), _randn(g, c, f) / c**0.5, _randn(g, f).abs() + 0.1,
                      _randn(g, f, c) / f**0.5, _randn(g, c), neurons))
    # edges: the first and the last neuron (beyond C), one listed twice; then no neuron at all
    for n, c, f, neurons in [(4, 3, 10, torch.tensor([9, 0, 9])), (2, 4, 6, torch.tensor([], dtype=torch.long))]:
        cases.append((_randn(g, n, c), _randn(g, c, f) / c**0.5, _randn(g, f).abs() + 0.1,
                      _randn(g, f, c) / f**0.5, _randn(g, c), neurons))
    return cases


def _silence_reference(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, neurons: Tensor) -> Tensor:
    h = torch.relu(x @ w1 + b1)  # (N, d_ff)
    keep = torch.ones(h.shape[-1], dtype=h.dtype, device=h.device)
    keep[neurons] = 0.0
    return (h * keep) @ w2 + b2  # (N, C)


# The mistakes: the hidden ReLU activations (``_relu_hidden``), then the wrong thing silenced.
def _relu_hidden(x: Tensor, w1: Tensor, b1: Tensor) -> Tensor:
    return torch.relu(x @ w1 + b1)  # (N, d_ff)


def _columns_only(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, neurons: Tensor) -> Tensor:
    w1 = w1.clone()
    w1[:, neurons] = 0.0  # the bias still feeds these neurons
    return _relu_hidden(x, w1, b1) @ w2 + b2


def _input_dims(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, neurons: Tensor) -> Tensor:
    x = x.clone()
    x[:, neurons] = 0.0
    return _relu_hidden(x, w1, b1) @ w2 + b2


def _output_dims(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, neurons: Tensor) -> Tensor:
    out = _relu_hidden(x, w1, b1) @ w2 + b2
    out[:, neurons] = 0.0
    return out


def _inverted(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, neurons: Tensor) -> Tensor:
    h = _relu_hidden(x, w1, b1)
    only = torch.zeros(h.shape[-1], dtype=h.dtype)
    only[neurons] = 1.0
    return (h * only) @ w2 + b2


def _shifted_by_one(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, neurons: Tensor) -> Tensor:
    h = _relu_hidden(x, w1, b1)
    keep = torch.ones(h.shape[-1], dtype=h.dtype)
    keep[neurons + 1] = 0.0  # neuron i + 1 silenced instead of neuron i
    return (h * keep) @ w2 + b2


SILENCE = Exercise(
    name="silence_neurons",
    reference=_silence_reference,
    make_cases=_silence_cases,
    mistakes=(
        Mistake("只把 w1 的对应列清零还不够：偏置 b1 仍会让这些神经元激活。要让它们的激活值（ReLU 之后）为 0。",
                _columns_only),
        Mistake("你清零的是输入 x 的维度；要关掉的是隐藏层（d_ff 维）里的神经元。",
                _input_dims),
        Mistake("你清零的是输出的维度；要关掉的是隐藏层（d_ff 维）里的神经元，输出的每一维都会受影响。",
                _output_dims),
        Mistake("反了：应关掉列出的神经元、保留其余的，而你只保留了列出的那些。",
                _inverted),
        Mistake("下标差了一：neurons 里的数就是隐藏层的下标（从 0 开始），不要加 1。",
                _shifted_by_one),
    ),
)
check_silence_neurons = SILENCE.check

EXERCISES = (FFN, SWIGLU, SILENCE)
