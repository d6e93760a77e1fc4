"""Chapter 10, 练习 4: beam search, checked on tiny lookup-table language models.

A model small enough to search exhaustively (``TinyLM``), the float64 reference and the cases; each
typical mistake is a small wrong beam search in ``beam_mistakes``; ``ch10`` lists the exercise.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .._core import Case, Exercise, Forbidden, Mistake
from .beam_mistakes import (_copies_at_start, _greedy_only, _last_token_only, _length_average, _log_of_softmax,
                             _multiplied_probabilities, _per_parent, _prompt_dropped, _prompt_scored, _swapped,
                             _vocabulary_order, _with_prompt)

NEG_INF = float("-inf")


def _logits(g: torch.Generator, rows: int, vocab: int) -> Tensor:
    return 2.0 * torch.randn(rows, vocab, generator=g)  # spread out, like a trained model's


# ---- 练习 4: beam search -------------------------------------------------------------------------

class TinyLM(nn.Module):
    """A language model small enough to search exhaustively: token ids ``(B, T)`` -> logits ``(B, T, V)``.

    The logits at position t are a seeded table's entry for the tokens at t - 1 and t (a start row
    stands before position 0) plus a vector for position t: the context and the position both matter.
    """

    def __init__(self, vocab: int, max_len: int, scale: float, g: torch.Generator) -> None:
        super().__init__()
        self.register_buffer("pair", scale * torch.randn(vocab + 1, vocab, vocab, generator=g))
        self.register_buffer("position", 0.5 * scale * torch.randn(max_len, vocab, generator=g))

    @property
    def vocab(self) -> int:
        return self.pair.shape[1]

    def forward(self, idx: Tensor) -> Tensor:
        prev = F.pad(idx[:, :-1], (1, 0), value=self.vocab)  # (B, T): the token before each
        return self.pair[prev, idx] + self.position[: idx.shape[1]]  # (B, T, V)

    def next_token_logits(self, idx: Tensor) -> Tensor:
        """The logits ``(B, V)`` at the last position, as the chapter's model gives them."""
        return self(idx)[:, -1]


def _beam(model: nn.Module, prompt: Tensor, n_new: int, beam_width: int) -> tuple[Tensor, Tensor, float]:
    """Beam search in float64: ``(scores (K,), beams (K, n_new) int64, gap)``, best first.

    ``gap``: the smallest score difference the outcome depends on (between the last kept and the
    first dropped candidate of every step, and between neighbours in the final order).
    """
    seqs, scores, gap = prompt[None], torch.zeros(1, dtype=torch.float64), math.inf  # one beam
    for step in range(n_new):
        with torch.no_grad():
            log_probs = model(seqs)[:, -1].double().log_softmax(dim=-1)  # (K', V)
        vocab = log_probs.shape[-1]
        candidates = (scores[:, None] + log_probs).flatten()  # (K' * V,): parent-major
        ranked = candidates.sort(descending=True, stable=True)  # ties: parent rank, then token id
        if candidates.numel() > beam_width:
            gap = min(gap, float(ranked.values[beam_width - 1] - ranked.values[beam_width]))
        if step == n_new - 1 and beam_width > 1:
            gap = min(gap, float((ranked.values[: beam_width - 1] - ranked.values[1:beam_width]).min()))
        keep = ranked.indices[:beam_width]
        seqs = torch.cat([seqs[keep // vocab], (keep % vocab)[:, None]], dim=1)
        scores = candidates[keep]
    return scores, seqs[:, prompt.numel():], gap


def _beam_reference(model: nn.Module, prompt: Tensor, n_new: int, beam_width: int) -> tuple[Tensor, Tensor]:
    scores, beams, _ = _beam(model, prompt, n_new, beam_width)
    return scores, beams


def _exhaustive(model: nn.Module, prompt: Tensor, n_new: int, beam_width: int) -> tuple[Tensor, Tensor]:
    """Score all V ** n_new continuations at once and keep the best: what the statement forbids."""
    vocab = model(prompt[None]).shape[-1]
    tails = torch.cartesian_prod(*[torch.arange(vocab)] * n_new).reshape(-1, n_new)  # (V ** n_new, n_new)
    seqs = torch.cat([prompt.expand(len(tails), -1), tails], dim=1)
    log_probs = model(seqs)[:, prompt.numel() - 1: -1].log_softmax(dim=-1)  # predicting the tail
    totals = log_probs.gather(-1, tails[..., None]).squeeze(-1).sum(dim=-1)
    best = totals.sort(descending=True, stable=True).indices[:beam_width]
    return totals[best], tails[best]


def _greedy_off_path(model: nn.Module, prompt: Tensor, n_new: int, beam_width: int) -> bool:
    """Greedy's first token is not the first token of the best beam."""
    _, beams, _ = _beam(model, prompt, n_new, beam_width)
    return bool(model(prompt[None])[0, -1].argmax() != beams[0, 0])


def _product_underflows(model: nn.Module, prompt: Tensor, n_new: int, beam_width: int) -> bool:
    """A kept beam's probability is below float32's range, though no single step's probability is:
    multiplying probabilities fails here, log(softmax) does not."""
    scores, _, _ = _beam(model, prompt, n_new, beam_width)
    ref = _beam_reference(model, prompt, n_new, beam_width)
    return (bool(scores.min() < -110) and _matching(_log_of_softmax(model, prompt, n_new, beam_width), ref)
            and not _matching(_multiplied_probabilities(model, prompt, n_new, beam_width), ref))


def _matching(got: tuple[Tensor, Tensor], ref: tuple[Tensor, Tensor]) -> bool:
    return all(g.shape == r.shape and bool(((g.double() - r.double()).abs() <= 1e-2).all()) for g, r in zip(got, ref))


# (V, T0, n_new, beam_width, logit scale, what else the case must show); drawn one after another
_SEARCHES = [
    (7, 5, 4, 2, 2.0, None),  # an exhaustive search breaks the size limit here
    (5, 3, 3, 3, 2.0, _greedy_off_path),
    (9, 2, 3, 1, 2.0, None),  # beam_width 1: greedy
    (4, 4, 3, 16, 2.0, None),  # beam_width = V ** (n_new - 1): exhaustive; only V < 16 at step 1
    (11, 6, 1, 4, 2.0, None),  # one step
    (6, 1, 3, 3, 2.0, None),  # a prompt of one token
    (7, 5, 4, 2, 2.0, None),  # the first case's twin
    (2, 7, 4, 12, 25.0, _product_underflows),  # logits near a hundred; a vocabulary of two
    (5, 8, 2, 4, 800.0, None),  # logits in the thousands
]
_MIN_GAP = 1e-2  # far above float32 rounding of sums of log-probabilities (~1e-5, ~1e-3 when huge)
BEAM_BIG_NOTE = ("这一组的 logits 很大（数百到数千）：小概率在 float32 里会下溢成 0，要用 log_softmax "
                 "在对数空间里相加，不要先 softmax 再取 log，也不要把概率连乘")
FEW_CANDIDATES_NOTE = "这一组的 beam_width 比词表还大：第一步只有 V 个候选，不足 beam_width 个时全部保留"


def _beam_cases() -> list[Case]:
    g = torch.Generator().manual_seed(13)
    cases = []
    for vocab, t0, n_new, beam_width, scale, shows in _SEARCHES:
        while True:  # redraw until no outcome of the reference hangs on a near-tie
            model = TinyLM(vocab, t0 + n_new, scale, g)
            prompt = torch.randint(0, vocab, (t0,), generator=g)
            args = (model, prompt, n_new, beam_width)
            if _beam(*args)[2] > _MIN_GAP * max(1.0, scale / 2) and (shows is None or shows(*args)):
                break
        big = scale > 10
        note = BEAM_BIG_NOTE if big else FEW_CANDIDATES_NOTE if vocab < beam_width else ""
        cases.append(Case(args, atol=1e-2 if big else None, note=note))
    return cases


def _numel_limit(model: nn.Module, prompt: Tensor, n_new: int, beam_width: int) -> int:
    """Eight times the logits of every candidate at once (beam_width x V sequences, each run whole)."""
    vocab = model.vocab
    return 8 * beam_width * vocab * (prompt.numel() + n_new) * vocab


BEAM = Exercise(
    name="beam_search",
    reference=_beam_reference,
    make_cases=_beam_cases,
    atol=1e-4,  # sums of a few log-probabilities of ~-3: float32 rounds them to ~1e-6
    reference_dtype=None,  # no float input: the model is float32, the reference sums in float64; ids exact
    mistakes=(
        Mistake("每条 beam 只留下了它自己最好的扩展：应把所有 beam 的所有扩展（beam_width × V 个候选）放在一起，"
                "按总分取全局前 beam_width 个；同一条 beam 可以留下好几个后代，也可以一个都不留。", _per_parent),
        Mistake("候选的得分只用了新 token 的对数概率：得分是整段续写的对数概率之和，"
                "每一步都要加上父 beam 的得分（scores[:, None] + log_probs）。", _last_token_only),
        Mistake("开始时把提示复制成了 beam_width 条、得分都是 0：第一步的候选全是重复的，留下的 beam 也全是同一条。"
                "开始时只有一条 beam（只含提示），候选不足 beam_width 个时全部保留。", _copies_at_start),
        Mistake("把概率连乘了：几步之后很小的概率之积在 float32 里下溢成 0，排序失去意义，log 之后是 -inf。"
                "要在对数空间里累加：log_softmax 之后相加。", _multiplied_probabilities),
        Mistake("数值不稳定：先 softmax 再取 log，logits 很大时小概率下溢成 0，log(0) = -inf。"
                "用 torch.log_softmax 直接求对数概率。", _log_of_softmax),
        Mistake("得分除以了长度：本题的得分是续写各 token 的对数概率之和，不做长度归一化"
                "（这里所有 beam 一样长，平均也不改变排序）。", _length_average),
        Mistake("留下的 beam 是对的，但没有按得分从高到低排列：返回的第 0 行应是总分最高的续写"
                "（topk 默认就按从大到小给出）。", _vocabulary_order),
        Mistake("从第二步起送进模型的只有已生成的 token，漏掉了提示：每一步都要把完整的提示和 beam 拼在一起"
                "送进模型。", _prompt_dropped),
        Mistake("得分里多算了提示本身的对数概率：只累加续写部分 n_new 个 token 的对数概率"
                "（用 sequence_log_prob 给整段打分时，要减去提示部分的得分）。", _prompt_scored),
        Mistake("只保留了一条序列，等于 greedy：每一步要保留 beam_width 条，返回的也是 beam_width 条。",
                _greedy_only),
        Mistake("beams 只含续写的 n_new 个 token，不要带上提示：形状是 (beam_width, n_new)。", _with_prompt),
        Mistake("返回值的顺序反了：先 scores 后 beams（和 torch.topk 返回 (values, indices) 一样）。", _swapped),
    ),
    forbidden=(
        Forbidden("本题要求用束搜索，不要穷举全部 V ** n_new 种续写：每一步只扩展留下的 beam_width 条",
                  max_numel=_numel_limit, example=_exhaustive),
    ),
)
check_beam_search = BEAM.check
