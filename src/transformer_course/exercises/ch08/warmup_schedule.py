"""练习 8.4 (chapter 8): a learning-rate warm-up then cosine decay, vectorised over a tensor of steps.

Its own module to keep ``ch08`` short; ``ch08`` imports ``WARMUP_LR`` and ``check_warmup_lr``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .._core import Exercise, Forbidden, Mistake


# ---- 练习 4: a warm-up schedule -------------------------------------------------------------
# Steps come unsorted, with gaps and repeats; every case holds step 0 and the edges of the two
# phases (warmup_steps - 1, warmup_steps, total_steps), so that each off-by-one shows somewhere.

def _warmup_cases() -> list[tuple]:
    def steps(*s: int) -> Tensor:
        return torch.tensor(s, dtype=torch.int64)

    g = torch.Generator().manual_seed(14)
    long_run = torch.randint(0, 10_001, (11,), generator=g).tolist()
    return [  # (steps (N,), peak_lr, warmup_steps, total_steps)
        (steps(13, 0, 4, 5, 20, 7, 1, 19), 1.0, 5, 20),
        (steps(29, 64, 0, 100, 30, 3, 99, 12, 50, 31, 28, 77), 1e-2, 30, 100),  # the chapter's
        (steps(1, 0, 9, 4, 8), 2.0, 1, 9),                  # warmup_steps = 1: step 0 is the peak
        (steps(3, 4, 2, 0, 1, 3), 0.5, 3, 4),               # a decay of a single step
        (steps(*long_run, 10_000, 499, 0, 500), 0.3, 500, 10_000),
        (steps(0), 0.7, 10, 50),                            # one step, the first
        (steps(2, 17, 6, 10, 3, 15, 20, 0), 1.0, 5, 20),  # the first's twin: new steps
    ]


def _warmup_reference(steps: Tensor, peak_lr: float, warmup_steps: int, total_steps: int) -> Tensor:
    s = steps.double()  # (N,)
    warm = peak_lr * (s + 1) / warmup_steps  # step 0: peak_lr / warmup_steps; step warmup_steps - 1: peak_lr
    progress = (s - warmup_steps) / (total_steps - warmup_steps)  # 0 at the end of the warm-up, 1 at total_steps
    decay = peak_lr * 0.5 * (1 + torch.cos(math.pi * progress))
    return torch.where(s < warmup_steps, warm, decay)  # (N,)


# Pieces the mistakes are written with (each mistake gets the other phase wrong or the boundary).

def _warm(steps: Tensor, peak_lr: float, warmup_steps: int) -> Tensor:
    return peak_lr * (steps.double() + 1) / warmup_steps  # (N,) the statement's warm-up


def _cosine(peak_lr: float, progress: Tensor) -> Tensor:
    return peak_lr * 0.5 * (1 + torch.cos(math.pi * progress))  # peak_lr at progress 0, 0 at progress 1


def _progress(steps: Tensor, warmup_steps: int, total_steps: int) -> Tensor:
    return (steps.double() - warmup_steps) / (total_steps - warmup_steps)  # (N,) 0 after the warm-up, 1 at the end


def _decay(steps: Tensor, peak_lr: float, warmup_steps: int, total_steps: int) -> Tensor:
    return _cosine(peak_lr, _progress(steps, warmup_steps, total_steps))  # the statement's decay


def _warmup_loop(steps, peak_lr, warmup_steps, total_steps):
    out = torch.zeros(len(steps), dtype=torch.float64)
    for i, s in enumerate(steps):
        out[i] = _warmup_reference(s.view(1), peak_lr, warmup_steps, total_steps)
    return out


WARMUP_LR = Exercise(
    name="warmup_lr",
    reference=_warmup_reference,
    make_cases=_warmup_cases,
    atol=1e-6,  # rates up to 2; an answer computed in float32 and cast still passes
    mistakes=(
        Mistake("预热从 0 开始了：第 0 步的学习率是 0，这一步白走了。题目的预热是 peak_lr·(s + 1)/warmup_steps："
                "第 0 步为 peak_lr/warmup_steps，第 warmup_steps − 1 步正好到 peak_lr。",
                lambda s, lr, w, t: torch.where(s < w, lr * s.double() / w, _decay(s, lr, w, t))),
        Mistake("预热和衰减的分界差了一：第 warmup_steps 步已属于余弦衰减（学习率 peak_lr），你仍按预热公式算，"
                "得到了超过 peak_lr 的值。预热阶段是 s < warmup_steps。",
                lambda s, lr, w, t: torch.where(s < w + 1, _warm(s, lr, w), _decay(s, lr, w, t))),
        Mistake("衰减阶段也用了 s + 1：+1 只属于预热（让第 0 步不为 0）；衰减进度是 (s − warmup_steps)/(total_steps − "
                "warmup_steps)，第 warmup_steps 步正好是 peak_lr，第 total_steps 步正好是 0。",
                lambda s, lr, w, t: torch.where(s < w, _warm(s, lr, w), _decay(s + 1, lr, w, t))),
        Mistake("预热之后学习率一直停在 peak_lr：题目要求之后按余弦衰减，到第 total_steps 步降到 0。",
                lambda s, lr, w, t: torch.where(s < w, _warm(s, lr, w), torch.full_like(s, lr, dtype=torch.float64))),
        Mistake("衰减进度应除以衰减阶段的长度 total_steps − warmup_steps，你除以了 total_steps："
                "学习率到第 total_steps 步还没有降到 0。",
                lambda s, lr, w, t: torch.where(s < w, _warm(s, lr, w), _cosine(lr, (s.double() - w) / t))),
        Mistake("衰减进度要从预热结束时算起：(s − warmup_steps)/(total_steps − warmup_steps)；你用了 s/total_steps，"
                "预热一结束学习率就从 peak_lr 往下跳了一截。",
                lambda s, lr, w, t: torch.where(s < w, _warm(s, lr, w), _cosine(lr, s.double() / t))),
        Mistake("衰减用了线性下降 peak_lr·(1 − p)：题目要的是余弦 peak_lr·½·(1 + cos(πp))。",
                lambda s, lr, w, t: torch.where(s < w, _warm(s, lr, w), lr * (1 - _progress(s, w, t)))),
        Mistake("余弦衰减少了 ½·(1 + ·)：peak_lr·cos(πp) 在后半段成了负数；应为 peak_lr·½·(1 + cos(πp))，"
                "从 peak_lr 平滑地降到 0。",
                lambda s, lr, w, t: torch.where(s < w, _warm(s, lr, w), lr * torch.cos(math.pi * _progress(s, w, t)))),
        Mistake("预热用了整除 //：(s + 1) // warmup_steps 在预热的前 warmup_steps − 1 步都是 0；用真除法 /。",
                lambda s, lr, w, t: torch.where(s < w, lr * ((s + 1) // w).double(), _decay(s, lr, w, t))),
    ),
    forbidden=(
        Forbidden("本题要求不用循环：用张量运算（torch.where 分开两个阶段）一次算出全部 steps",
                  loops=True, example=_warmup_loop),
    ),
    dtype=torch.float64,  # the statement asks for float64
)
check_warmup_lr = WARMUP_LR.check
