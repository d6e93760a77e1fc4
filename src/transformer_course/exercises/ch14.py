"""Checkers for chapter 14 (从零拼出一个会写诗的 GPT).

The learner assembles a GPT from the weights of the course's own modules: 练习 1 the causal multi-head
self-attention of a ``tc.MultiHeadAttention``, 练习 2 the whole forward pass of a ``tc.DecoderOnly``
(pre-LN, learned positions, GELU, tied output layer); 练习 3 the validation loss of section 14.3's
smoothed bigram baseline. The references write those modules' computation out by hand (a checker may
not call the package while it watches the learner's code); a test checks that they give the package's
numbers within 1e-6, so "passed" means: the same numbers as the package. Every mistake is a small
complete wrong computation written out (those of 练习 1 and 2 in ``_gpt_mistakes``, from neutral pieces
such as ``_heads``, ``_causal`` and ``_pre_ln_blocks`` that take the wrong part as an argument; none of
them is a reference); cases differ in every size, include a single token and a full context, and end
with the first case's twin.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

from ..attention import causal_mask
from ..config import TransformerConfig
from ..data import IGNORE_INDEX
from ..models import DecoderOnly
from ..multihead import MultiHeadAttention
from ._core import Exercise, Forbidden, Mistake, randn as _randn
from ._gpt_mistakes import (_attention_residual_lost, _embedded, _future_kept, _heads_from_wrong_axis,
                            _masked_attention, _no_out_proj, _output, _positions_from_one, _post_ln, _pre_ln_blocks,
                            _scaled_by_d_model, _softmax_over_queries, _tanh_gelu, _unmasked, _unscaled)
from .ch08 import _randomise

_SDPA = ("本题要求亲手写出注意力（QKᵀ、缩放、掩码、softmax、乘 V），"
         "不要调用 torch.nn.functional.scaled_dot_product_attention")
_COURSE = "本题要求用模块里的权重亲手拼出计算，不要调用课程包（模块的 forward、tc.split_heads、tc.causal_mask 等）"


# ---- 练习 1: causal multi-head self-attention from a MultiHeadAttention's weights ---------------

def _attention_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(141)
    cases = []
    for b, t, c, h in [(2, 5, 12, 3), (3, 1, 8, 2), (1, 7, 20, 4), (4, 3, 6, 1), (2, 5, 12, 3)]:  # twin last
        attn = _randomise(MultiHeadAttention(c, h), g)
        cases.append((2 * _randn(g, b, t, c), attn))
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
    ),
    forbidden=(
        Forbidden(_SDPA, functions=(F.scaled_dot_product_attention,),
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
        Forbidden(_SDPA, functions=(F.scaled_dot_product_attention,),
                  example=lambda m, i: _sdpa_gpt(m, i)),
    ),
)
check_gpt_forward = GPT_FORWARD.check


def _sdpa_gpt(model: DecoderOnly, idx: Tensor) -> Tensor:
    """The right forward pass, with the attention done by PyTorch's fused kernel (a forbidden shortcut)."""
    F.scaled_dot_product_attention(*(torch.zeros(1, 1, 1, 1),) * 3)
    return _gpt_reference(model, idx)


# ---- 练习 3: the bigram baseline's validation loss ----------------------------------------------
# V >= 100 in every case, so that a target of -100 used as an index wraps around instead of failing:
# the learner who forgets the unscored positions gets this mistake's hint, not an IndexError.

def _bigram_reference(counts: Tensor, inputs: Tensor, targets: Tensor, k: float) -> Tensor:
    """Chapter 14.3's smoothed bigram loss: the mean of -log p(target | input) over the scored positions."""
    V = counts.shape[0]
    c = counts.double()  # (V, V): c[a, b] = how often b followed a
    unigram = (c.sum(0) + 1) / (c.sum() + V)  # (V,) add-one unigram of the following token
    table = (c + k * unigram) / (c.sum(1, keepdim=True) + k)  # (V, V): p(b | a), row a
    scored = targets != IGNORE_INDEX  # (N, T)
    return -table[inputs[scored], targets[scored]].log().mean()


# Pieces the wrong losses are written with: the right table and the right mean, each given a wrong partner.

def _table(counts: Tensor, k: float) -> Tensor:
    c = counts.double()
    return (c + k * (c.sum(0) + 1) / (c.sum() + c.shape[0])) / (c.sum(1, keepdim=True) + k)  # (V, V)


def _mean_nll(table: Tensor, inputs: Tensor, targets: Tensor) -> Tensor:
    scored = targets != IGNORE_INDEX
    return -table[inputs[scored], targets[scored]].log().mean()


def _raw_unigram(counts: Tensor, inputs: Tensor, targets: Tensor, k: float) -> Tensor:
    c = counts.double()
    unigram = c.sum(0) / c.sum()  # no add-one: a token never seen gets probability 0
    return _mean_nll((c + k * unigram) / (c.sum(1, keepdim=True) + k), inputs, targets)


def _uniform_prior(counts: Tensor, inputs: Tensor, targets: Tensor, k: float) -> Tensor:
    c = counts.double()
    return _mean_nll((c + k / c.shape[0]) / (c.sum(1, keepdim=True) + k), inputs, targets)  # 1/V for every token


def _add_k(counts: Tensor, inputs: Tensor, targets: Tensor, k: float) -> Tensor:
    c = counts.double()
    return _mean_nll((c + k) / (c.sum(1, keepdim=True) + k * c.shape[0]), inputs, targets)  # k in every cell


def _summed(counts: Tensor, inputs: Tensor, targets: Tensor, k: float) -> Tensor:
    scored = targets != IGNORE_INDEX
    return -_table(counts, k)[inputs[scored], targets[scored]].log().sum()  # a total, not a mean


def _bigram_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(143)
    cases = []
    for v, n, t, k in [(120, 3, 7, 3.0), (101, 2, 9, 0.5), (150, 4, 5, 30.0), (130, 1, 11, 10.0),
                       (120, 3, 7, 3.0)]:  # (V, N, T, k); the first's twin
        counts = torch.randint(0, 4, (v, v), generator=g) * (torch.rand(v, v, generator=g) < 0.05)
        counts[:, v - 1] = 0  # a token never seen after anything: only the add-one keeps it finite
        counts[v - 2] = 0     # a token never followed by anything in training: pure unigram
        inputs = torch.randint(v, (n, t), generator=g)
        targets = torch.randint(v, (n, t), generator=g)
        inputs[0, 0], targets[0, 0], targets[-1, 1] = v - 2, v - 1, v - 1
        targets[:, -2:] = IGNORE_INDEX  # padding at the end of every row
        cases.append((counts, inputs, targets, k))
    return cases


BIGRAM_LOSS = Exercise(
    name="bigram_loss",
    reference=_bigram_reference,
    make_cases=_bigram_cases,
    atol=1e-4,
    mistakes=(
        Mistake("平滑要按 unigram 插值：p(b|a) = (n(a,b) + k·p(b)) / (n(a) + k)，p(b) 是 unigram 概率；"
                "你用的是均匀的 1/V。",
                _uniform_prior),
        Mistake("unigram 也要加一平滑：p(b) = (n(b) + 1) / (N + V)。"
                "训练中没出现过的 token 否则概率为 0，损失变成无穷大。",
                _raw_unigram),
        Mistake("这是给每一格都加 k（add-k 平滑）：(n(a,b) + k) / (n(a) + k·V)。本题要按 unigram 插值。",
                _add_k),
        Mistake("counts 的方向反了：counts[a, b] 是「a 后面跟 b」的次数，p(b|a) 用第 a 行，分母是第 a 行的和。",
                lambda c, x, y, k: _mean_nll(_table(c.T, k), x, y)),
        Mistake("targets 为 -100 的位置是填充，不计分：先用 targets != -100 选出计分的位置。",
                lambda c, x, y, k: -_table(c, k)[x, y].log().mean()),
        Mistake("要返回平均损失（除以计分位置的个数），不是总和。",
                _summed),
    ),
)
check_bigram_loss = BIGRAM_LOSS.check

EXERCISES = (CAUSAL_SELF_ATTENTION, GPT_FORWARD, BIGRAM_LOSS)
