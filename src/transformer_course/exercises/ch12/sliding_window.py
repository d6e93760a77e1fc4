"""Chapter 12, 练习 1: greedy generation that goes on past the window by feeding the last ``window`` tokens.

Seeded small models with learned positions, the reference loop, each typical mistake written as a
small wrong loop, and an ``Exercise`` that turns the model's own ValueError into a Chinese verdict;
``ch12`` lists the exercise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ...config import TransformerConfig
from ...generate import greedy
from ...models import DecoderOnly
from .._core import Case, Exercise, Mistake
from .._guards import _Outcome

_F64 = torch.float64  # byte and token counts: exact integers far beyond 2**24


# ---- 练习 1: generation that goes on past the window ------------------------------------------

# (vocab, d_model, n_heads, n_layers, d_ff, window = max_len), (B, T0, n_new), seed. Every size
# differs from case to case; the prompt is shorter than the window (a sequence that outgrows it),
# as long as it, longer by 5 and 3, of length 1 and 2 (n_new = 0); B = 1 and B > 1; the last is
# the first's twin (its sizes, another model and prompt).
_GENERATION = [
    ((11, 8, 2, 1, 16, 6), (2, 4, 7), 30),
    ((13, 12, 3, 2, 20, 5), (1, 5, 4), 31),
    ((17, 16, 4, 1, 24, 4), (3, 9, 5), 32),
    ((9, 10, 1, 2, 12, 7), (2, 10, 1), 33),
    ((10, 6, 2, 1, 10, 3), (4, 1, 6), 34),
    ((14, 4, 4, 1, 8, 2), (1, 2, 0), 35),
    ((11, 8, 2, 1, 16, 6), (2, 4, 7), 36),
]
_MIN_GAP = 1e-3  # the reference's greedy choices: top-2 logit gap, far above float32 rounding


def _random_model(sizes: tuple, g: torch.Generator) -> DecoderOnly:
    """A seeded model with learned positions (max_len = window), weights large enough to matter.

    Built on the meta device and filled from ``g``: the global random state is left alone.
    """
    vocab, d_model, n_heads, n_layers, d_ff, window = sizes
    config = TransformerConfig(vocab_size=vocab, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                               d_ff=d_ff, max_len=window, positional="learned", tie_embeddings=False)
    with torch.device("meta"):
        model = DecoderOnly(config)
    model.to_empty(device="cpu")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "emb" in name:  # token and position vectors: N(0, 1), so that positions matter
                p.copy_(torch.randn(p.shape, generator=g))
            elif p.dim() > 1:  # linear layers: N(0, 1/fan_in); the output layer 3x wider spread
                scale = 3.0 if name.startswith("lm_head") else 1.0
                p.copy_(torch.randn(p.shape, generator=g) * scale / math.sqrt(p.shape[1]))
            elif "norm" in name and name.endswith("weight"):  # gains near 1
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:  # biases
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return model.eval()


def _top2_gap(logits: Tensor) -> float:
    top2 = logits.topk(2, dim=-1).values  # (B, 2)
    return float((top2[:, 0] - top2[:, 1]).min())


def _reference_gap(model: DecoderOnly, prompt: Tensor, n_new: int, window: int) -> float:
    """The smallest top-2 logit gap among the reference's greedy choices (inf when n_new = 0)."""
    tokens, gap = prompt, math.inf
    with torch.no_grad():
        for _ in range(n_new):
            logits = model.next_token_logits(tokens[:, -window:])
            gap = min(gap, _top2_gap(logits))
            tokens = torch.cat([tokens, greedy(logits)[:, None]], dim=1)
    return gap


def _generation_cases() -> list[Case]:
    cases = []
    for sizes, (b, t0, n_new), seed in _GENERATION:
        g = torch.Generator().manual_seed(seed)
        while True:  # reseed until no greedy choice of the reference is a near-tie
            model = _random_model(sizes, g)
            prompt = torch.randint(0, sizes[0], (b, t0), generator=g)
            if _reference_gap(model, prompt, n_new, sizes[-1]) > _MIN_GAP:
                break
        cases.append(Case((model, prompt, n_new, sizes[-1])))
    return cases


@torch.no_grad()
def _generate_sliding(model: DecoderOnly, prompt: Tensor, n_new: int, window: int) -> Tensor:
    tokens = prompt  # (B, T0)
    for _ in range(n_new):
        context = tokens[:, -window:]  # at most the last `window` tokens: positions 0 .. window-1
        logits = model.next_token_logits(context)  # (B, V) at the last position
        tokens = torch.cat([tokens, greedy(logits)[:, None]], dim=1)
    return tokens  # (B, T0 + n_new)


@torch.no_grad()
def _no_crop(model, prompt, n_new, window):
    tokens = prompt
    for _ in range(n_new):
        logits = model(tokens)[:, -1]  # the whole sequence: longer than the window soon
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens


@torch.no_grad()
def _crop_one_more(model, prompt, n_new, window):
    tokens = prompt
    for _ in range(n_new):
        logits = model(tokens[:, -(window + 1):])[:, -1]
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens


@torch.no_grad()
def _crop_one_less(model, prompt, n_new, window):
    tokens = prompt
    for _ in range(n_new):
        logits = model(tokens[:, -(window - 1):])[:, -1]
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens


@torch.no_grad()
def _first_window(model, prompt, n_new, window):
    tokens = prompt
    for _ in range(n_new):
        logits = model(tokens[:, :window])[:, -1]  # the oldest tokens, not the newest
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens


@torch.no_grad()
def _crop_once(model, prompt, n_new, window):
    tokens, context = prompt, prompt[:, -window:]  # cropped before the loop, never again
    for _ in range(n_new):
        next_id = model(context)[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, next_id], dim=1)
        context = torch.cat([context, next_id], dim=1)
    return tokens


@torch.no_grad()
def _stop_at_window(model, prompt, n_new, window):
    tokens = prompt  # generate_within_window of 12.1
    while tokens.shape[1] < min(window, prompt.shape[1] + n_new):
        logits = model(tokens)[:, -1]
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens


@torch.no_grad()
def _first_position(model, prompt, n_new, window):
    tokens = prompt
    for _ in range(n_new):
        logits = model(tokens[:, -window:])[:, 0]  # the prediction after the context's first token
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens


@torch.no_grad()
def _argmax_over_positions(model, prompt, n_new, window):
    tokens = prompt
    for _ in range(n_new):
        logits = model(tokens[:, -window:])  # (B, T, V)
        next_id = logits.argmax(dim=1)[:, -1:]  # over the positions: a position, not a token
        tokens = torch.cat([tokens, next_id], dim=1)
    return tokens


@torch.no_grad()
def _only_new(model, prompt, n_new, window):
    tokens = prompt
    for _ in range(n_new):
        logits = model(tokens[:, -window:])[:, -1]
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens[:, prompt.shape[1]:]


# The ValueError of LearnedPositions.forward (positional.py) for a sequence longer than max_len.
_TOO_LONG = "learned positions exist only"


@dataclass(frozen=True)
class _GenerationExercise(Exercise):
    """An exercise whose learner feeds a model: the model's ValueError for an input longer than the
    window is told in Chinese (it is the error a missing or wrong crop gives)."""

    def _problem(self, outcome: _Outcome, ref: Tensor, case: Case) -> str | None:
        error = outcome.error
        if isinstance(error, ValueError) and _TOO_LONG in str(error):
            window = case.args[3]
            return (f"时模型抛出了 ValueError：送进模型的 token 多于 window = {window} 个，"
                    f"而 learned 位置表只有第 0～{window - 1} 号位置。每一步只能把最后 window 个 token 送进模型。")
        return super()._problem(outcome, ref, case)


GENERATE = _GenerationExercise(
    name="generate_sliding",
    reference=_generate_sliding,
    make_cases=_generation_cases,
    reference_dtype=None,  # the model is float32; tokens are compared exactly
    mistakes=(
        Mistake("没有截断：序列长过 window 之后，每一步仍把整个序列送进模型，learned 位置表放不下（ValueError）。"
                "每一步只送最后 window 个 token：tokens[:, -window:]。", _no_crop),
        Mistake("截多了一个：每一步送进模型的是最后 window 个 token（tokens[:, -window:]），"
                "你送了 window + 1 个，超出了位置表（ValueError）。", _crop_one_more),
        Mistake("截少了一个：每一步送进模型的是最后 window 个 token（tokens[:, -window:]），你只送了 window − 1 个。",
                _crop_one_less),
        Mistake("留下的是最早的 window 个 token：滑动窗口要丢掉开头、保留最近的 token，是 tokens[:, -window:]，"
                "不是 tokens[:, :window]。", _first_window),
        Mistake("只在循环之前截了一次：生成的 token 让上下文每一步变长一个，"
                "所以每一步都要重新截取最后 window 个 token。", _crop_once),
        Mistake("序列填满窗口就停下了：那是 12.1 节 generate_within_window 的做法；这里要生成满 n_new 个 token，"
                "窗口满了就丢掉最早的 token，继续生成。", _stop_at_window),
        Mistake("用错了位置：下一个 token 的预测在最后一个位置的 logits 上（logits[:, -1]），你用的是位置 0。",
                _first_position),
        Mistake("argmax 的维度不对：logits 形状是 (B, T, V)，要在最后一个位置上对词表维（最后一维）取最大，"
                "logits[:, -1].argmax(-1)；你在位置维上取了最大，得到的是位置编号而不是 token。",
                _argmax_over_positions),
        Mistake("只返回了新生成的 token：要返回 prompt 连同新 token，形状 (B, T0 + n_new)。", _only_new),
    ),
)
check_generate_sliding = GENERATE.check
