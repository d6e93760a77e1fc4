"""Checkers for chapter 14 (一个会写诗的 GPT).

The learner assembles a GPT from the weights of the course's own modules: 练习 1 the causal multi-head
self-attention of a ``tc.MultiHeadAttention``, 练习 2 the whole forward pass of a ``tc.DecoderOnly``
(pre-LN, learned positions, GELU, tied output layer); 练习 3 the tone rules (平仄) of regular verse over
a batch of poems, the measurement behind section 14.5's "tone" column. The references write the
modules' computation out by hand (a checker may not call the package while it watches the learner's
code); a test checks that they give the package's numbers within 1e-6, and that 练习 3's reference counts
what ``poetics.tone_checks`` counts on real poems. Every mistake is a small complete wrong computation
written out (those of 练习 1 and 2 in ``gpt_mistakes``, from neutral pieces such as ``_heads``,
``_causal`` and ``_pre_ln_blocks`` that take the wrong part as an argument; none of them is a
reference); cases differ in every size, include a single token, a full context and inputs large
enough to overflow a naive softmax, and end with the first case's twin.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

from ... import poetics as course_poetics
from ...attention import causal_mask
from ...config import TransformerConfig
from ...models import DecoderOnly
from ...multihead import MultiHeadAttention
from .._core import Case, Exercise, Forbidden, Mistake, randn as _randn
from .gpt_mistakes import (_attention_residual_lost, _embedded, _future_kept, _heads_from_wrong_axis,
                            _masked_attention, _naive_softmax, _no_out_proj, _output, _positions_from_one, _post_ln,
                            _pre_ln_blocks, _scaled_by_d_model, _softmax_over_queries, _tanh_gelu, _unmasked,
                            _unscaled)
from .._stability import LARGE_NOTE, NAIVE_HINT
from ..ch08 import _randomise

_SDPA = ("本题要求亲手写出注意力（QKᵀ、缩放、掩码、softmax、乘 V），"
         "不要调用 PyTorch 现成的注意力（F.scaled_dot_product_attention、F.multi_head_attention_forward、"
         "nn.MultiheadAttention）")
# Every library route to a whole attention: nn.MultiheadAttention's forward calls one of the last two.
_FUSED_ATTENTION = (F.scaled_dot_product_attention, F.multi_head_attention_forward,
                    torch._native_multi_head_attention)
_COURSE = "本题要求用模块里的权重亲手拼出计算，不要调用课程包（模块的 forward、tc.split_heads、tc.causal_mask 等）"


# ---- 练习 1: causal multi-head self-attention from a MultiHeadAttention's weights ---------------

def _attention_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(141)
    cases: list[tuple | Case] = []
    for b, t, c, h in [(2, 5, 12, 3), (3, 1, 8, 2), (1, 7, 20, 4), (4, 3, 6, 1)]:
        attn = _randomise(MultiHeadAttention(c, h), g)
        cases.append((2 * _randn(g, b, t, c), attn))
    attn = _randomise(MultiHeadAttention(10, 2), g)  # inputs ~30: scores in the thousands
    cases.append(Case((30 * _randn(g, 2, 6, 10), attn), atol=0.05, note=LARGE_NOTE))
    attn = _randomise(MultiHeadAttention(12, 3), g)  # the first case's twin
    cases.append((2 * _randn(g, 2, 5, 12), attn))
    return cases


def _attention_reference(x: Tensor, attn: MultiHeadAttention) -> Tensor:
    """``attn(x, mask=causal_mask(T))[0]`` written out (the checker may not call the package while it
    watches; ``tests/test_poet.py`` checks the two agree)."""
    B, T, C = x.shape
    H = attn.n_heads
    with torch.no_grad():
        q, k, v = F.linear(x, attn.qkv_proj.weight, attn.qkv_proj.bias).split(C, dim=-1)  # (B, T, C) each
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, d_head)
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // H)  # (B, H, T, T)
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))  # j <= t only
        out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)  # heads merged: (B, T, C)
        return F.linear(out, attn.out_proj.weight, attn.out_proj.bias)


CAUSAL_SELF_ATTENTION = Exercise(
    name="causal_self_attention",
    reference=_attention_reference,
    make_cases=_attention_cases,
    reference_dtype=None,  # the module's float32 weights
    mistakes=(
        Mistake("没有因果掩码：位置 t 只能看 0..t，把 j > t 的分数设为 -inf 再做 softmax。",
                _unmasked),
        Mistake("掩码方向反了：应保留下三角（j ≤ t，看过去），你保留的是上三角（看未来）。",
                _future_kept),
        Mistake("缩放用错了维度：除以 sqrt(d_head)（每个头的维度 C/H），不是 sqrt(d_model)。",
                _scaled_by_d_model),
        Mistake("忘了除以 sqrt(d_head)：分数 QKᵀ 要先缩放再 softmax。", _unscaled),
        Mistake("拆头拆错了轴：(B, T, C) 应 view 成 (B, T, H, d_head) 再 transpose(1, 2)，你把 d_head 放在了 H 前面。",
                _heads_from_wrong_axis),
        Mistake("合并各头之后还要乘输出投影 W_O（attn.out_proj）。", _no_out_proj),
        Mistake("softmax 的维度错了：对每个查询，在键的维度（最后一维）上归一化。",
                _softmax_over_queries),
        Mistake(NAIVE_HINT, _naive_softmax),
    ),
    forbidden=(
        Forbidden(_SDPA, functions=_FUSED_ATTENTION,
                  example=lambda x, a: F.linear(F.scaled_dot_product_attention(
                      *(t.view(*x.shape[:2], a.n_heads, -1).transpose(1, 2)
                        for t in F.linear(x, a.qkv_proj.weight, a.qkv_proj.bias).split(x.shape[-1], -1)),
                      is_causal=True).transpose(1, 2).reshape(x.shape), a.out_proj.weight, a.out_proj.bias)),
        Forbidden(_COURSE, course=True, example=lambda x, a: a(x, mask=causal_mask(x.shape[1]))[0]),
    ),
)
check_causal_self_attention = CAUSAL_SELF_ATTENTION.check


# ---- 练习 2: the whole forward pass of a DecoderOnly -------------------------------------------

def _seeded_model(config: TransformerConfig, g: torch.Generator) -> DecoderOnly:
    """A model with seeded weights: norm gains near 1, every other weight ~ N(0, 1/fan_in)."""
    model = DecoderOnly(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            gain = p.dim() == 1 and name.endswith("norm.weight")
            p.copy_((1.0 if gain else 0.0) + _randn(g, *p.shape) / math.sqrt(p.shape[-1] if p.dim() > 1 else 1)
                    * (0.5 if gain else 1.0))
    return model.eval()


def _gpt_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(142)
    cases = []
    # (vocab, d_model, heads, layers, d_ff, max_len, B, T): every size different; T = 1; T = max_len
    for v, c, h, n, f, m, b, t in [(23, 12, 3, 2, 20, 9, 2, 6), (17, 8, 2, 1, 14, 5, 3, 1),
                                   (31, 20, 4, 3, 28, 7, 1, 7), (19, 6, 1, 2, 10, 11, 4, 4),
                                   (23, 12, 3, 2, 20, 9, 2, 6)]:  # the first case's twin
        config = TransformerConfig(vocab_size=v, d_model=c, n_heads=h, n_layers=n, d_ff=f, max_len=m)
        model = _seeded_model(config, g)
        idx = torch.randint(v, (b, t), generator=g)
        idx[0, -1] = v - 1  # the last token id appears
        cases.append((model, idx))
    return cases


def _gpt_reference(model: DecoderOnly, idx: Tensor) -> Tensor:
    """``model(idx)`` written out (``tests/test_poet.py`` checks the two agree)."""
    stack, T = model.transformer, idx.shape[1]
    with torch.no_grad():
        x = stack.tok_emb.weight[idx] + stack.pos_emb.embedding.weight[:T]  # (B, T, C): token + position 0..T-1
        for block in stack.blocks:
            ln1, ln2, ffn = block.self_attn_residual.norm, block.ffn_residual.norm, block.ffn
            h = F.layer_norm(x, (x.shape[-1],), ln1.weight, ln1.bias, ln1.eps)
            x = x + _attention_reference(h, block.self_attn)
            h = F.layer_norm(x, (x.shape[-1],), ln2.weight, ln2.bias, ln2.eps)
            x = x + F.linear(F.gelu(F.linear(h, ffn.up.weight, ffn.up.bias)), ffn.down.weight, ffn.down.bias)
        x = F.layer_norm(x, (x.shape[-1],), stack.final_norm.weight, stack.final_norm.bias, stack.final_norm.eps)
        return x @ stack.tok_emb.weight.T  # the output layer shares the embedding matrix: (B, T, V)


GPT_FORWARD = Exercise(
    name="gpt_forward",
    reference=_gpt_reference,
    make_cases=_gpt_cases,
    reference_dtype=None,
    mistakes=(
        Mistake("忘了加位置 embedding：x = tok_emb[idx] + pos_emb[0..T-1]，否则模型分不清顺序。",
                lambda m, i: _output(m, _pre_ln_blocks(m, m.transformer.tok_emb.weight[i], _masked_attention, F.gelu))),
        Mistake("位置从 1 开始了：第一个 token 的位置是 0，用 pos_emb 的第 0..T-1 行。",
                _positions_from_one),
        Mistake("这是 Post-LN：norm(x + f(x))。课程的 GPT 是 Pre-LN：x + f(norm(x))，最后再做一次 final_norm。",
                _post_ln),
        Mistake("忘了最后一层之后的 LayerNorm（model.transformer.final_norm）：Pre-LN 的残差流要先归一化再乘输出层。",
                lambda m, i: (_pre_ln_blocks(m, _embedded(m, i), _masked_attention, F.gelu)
                              @ m.transformer.tok_emb.weight.T)),
        Mistake("注意力子层的残差丢了：x = x + attn(norm1(x))，不是 x = attn(norm1(x))。",
                _attention_residual_lost),
        Mistake("没有因果掩码：生成模型的位置 t 不能看到 t 之后的 token。",
                lambda m, i: _output(m, _pre_ln_blocks(m, _embedded(m, i), _unmasked, F.gelu))),
        Mistake("GELU 用了 tanh 近似：这个模型的 FFN 用精确的 GELU（F.gelu 的默认）。",
                lambda m, i: _output(m, _pre_ln_blocks(m, _embedded(m, i), _masked_attention, _tanh_gelu))),
    ),
    forbidden=(
        Forbidden("本题要求亲手拼出前向计算，不要调用模型本身或课程包的模块（model(idx)、block(x)、norm(x) 等）",
                  course=True, example=lambda m, i: m(i)),
        Forbidden(_SDPA, functions=_FUSED_ATTENTION, example=lambda m, i: _sdpa_gpt(m, i)),
    ),
)
check_gpt_forward = GPT_FORWARD.check


def _sdpa_gpt(model: DecoderOnly, idx: Tensor) -> Tensor:
    """The right forward pass, with the attention done by PyTorch's fused kernel (a forbidden shortcut)."""
    F.scaled_dot_product_attention(*(torch.zeros(1, 1, 1, 1),) * 3)
    return _gpt_reference(model, idx)


# ---- 练习 3: the tone rules of regular verse, over a batch of poems ---------------------------------
# tones (N, L, n): 0 = 平, 1 = 仄, 2 = not counted. Rules, positions from 1 as in the statement:
# (a) 二四六分明: positions 2 and 4 differ in every clause (and 4 and 6 in a 7-character clause);
# (b) 对: position 2 differs between the two clauses of a couplet; (c) 粘: position 2 of a couplet's
# second clause equals position 2 of the next couplet's first clause.

_SKIP = 2  # a character whose tone is not counted (0 = 平, 1 = 仄)
_Pairs = list[tuple[Tensor, Tensor, bool]]  # (left characters, right characters, should they match), (N, k) each


def _alternation(tones: Tensor, positions: list[int]) -> _Pairs:
    """二四六分明 over the given 0-based positions: each one against the next, in every clause."""
    return [(tones[:, :, a], tones[:, :, b], False) for a, b in zip(positions, positions[1:])]


def _couplets(second: Tensor) -> _Pairs:
    return [(second[:, 0::2], second[:, 1::2], False)]  # 对: clauses 1-2, 3-4, ...


def _joins(second: Tensor) -> _Pairs:
    return [(second[:, 1:-1:2], second[:, 2::2], True)]  # 粘: clause 2 with 3, 4 with 5, ...


def _counts(pairs: _Pairs, skip: bool = True) -> tuple[Tensor, Tensor]:
    """(passed, checked) per poem, (N,) int64 each; ``skip``: a comparison with a 2 is not counted."""
    passed = checked = torch.zeros(pairs[0][0].shape[0], dtype=torch.long)
    for x, y, same in pairs:
        counted = (x != _SKIP) & (y != _SKIP) if skip else torch.ones_like(x, dtype=torch.bool)
        checked = checked + counted.flatten(1).sum(1)
        passed = passed + (counted & ((x == y) == same)).flatten(1).sum(1)
    return passed, checked


def _even_positions(n: int) -> list[int]:
    return [1, 3, 5][: (n - 1) // 2]  # characters 2, 4 (and 6) of an n-character clause


def _tones_reference(tones: Tensor) -> tuple[Tensor, Tensor]:
    second = tones[:, :, 1]  # (N, L): character 2 of every clause
    return _counts(_alternation(tones, _even_positions(tones.shape[2])) + _couplets(second) + _joins(second))


def _tones_with(alternation: list[int] | None = None, couplets=_couplets, joins=_joins, skip: bool = True,
                column: int = 1):
    """A whole wrong attempt: the right rules except the part given."""
    def attempt(tones: Tensor) -> tuple[Tensor, Tensor]:
        positions = _even_positions(tones.shape[2]) if alternation is None else alternation
        second = tones[:, :, column]
        return _counts(_alternation(tones, positions) + couplets(second) + joins(second), skip)
    return attempt


def _tone_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(143)
    cases = []
    # (N poems, L clauses, n characters): every form; N differs from L and n in every case
    for n_poems, lines, n in [(3, 4, 5), (2, 8, 7), (6, 8, 5), (1, 4, 7), (3, 4, 5)]:  # the first's twin last
        level = torch.randint(0, 2, (n_poems, lines, n), generator=g)
        tones = torch.where(torch.rand(n_poems, lines, n, generator=g) < 0.2, _SKIP, level)  # 2s anywhere
        tones[0, 0, 1] = tones[-1, -1, 1] = _SKIP  # the first and the last clause's character 2
        cases.append((tones,))
    regular = torch.tensor([[0, 0, 1, 1, 0], [1, 1, 0, 0, 1], [1, 1, 0, 0, 0], [0, 0, 1, 1, 1]])  # 五绝: 7 of 7
    cases.insert(4, (torch.stack([regular, regular.flip(0), torch.full_like(regular, _SKIP)]),))  # + nothing counted
    return cases


TONE_CHECKS = Exercise(
    name="tone_checks",
    reference=_tones_reference,
    make_cases=_tone_cases,
    mistakes=(
        Mistake("2 表示这个字不计：两个字里有一个是 2，这次比较既不算通过，也不算检查（checked 不加 1）。",
                _tones_with(skip=False)),
        Mistake("字的位置从 1 数起：第 2、4、6 字是下标 1、3、5，你比较的是下标 2、4（第 3、5 字）。",
                lambda tones: _tones_with(alternation=[2, 4, 6][: (tones.shape[2] - 1) // 2], column=2)(tones)),
        Mistake("七言句除了第 2、4 字，还要比较第 4、6 字（二四六分明）。",
                lambda tones: _tones_with(alternation=[1, 3])(tones)),
        Mistake("「粘」要求相同：一联第二句的第 2 字与下一联第一句的第 2 字平仄 **相同**，你要求的是不同。",
                _tones_with(joins=lambda s: [(s[:, 1:-1:2], s[:, 2::2], False)])),
        Mistake("「对」是一联之内的两句（第 1 与 2 句、第 3 与 4 句……），不是每两句相邻的句子；"
                "第 2 与 3 句之间是「粘」。",
                _tones_with(couplets=lambda s: [(s[:, :-1], s[:, 1:], False)])),
        Mistake("「粘」只在相邻两联之间：最后一联没有下一联，不要把它和第一联接起来。",
                _tones_with(joins=lambda s: [(s[:, 1::2], torch.cat([s[:, 2::2], s[:, :1]], 1), True)])),
    ),
    forbidden=(
        Forbidden("本题要求用张量自己数出三条规则，不要调用课程包（tc.poetics.tone_checks 等）",
                  course=True, example=lambda tones: _course_route(tones)),
    ),
)
check_tone_checks = TONE_CHECKS.check


def _course_route(tones: Tensor) -> tuple[Tensor, Tensor]:
    """The right counts after a call into the package's poem metrics (the forbidden shortcut)."""
    course_poetics.clauses("")
    return _tones_reference(tones)


EXERCISES = (CAUSAL_SELF_ATTENTION, GPT_FORWARD, TONE_CHECKS)
