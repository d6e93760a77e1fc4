"""Checkers for chapter 16 (RoPE 外推、批量生成与混合专家).

Each exercise lists the typical mistakes it recognises and forbids the shortcut its statement rules out
(练习 1 RoPE's angles under scaling, 练习 2 the attention mask of a padded batch, 练习 3 the load-balancing
loss, whose gradient is checked too);
``tests/test_exercises.py`` proves that every one of them is rejected with its own hint. The references are
written out by hand (float64) and share no code with their mistakes. The last ordinary case of each
exercise is an earlier case's twin (its sizes, other values).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .. import attention as course_attention
from .. import moe as course_moe
from .. import positional as course_positional
from ..config import RopeScaling
from ._core import Case, Exercise, Forbidden, Mistake
from ._stability import naive_softmax

_F64 = torch.float64


# ---- 练习 1: RoPE's angles after position interpolation or NTK-aware scaling ------------------

def _freq_cases() -> list[tuple]:
    # (positions, d_head, base, factor, kind). Positions from 0, shuffled with gaps up to 500 (as a
    # model read at 4L or 16L); both kinds on the same sizes; d_head 6 (exponent d/(d-2) = 1.5) and 4
    # (= 2), where a wrong exponent shows most; a large head (128) and base (500000) as in recent models;
    # factor 1 (nothing changes); one position; the last is the first's twin (its sizes and numbers, other
    # positions).
    return [
        (torch.arange(5), 8, 10000.0, 2.0, "ntk"),
        (torch.arange(5), 8, 10000.0, 2.0, "linear"),
        (torch.tensor([417, 0, 36, 251, 9, 128, 3]), 16, 500000.0, 4.0, "ntk"),
        (torch.tensor([40, 7, 300, 0]), 4, 100.0, 8.0, "ntk"),
        (torch.tensor([2, 500, 77, 0, 131, 64]), 6, 10000.0, 3.0, "linear"),
        (torch.tensor([11, 0, 250]), 6, 1000.0, 3.0, "ntk"),
        (torch.tensor([480, 0, 96, 33, 1, 255, 129, 64, 8]), 128, 10000.0, 16.0, "ntk"),
        (torch.tensor([5, 301, 0, 42]), 12, 10000.0, 1.0, "ntk"),
        (torch.tensor([0]), 10, 10000.0, 2.0, "linear"),
        (torch.tensor([90, 3, 0, 412, 17]), 8, 10000.0, 2.0, "ntk"),
    ]


def _freq_reference(positions: Tensor, d_head: int, base: float, factor: float, kind: str) -> Tensor:
    exponents = torch.arange(0, d_head, 2, dtype=_F64) / d_head  # (d/2,): 2i/d
    if kind == "linear":
        inv_freq = base ** -exponents / factor  # every frequency divided by the factor
    else:
        inv_freq = (base * factor ** (d_head / (d_head - 2))) ** -exponents  # NTK-aware: a larger base
    return positions.to(_F64)[:, None] * inv_freq[None, :]  # (T, d/2): p · ω'_i


def _omega(d_head: int, base: float) -> Tensor:
    return base ** -(torch.arange(0, d_head, 2, dtype=_F64) / d_head)  # (d/2,) the unscaled frequencies


def _angles(positions: Tensor, inv_freq: Tensor) -> Tensor:
    return positions.to(_F64)[:, None] * inv_freq[None, :]  # (T, d/2)


def _ntk_or(linear_fn, ntk_base_fn):
    """A whole attempt from its two branches: the frequencies ``linear_fn(d, base, s)`` and the NTK base
    ``ntk_base_fn(d, base, s)``; the angles are the true positions times them."""
    def attempt(p: Tensor, d: int, base: float, s: float, kind: str) -> Tensor:
        return _angles(p, linear_fn(d, base, s) if kind == "linear" else _omega(d, ntk_base_fn(d, base, s)))
    return attempt


def _ntk_base(d: int, b: float, s: float) -> float:
    return b * s ** (d / (d - 2))


def _scaled(d: int, b: float, s: float, kind: str) -> Tensor:
    return _omega(d, b) / s if kind == "linear" else _omega(d, _ntk_base(d, b, s))  # (d/2,) the right frequencies


FREQS = Exercise(
    name="scaled_rope_angles",
    reference=_freq_reference,
    make_cases=_freq_cases,
    atol=1e-3,  # angles up to a few hundred radians: float32 keeps them to ~3e-5
    mistakes=(
        Mistake("位置插值（linear）要把每个频率 **除以** factor（相当于把位置 p 换成 p / factor），你乘上了它。",
                _ntk_or(lambda d, b, s: _omega(d, b) * s, _ntk_base)),
        Mistake("NTK 的新底数是 base · factor^(d/(d−2))，你只乘了 factor：那样最慢的频率只被除以 "
                "factor^((d−2)/d)，还不到 factor。",
                _ntk_or(lambda d, b, s: _omega(d, b) / s, lambda d, b, s: b * s)),
        Mistake("NTK 的指数写反了：新底数是 base · factor^(d/(d−2))，不是 factor^((d−2)/d)；"
                "要让最慢的一对（指数 (d−2)/d）恰好被除以 factor。",
                _ntk_or(lambda d, b, s: _omega(d, b) / s, lambda d, b, s: b * s ** ((d - 2) / d))),
        Mistake("两种缩放叠在了一起：kind = \"ntk\" 只改底数，不再把频率除以 factor；kind = \"linear\" 才除。",
                lambda p, d, b, s, kind: _angles(p, _omega(d, b if kind == "linear" else _ntk_base(d, b, s)) / s)),
        Mistake("频率的指数不对：第 i 对的频率是 base^(−2i/d)，你用的是 base^(−i/d)。",
                lambda p, d, b, s, kind: _angles(
                    p, (b if kind == "linear" else _ntk_base(d, b, s)) ** -(torch.arange(d // 2, dtype=_F64) / d)
                    / (s if kind == "linear" else 1.0))),
        Mistake("频率的个数不对：d_head 维分成 d_head/2 对，每一对一个频率，所以结果是 (T, d_head/2)。",
                lambda p, d, b, s, kind: _angles(
                    p, (b if kind == "linear" else _ntk_base(d, b, s)) ** -(torch.arange(d, dtype=_F64) * 2 / d)
                    / (s if kind == "linear" else 1.0))),
        Mistake("用了 0..T−1 而不是传入的 positions：位置不一定从 0 开始，也不一定连续。",
                lambda p, d, b, s, kind: _angles(torch.arange(len(p)), _scaled(d, b, s, kind))),
        Mistake("位置差了一：第 t 行是位置 positions[t] 的角度，不要加 1。",
                lambda p, d, b, s, kind: _angles(p + 1, _scaled(d, b, s, kind))),
    ),
    forbidden=(
        Forbidden("本题要求用 torch 的基本运算按公式算出角度，不要调用课程包"
                  "（positional.scaled_inverse_frequencies、inverse_frequencies、tc.RopeScaling 等）",
                  course=True,
                  example=lambda p, d, b, s, kind: p.double()[:, None] * course_positional.scaled_inverse_frequencies(
                      d, base=b, scaling=RopeScaling(kind, s))[0].double()),
    ),
)
check_scaled_rope_angles = FREQS.check


# ---- 练习 2: the attention mask of a padded batch, causal and never an empty row --------------------

def _padding(rows: list[list[int]]) -> Tensor:
    return torch.tensor(rows, dtype=torch.long)  # (B, Tk) 1 real, 0 padding


def _batch_mask_cases() -> list[tuple]:
    # (attention_mask (B, Tk), t_new): padding on the left, on the right, in the middle, none, and a row
    # that is padding only; t_new = Tk (the prompt), 1 (a decoding step) and in between; B, Tk and t_new
    # differ in every case; the last is the first's twin (its sizes, other padding).
    return [
        (_padding([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1]]), 6),
        (_padding([[0, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]]), 1),
        (_padding([[1, 1, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0], [0, 1, 0, 1, 1, 0, 1]]), 3),
        (_padding([[0, 0, 0, 1, 1], [1, 1, 1, 1, 0]]), 5),
        (_padding([[1, 0, 1, 1]]), 2),
        (_padding([[0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]]), 6),
    ]


def _columns(attention_mask: Tensor, t_new: int) -> tuple[Tensor, Tensor]:
    """Key columns (Tk,) and the columns of the last t_new queries (t_new,)."""
    t_k = attention_mask.shape[1]
    return torch.arange(t_k), torch.arange(t_k - t_new, t_k)


def _batch_mask_reference(attention_mask: Tensor, t_new: int) -> Tensor:
    keys, queries = _columns(attention_mask, t_new)
    real = attention_mask.bool()  # (B, Tk)
    causal = keys[None, :] <= queries[:, None]  # (t_new, Tk): itself and the columns on its left
    sees = real[:, None, :] | ~real[:, queries, None]  # (B, t_new, Tk): real keys; a padding query, any
    return causal & sees


def _causal_without_offset(attention_mask: Tensor, t_new: int) -> Tensor:
    """The right padding rule, with the causal mask's first new query at column 0 (a tril without the offset)."""
    keys, queries = _columns(attention_mask, t_new)
    real = attention_mask.bool()
    causal = keys[None, :] <= torch.arange(t_new)[:, None]
    return causal & (real[:, None, :] | ~real[:, queries, None])


def _batch_mask_with(sees: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Tensor, int], Tensor]:
    """The right causal mask with another padding rule ``sees(real (B, Tk), query columns) -> (B, t_new, Tk)``."""
    def attempt(attention_mask: Tensor, t_new: int) -> Tensor:
        keys, queries = _columns(attention_mask, t_new)
        return (keys[None, :] <= queries[:, None]) & sees(attention_mask.bool(), queries)
    return attempt


BATCH_MASK = Exercise(
    name="padded_causal_mask",
    reference=_batch_mask_reference,
    make_cases=_batch_mask_cases,
    mistakes=(
        Mistake("因果掩码的起点不对：这次算的是最后 t_new 个位置，第 i 个新查询在第 Tk − t_new + i 列，"
                "可以看到它左边的全部列；你把它放在了第 i 列（tril 要带 diagonal=Tk − t_new）。",
                _causal_without_offset),
        Mistake("没有因果掩码：查询只能看它自己和它左边的列，右边的是未来。",
                lambda m, t_new: m.bool()[:, None, :] | ~m.bool()[:, -t_new:, None]),
        Mistake("真实 token 的查询看到了填充位置上的键：要把这些键（attention_mask 为 0 的列）遮住。",
                _batch_mask_with(lambda real, q: torch.ones_like(real)[:, None, :].expand(-1, len(q), -1))),
        Mistake("填充位置上的查询什么也看不到：这一行全是 False，softmax 会得到 NaN。"
                "让填充位置上的查询可以看它左边（含自己）的任何键，它的输出反正没人用。",
                _batch_mask_with(lambda real, q: real[:, None, :].expand(-1, len(q), -1))),
        Mistake("填充掩码加在了查询（行）上，而不是键（列）上：要遮住的是真实 token 去看填充位置上的 **键**。",
                _batch_mask_with(lambda real, q: real[:, q, None].expand(-1, -1, real.shape[1]))),
        Mistake("查询是不是填充，要看它们自己所在的列：新的查询是 attention_mask 的 **最后** t_new 列，"
                "你取了前 t_new 列。",
                _batch_mask_with(lambda real, q: real[:, None, :] | ~real[:, : len(q), None])),
    ),
    forbidden=(
        Forbidden("本题要求自己用比较和逻辑运算拼出掩码，不要调用课程包（tc.causal_mask、模型的 forward 等）",
                  course=True, example=lambda m, t_new: course_attention.causal_mask(t_new, m.shape[1])
                  & (m.bool()[:, None, :] | ~m.bool()[:, -t_new:, None])),
        Forbidden("本题要求不用循环：用广播一次算出整批的掩码，不要逐行或逐个查询处理",
                  loops=True, example=lambda m, t_new: torch.stack([_batch_mask_reference(row[None], t_new)[0]
                                                                     for row in m])),
    ),
)
check_padded_causal_mask = BATCH_MASK.check


# ---- 练习 3: the load-balancing loss -------------------------------------------------------------

def _balance_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(16)
    cases: list[tuple | Case] = []
    for n, e, k in ((12, 4, 2), (7, 6, 1), (20, 8, 3), (1, 3, 1), (9, 5, 5)):  # (N, E, k); N = 1; k = E
        logits = torch.randn(n, e, generator=g) * 1.5
        cases.append((logits, logits.topk(k, dim=-1).indices))
    collapsed = torch.zeros(10, 4)  # every token sure of expert 2: the loss is E
    collapsed[:, 2] = 60.0
    cases.append((collapsed, torch.full((10, 1), 2)))
    balanced = torch.zeros(8, 4)  # uniform probabilities, two tokens per expert: the loss is 1
    cases.append((balanced, torch.tensor([[0], [1], [2], [3], [3], [2], [1], [0]])))
    big = torch.randn(6, 5, generator=g) * 2000.0  # logits in the thousands
    cases.append(Case((big, big.topk(2, dim=-1).indices), atol=1e-4,
                      note="这一组的 router logits 在数千的量级：直接 exp 会溢出成 inf，要用 torch.softmax"))
    logits = torch.randn(12, 4, generator=g) * 1.5  # the first case's twin
    cases.append((logits, logits.topk(2, dim=-1).indices))
    return cases


def _balance_reference(router_logits: Tensor, chosen: Tensor) -> Tensor:
    n_experts = router_logits.shape[1]
    counts = torch.zeros(n_experts, dtype=router_logits.dtype)
    counts.index_add_(0, chosen.flatten(), torch.ones(chosen.numel(), dtype=router_logits.dtype))
    share = counts / chosen.numel()  # (E,) f_e: share of the N·k assignments
    probability = torch.softmax(router_logits, dim=-1).mean(dim=0)  # (E,) P_e: mean router probability
    return n_experts * (share * probability).sum()  # ()


def _assignments(chosen: Tensor, n_experts: int, dtype: torch.dtype) -> Tensor:
    return torch.bincount(chosen.flatten(), minlength=n_experts).to(dtype)  # (E,) tokens per expert


BALANCE = Exercise(
    name="load_balancing_loss",
    reference=_balance_reference,
    make_cases=_balance_cases,
    grad=True,  # the router learns through this loss
    mistakes=(
        Mistake("少了因子 E（专家数）：Σ f·P 在均衡时是 1/E，乘上 E 才让均衡时的损失是 1、全部塌到一个专家时是 E，"
                "与专家数无关地好比较。",
                lambda lg, ch: (_assignments(ch, lg.shape[1], lg.dtype) / ch.numel()
                                * lg.softmax(-1).mean(0)).sum()),
        Mistake("f 要数真实的分配（每个专家被选中的次数 / (N·k)），你用了概率 P 代替 f，得到 E·Σ P²："
                "它看不到 top-k 实际把 token 送到了哪里。",
                lambda lg, ch: lg.shape[1] * (lg.softmax(-1).mean(0) ** 2).sum()),
        Mistake("f 的分母不对：每个 token 选 k 个专家，一共 N·k 次分配，要除以 N·k（chosen.numel()），不是 N。",
                lambda lg, ch: lg.shape[1] * (_assignments(ch, lg.shape[1], lg.dtype) / ch.shape[0]
                                              * lg.softmax(-1).mean(0)).sum()),
        Mistake("softmax 的维度不对：每个 token 在 E 个专家上的概率要在最后一维（dim=-1）上归一化，"
                "你在 token 维上做了。",
                lambda lg, ch: lg.shape[1] * (_assignments(ch, lg.shape[1], lg.dtype) / ch.numel()
                                              * lg.softmax(0).mean(0)).sum()),
        Mistake("P 要用 router 的概率（softmax 之后）在 token 上的平均，你直接平均了 logits。",
                lambda lg, ch: lg.shape[1] * (_assignments(ch, lg.shape[1], lg.dtype) / ch.numel()
                                              * lg.mean(0)).sum()),
        Mistake("数值不稳定：logits 很大时 exp(logits) 溢出成 inf，inf / inf = NaN。softmax 要先减去每行的最大值，"
                "或直接用 torch.softmax。",
                lambda lg, ch: lg.shape[1] * (_assignments(ch, lg.shape[1], lg.dtype) / ch.numel()
                                              * naive_softmax(lg).mean(0)).sum()),
    ),
    forbidden=(
        Forbidden("本题要求自己按公式 E·Σ f·P 算出损失，不要调用课程包（tc.load_balancing_loss、tc.MoEFeedForward）",
                  course=True, example=lambda lg, ch: course_moe.load_balancing_loss(lg, ch)),
    ),
)
check_load_balancing_loss = BALANCE.check

EXERCISES = (FREQS, BATCH_MASK, BALANCE)
