"""``model.inspect``: the forward pass's own attention weights, q, k, v and block outputs.

Parity with Hugging Face GPT-2's ``output_attentions`` / ``output_hidden_states`` (pre-LN); for post-LN,
the queries are those of the block's input itself (a pre-LN rebuild would differ); caches, cross-attention
and padding; the logits are the forward's.
"""
from __future__ import annotations

import math

import pytest
import torch
from tiny import B, D_HEAD, D_MODEL, MAX_LEN, N_HEADS, T, VOCAB, tiny_config

from transformer_course.attention import causal_mask
from transformer_course.kv_cache import KVCache
from transformer_course.hf import from_hf_gpt2
from transformer_course.models import DecoderOnly, EncoderDecoder, EncoderOnly
from transformer_course.multihead import split_heads

S = 5  # source length, different from T


def _idx(length: int = T, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (B, length), generator=torch.Generator().manual_seed(seed))


def test_attention_and_hidden_states_equal_hugging_face_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=MAX_LEN, n_embd=D_MODEL, n_layer=3, n_head=N_HEADS,
                                    n_inner=40, bos_token_id=0, eos_token_id=0, attn_implementation="eager")).eval()
    with torch.no_grad():  # non-trivial norms and biases
        for p in hf.parameters():
            p.add_(0.1 * torch.randn_like(p) if p.dim() == 1 else 0.02 * torch.randn_like(p))
    ours = from_hf_gpt2(hf).eval()
    idx = _idx(11)
    with torch.no_grad():
        expected = hf(idx, output_attentions=True, output_hidden_states=True)
        trace = ours.inspect(idx)
    torch.testing.assert_close(trace.logits, expected.logits, atol=1e-5, rtol=0)
    assert trace.attention.shape == (3, B, N_HEADS, 11, 11)
    for layer, weights in enumerate(expected.attentions):
        torch.testing.assert_close(trace.layers[layer].self_attention.weights, weights, atol=1e-6, rtol=0)
    for layer in range(2):  # HF's last hidden state has the final norm applied; ours is the block output
        torch.testing.assert_close(trace.layers[layer].output, expected.hidden_states[layer + 1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm_position", ["pre", "post"])
@pytest.mark.parametrize("positional", ["learned", "rope", "alibi"])
def test_queries_are_those_of_the_block_input_and_the_weights_their_softmax(norm_position, positional):
    torch.manual_seed(0)
    model = DecoderOnly(tiny_config(norm_position=norm_position, positional=positional, n_layers=3)).eval()
    idx = _idx()
    with torch.no_grad():
        for p in model.parameters():  # norms with gains and shifts far from 1 and 0, so that LN(x) != x
            if p.dim() == 1:
                p.add_(torch.randn_like(p))
        trace = model.inspect(idx)
        torch.testing.assert_close(trace.logits, model(idx), atol=1e-5, rtol=0)
        block = model.transformer.blocks[1]
        x = trace.layers[0].output  # (B, T, C): the input of block 1
        h = block.self_attn_residual.norm(x) if norm_position == "pre" else x
        q_in, k_in, _ = (split_heads(t, N_HEADS) for t in block.self_attn.qkv_proj(h).split(D_MODEL, dim=-1))
        if positional == "rope":
            cos, sin = model.transformer.rope(torch.arange(T))
            from transformer_course.positional import apply_rope
            q_in, k_in = apply_rope(q_in, cos, sin), apply_rope(k_in, cos, sin)
        a = trace.layers[1].self_attention
        torch.testing.assert_close(a.queries, q_in, atol=1e-5, rtol=0)
        torch.testing.assert_close(a.keys, k_in, atol=1e-5, rtol=0)
        scores = a.queries @ a.keys.transpose(-2, -1) / math.sqrt(D_HEAD)  # (B, H, T, T)
        if positional == "alibi":
            scores = scores + model.transformer.alibi(torch.arange(T), torch.arange(T))
        expected = scores.masked_fill(~causal_mask(T), float("-inf")).softmax(-1)
        torch.testing.assert_close(a.weights, expected, atol=1e-5, rtol=0)
        if norm_position == "post":  # what a pre-LN rebuild of a post-LN block would have shown
            q_wrong = split_heads(block.self_attn.qkv_proj(block.self_attn_residual.norm(x))[..., :D_MODEL], N_HEADS)
            assert (q_wrong - a.queries).abs().max() > 1e-2


def test_with_a_cache_the_new_token_sees_every_cached_key():
    torch.manual_seed(0)
    model = DecoderOnly(tiny_config(positional="rope")).eval()
    idx = _idx(9)
    cache = KVCache.from_config(model.config, batch_size=B)
    with torch.no_grad():
        full = model.inspect(idx)
        model(idx[:, :8], cache=cache)
        step = model.inspect(idx[:, 8:], cache=cache)
    assert step.keys.shape == (2, B, N_HEADS, 9, D_HEAD) and step.attention.shape == (2, B, N_HEADS, 1, 9)
    torch.testing.assert_close(step.keys, full.keys, atol=1e-5, rtol=0)
    torch.testing.assert_close(step.attention, full.attention[..., 8:, :], atol=1e-5, rtol=0)
    torch.testing.assert_close(step.logits, full.logits[:, 8:], atol=1e-5, rtol=0)


def test_encoder_decoder_traces_cross_attention_and_padding():
    torch.manual_seed(0)
    model = EncoderDecoder(tiny_config(norm_position="post")).eval()
    src, tgt = _idx(S, seed=2), _idx(T, seed=3)
    lengths = torch.tensor([S, 3])
    real = torch.arange(S) < lengths[:, None]  # (B, S)
    with torch.no_grad():
        trace = model.inspect(src, tgt, attention_mask=real)
        torch.testing.assert_close(trace.logits, model(src, tgt, attention_mask=real), atol=1e-5, rtol=0)
    assert len(trace.encoder_layers) == 2 and trace.encoder_layers[0].cross_attention is None
    cross = torch.stack([layer.cross_attention.weights for layer in trace.layers])  # (L, B, H, T, S)
    assert cross.shape == (2, B, N_HEADS, T, S)
    torch.testing.assert_close(cross.sum(-1), torch.ones(2, B, N_HEADS, T))
    assert cross[:, 1, :, :, 3:].abs().max() == 0 and cross[:, 1, :, :, :3].min() > 0  # padding gets nothing
    encoder = trace.encoder_layers[0].self_attention.weights  # (B, H, S, S): bidirectional
    assert encoder[0].triu(1).abs().max() > 0


def test_encoder_only_and_training_mode():
    torch.manual_seed(0)
    model = EncoderOnly(tiny_config(dropout=0.1))
    idx = _idx()
    with pytest.raises(ValueError, match="eval"):
        model.inspect(idx)  # dropout on the weights would make them something the forward did not use
    model.eval()
    with torch.no_grad():
        trace = model.inspect(idx)
        torch.testing.assert_close(trace.logits, model(idx), atol=1e-5, rtol=0)
    assert trace.attention.shape == (2, B, N_HEADS, T, T)
