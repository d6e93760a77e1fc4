"""Numerically naive versions of softmax and log-softmax, and the Chinese hints and notes of the cases
of large magnitude that expose them (scores in the hundreds, logits in the thousands)."""
from __future__ import annotations

import torch
from torch import Tensor

LARGE_ATOL = 2e-3  # scores in the hundreds: float32 rounds them to ~1e-5, and softmax passes that on
LARGE_NOTE = ("这一组的分数很大（数百）：直接对分数取 exp 会溢出成 inf，"
              "softmax 要先减去每行的最大值（torch.softmax 会替你做）")
NAIVE_HINT = ("数值不稳定：分数很大时 exp(scores) 溢出成 inf，inf / inf = NaN。softmax 要先减去每行的最大值，"
              "exp(s − max) / Σ exp(s − max)，或直接用 torch.softmax。")

BIG_LOGITS_NOTE = ("这一组的 logits 在数千的量级：先 softmax 再取 log 会得到 log(0) = -inf，"
                   "直接 exp 会溢出成 inf；要用 log_softmax（或 F.cross_entropy）")
LOG_OF_SOFTMAX_HINT = ("数值不稳定：logits 很大时 softmax 会把目标的概率下溢成 0，log(0) = −inf，损失成了 inf。"
                       "用 torch.log_softmax（或 F.cross_entropy）直接求对数概率。")
NAIVE_LSE_HINT = ("数值不稳定：log Σ exp(z) 里的 exp(z) 在 logits 很大时溢出成 inf。"
                  "先减去最大值：m + log Σ exp(z − m)，或直接用 torch.logsumexp / torch.log_softmax。")


def naive_softmax(scores: Tensor, dim: int = -1) -> Tensor:
    """softmax without subtracting the max: overflows to inf (then NaN) once a score passes ~88 in float32."""
    e = scores.exp()
    return e / e.sum(dim=dim, keepdim=True)


def naive_log_softmax(logits: Tensor) -> Tensor:
    """log of the softmax: -inf where a probability underflows to 0."""
    return torch.softmax(logits, dim=-1).log()


def overflowing_log_softmax(logits: Tensor) -> Tensor:
    """logits - log Σ exp(logits) without subtracting the max: exp overflows to inf."""
    return logits - logits.exp().sum(dim=-1, keepdim=True).log()
