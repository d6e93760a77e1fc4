"""Checkers for chapter 2 (从文字到向量：token 与 embedding).

Token ids are LongTensors; every answer is a float tensor. Each exercise lists the typical
mistakes it recognises and the shortcuts its statement forbids; ``tests/test_exercises.py`` proves
that every one of them is rejected with its own hint. Every exercise has an edge case (the ids 0 and
``vocab_size - 1``, the shortest input) and a twin (the first case's shapes, new values).
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from ._core import Exercise, Forbidden, Mistake


# ---- 练习 1: BPE's pair counts as a matrix -----------------------------------------------------

def _pair_cases() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(21)
    cases = []
    for n, vocab_size in [(12, 10), (30, 16), (7, 6), (12, 10)]:  # the last: the first's twin
        # ids below vocab_size / 2, and one pair repeated on purpose: counts of 2 and more occur
        ids = torch.randint(0, vocab_size // 2, (n,), generator=g)
        ids[:4] = torch.tensor([1, 2, 1, 2])
        cases.append((ids, vocab_size))
    # the shortest input (one pair), with the first and the last id of the vocabulary
    return cases + [(torch.tensor([8, 0]), 9)]


def _pair_reference(ids: Tensor, vocab_size: int) -> Tensor:
    counts = torch.zeros(vocab_size, vocab_size)  # (V, V): row = left token, column = right token
    return counts.index_put_((ids[:-1], ids[1:]), torch.ones(len(ids) - 1), accumulate=True)


# The mistakes: a wrong choice of pairs counted by ``_count``, or a count that does not add up.
def _count(first: Tensor, second: Tensor, vocab_size: int) -> Tensor:
    """How often ``(first[n], second[n])`` occurs, ``(V, V)``."""
    return torch.zeros(vocab_size, vocab_size).index_put_((first, second), torch.ones(len(first)), accumulate=True)


def _counted_once(ids: Tensor, vocab_size: int) -> Tensor:
    counts = torch.zeros(vocab_size, vocab_size)
    counts[ids[:-1], ids[1:]] += 1  # a repeated pair is written once, not added up
    return counts


PAIR_COUNTS = Exercise(
    name="pair_counts",
    reference=_pair_reference,
    make_cases=_pair_cases,
    mistakes=(
        Mistake("重复出现的 pair 只记了一次：counts[a, b] += 1 遇到重复下标不会累加。"
                "用 index_put_(..., accumulate=True)，或老老实实写循环。",
                _counted_once),
        Mistake("行列反了：counts[a, b] 数的是「a 后面紧跟 b」，行是左边的 token，列是右边的 token。",
                lambda ids, v: _count(ids[1:], ids[:-1], v)),
        Mistake("相邻的 pair 是重叠的：[a, b, c] 里有 (a, b) 和 (b, c) 两对，你按两个一组切开，漏掉了一半。",
                lambda ids, v: _count(ids[:-1:2], ids[1::2], v)),
        Mistake("多数了一对：最后一个 token 后面没有东西，不能和第一个 token 配对（torch.roll 会绕回开头）。",
                lambda ids, v: _count(ids, torch.roll(ids, -1), v)),
        Mistake("漏了最后一对：N 个 token 有 N−1 个相邻对（循环是 range(len(ids) - 1)），"
                "最后一对 (ids[-2], ids[-1]) 也要数。",
                lambda ids, v: _count(ids[:-2], ids[1:-1], v)),
    ),
)
check_pair_counts = PAIR_COUNTS.check


# ---- 练习 2: an embedding lookup is a one-hot vector times the matrix ---------------------------

def _embed_cases() -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(22)
    dims = [(2, 5, 12, 3), (3, 4, 20, 6), (1, 7, 9, 5), (2, 5, 12, 3)]  # (B, T, V, C); the first's twin
    # ids below V / 2, so that the ids + 1 of a typical mistake stay inside the table ...
    cases = [(torch.randint(0, v // 2, (b, t), generator=g), torch.randn(v, c, generator=g)) for b, t, v, c in dims]
    # ... except in the edge case: the first and the last row of the table are looked up
    return cases + [(torch.tensor([[0, 7, 3], [7, 0, 0]]), torch.randn(8, 4, generator=g))]


def _embed_reference(ids: Tensor, weight: Tensor) -> Tensor:
    one_hot = F.one_hot(ids, num_classes=weight.shape[0]).to(weight.dtype)  # (B, T, V)
    return one_hot @ weight  # (B, T, C)


EMBED = Exercise(
    name="embed_onehot",
    reference=_embed_reference,
    make_cases=_embed_cases,
    mistakes=(
        Mistake("取的是第 t 个位置的行，而不是 token_id 那一行：embedding 按 token_id 查表，与位置无关"
                "（位置信息是第 6 章的位置编码另外加上的）。",
                lambda ids, w: w[: ids.shape[1]].expand(ids.shape[0], -1, -1)),
        Mistake("查表本身不缩放：one_hot @ weight 就是答案。原始 Transformer 在 embedding 之后乘 √d_model，"
                "那是模型里另外的一步。",
                lambda ids, w: F.one_hot(ids, num_classes=w.shape[0]).to(w.dtype) @ w * w.shape[1] ** 0.5),
        Mistake("差了一行：token_id 从 0 开始编号，第 i 个 token 对应 weight 的第 i 行，不要加 1。",
                lambda ids, w: F.one_hot(ids + 1, num_classes=w.shape[0]).to(w.dtype) @ w),
        Mistake("F.one_hot 要写 num_classes=weight.shape[0]：不写时类别数是 ids.max() + 1，只有词表最后一个 token "
                "恰好出现时形状才对得上。",
                lambda ids, w: F.one_hot(ids).to(w.dtype) @ w),
        Mistake("F.one_hot 返回的是整数张量：先 .to(weight.dtype)（或 .float()），再与 weight 做矩阵乘法。",
                lambda ids, w: F.one_hot(ids, num_classes=w.shape[0]) @ w),
    ),
    forbidden=(
        Forbidden("本题要求用 one-hot 乘矩阵来查表，不要用索引 weight[ids]、index_select 或 nn.Embedding",
                  functions=(torch.index_select, torch.Tensor.index_select,
                             torch.take, torch.Tensor.take),
                  indexing=True, example=lambda ids, w: w[ids]),
        Forbidden("本题要求用 one-hot 乘矩阵来查表，不要调用 F.embedding 或 nn.Embedding",
                  functions=(F.embedding, torch.embedding), example=lambda ids, w: F.embedding(ids, w)),
    ),
)
check_embed_onehot = EMBED.check


# ---- 练习 3: which rows of the embedding get a gradient ----------------------------------------

def _grad_cases() -> list[tuple[Tensor, Tensor, int]]:
    g = torch.Generator().manual_seed(23)
    cases = []
    for b, t, c, vocab_size in [(2, 6, 3, 10), (3, 5, 4, 7), (1, 9, 5, 12), (2, 6, 3, 10)]:  # the first's twin
        ids = torch.randint(0, vocab_size - 2, (b, t), generator=g)  # the last 2 ids never occur
        ids[0, :2] = 1  # a repeated token: its gradients must add up
        ids[-1, -1] = 0  # the first row of the table gets a gradient too
        cases.append((torch.randn(b, t, c, generator=g), ids, vocab_size))
    return cases


def _grad_reference(grad_out: Tensor, ids: Tensor, vocab_size: int) -> Tensor:
    grad = torch.zeros(vocab_size, grad_out.shape[-1], dtype=grad_out.dtype)  # (V, C)
    # row ids[b, t] gets grad_out[b, t]; a repeated id adds up its gradients
    return grad.index_add_(0, ids.reshape(-1), grad_out.reshape(-1, grad_out.shape[-1]))


# The mistakes: ``_add_rows`` adds gradient rows into a (V, C) table; each mistake adds the wrong ones, or does not add.
def _add_rows(grad_out: Tensor, ids: Tensor, vocab_size: int) -> Tensor:
    """Row ``ids[b, t]`` of a zero ``(V, C)`` table plus ``grad_out[b, t]``, for every b, t."""
    table = torch.zeros(vocab_size, grad_out.shape[-1], dtype=grad_out.dtype)
    return table.index_add_(0, ids.reshape(-1), grad_out.reshape(-1, grad_out.shape[-1]))


def _overwritten(grad_out: Tensor, ids: Tensor, vocab_size: int) -> Tensor:
    grad = torch.zeros(vocab_size, grad_out.shape[-1], dtype=grad_out.dtype)
    grad[ids.reshape(-1)] = grad_out.reshape(-1, grad_out.shape[-1])  # a repeated id keeps only one of its gradients
    return grad


def _averaged(grad_out: Tensor, ids: Tensor, vocab_size: int) -> Tensor:
    counts = torch.bincount(ids.reshape(-1), minlength=vocab_size).clamp(min=1)  # (V,): occurrences of each id
    return _add_rows(grad_out, ids, vocab_size) / counts[:, None]  # the mean, not the sum


def _grad_everywhere(grad_out: Tensor, vocab_size: int) -> Tensor:
    return grad_out.sum(dim=(0, 1)).expand(vocab_size, -1).clone()  # every row: (V, C)


def _autograd_grad(grad_out: Tensor, ids: Tensor, vocab_size: int) -> Tensor:
    weight = torch.zeros(vocab_size, grad_out.shape[-1], dtype=grad_out.dtype, requires_grad=True)
    (weight[ids] * grad_out).sum().backward()  # d/dweight of sum(out * grad_out) is dL/dweight
    return weight.grad


EMBED_GRAD = Exercise(
    name="embedding_grad",
    reference=_grad_reference,
    make_cases=_grad_cases,
    mistakes=(
        Mistake("同一个 token 出现多次时，它的梯度要 **相加**：grad[ids] = ... 会让后写的覆盖先写的。"
                "用 index_add_，或循环累加。",
                _overwritten),
        Mistake("不要取平均：损失对 weight[i] 的梯度是 token i 每次出现处梯度之 **和**。",
                _averaged),
        Mistake("没有出现的 token 梯度应为 0：只有被查到的行参与了计算，你把梯度加到了每一行上。",
                lambda go, ids, v: _grad_everywhere(go, v)),
        Mistake("batch 里的每条序列都要算上：你只用了第一条序列。",
                lambda go, ids, v: _add_rows(go[:1], ids[:1], v)),
        Mistake("差了一行：token_id 从 0 开始编号，token i 的梯度加到第 i 行，不要加 1。",
                lambda go, ids, v: _add_rows(go, ids + 1, v)),
    ),
    forbidden=(
        Forbidden("本题要求按公式手算梯度，不要调用 autograd（.backward()、torch.autograd.grad）",
                  functions=(torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad),
                  example=lambda go, ids, v: _autograd_grad(go, ids, v)),
    ),
)
check_embedding_grad = EMBED_GRAD.check


EXERCISES = (PAIR_COUNTS, EMBED, EMBED_GRAD)
