"""Bad input to the public functions raises a ValueError that names the argument, expected and actual value."""
from __future__ import annotations

import pytest
import torch
from tiny import B, D_FF, D_HEAD, D_MODEL, MAX_LEN, N_HEADS, T, VOCAB, tiny_config

import transformer_course as tc

g = torch.Generator().manual_seed(0)
x = torch.randn(B, T, D_MODEL, generator=g)
idx = torch.randint(0, VOCAB, (B, T), generator=g)
mha, cross = tc.MultiHeadAttention(D_MODEL, N_HEADS), tc.MultiHeadAttention(D_MODEL, N_HEADS, cross_attention=True)
decoder = tc.DecoderOnly(tiny_config())
cache = tc.KVCache(n_layers=1, batch_size=B, n_heads=N_HEADS, d_head=D_HEAD, max_len=MAX_LEN)
cos_sin = tc.RotaryEmbedding(D_HEAD)(torch.arange(T))
tokenizer = tc.BPETokenizer()

CASES = {
    # multi-head attention
    "x rank": (lambda: mha(x[0]), r"x must have shape \(B, T, C\) with C=24, got \(7, 24\)"),
    "x width": (lambda: mha(x[..., :16]), r"x must have shape \(B, T, C\) with C=24, got \(2, 7, 16\)"),
    "x dtype": (lambda: mha(x.long()), r"x must be a floating-point tensor, got dtype torch.int64"),
    "mask dtype": (lambda: mha(x, mask=torch.ones(T, T)), r"mask must be a bool tensor .*got torch.float32"),
    "mask shape": (
        lambda: mha(x, mask=torch.ones(T, 5, dtype=torch.bool)),
        r"mask of shape \(7, 5\) does not broadcast to \(2, 3, 7, 7\)",
    ),
    "bias shape": (
        lambda: mha(x, position_bias=torch.zeros(4, T, T)),
        r"position_bias of shape \(4, 7, 7\) does not broadcast",
    ),
    "no context": (lambda: cross(x), r"context must be a torch.Tensor of shape \(B, S, C\), got NoneType"),
    "context batch": (
        lambda: cross(x, context=torch.randn(3, 5, D_MODEL)),
        r"context must have shape \(B, S, C\) with B=2, C=24, got \(3, 5, 24\)",
    ),
    "self context": (lambda: mha(x, context=x), r"context is for cross-attention"),
    "heads divide": (lambda: tc.MultiHeadAttention(D_MODEL, 5), r"d_model=24 must be divisible by n_heads=5"),
    "split heads": (lambda: tc.split_heads(x, 5), r"C=24 must be divisible by n_heads=5"),
    "rope length": (
        lambda: mha(x[:, :4], rope_cos_sin=cos_sin),
        r"cos must have shape \(\.\.\., T, d_head\) with T=4, d_head=8, got \(7, 8\)",
    ),
    # positions
    "rope odd": (lambda: tc.RotaryEmbedding(7), r"dim must be even .*got 7"),
    "positions dtype": (
        lambda: tc.ALiBi(N_HEADS)(torch.arange(3.0), torch.arange(3)),
        r"q_positions must be an integer tensor, got dtype torch.float32",
    ),
    "slopes heads": (lambda: tc.alibi_slopes(0), r"n_heads must be an int >= 1, got 0"),
    "learned too long": (
        lambda: decoder(torch.zeros(1, MAX_LEN + 2, dtype=torch.long)),
        r"positions go up to 17.*max_len=16",
    ),
    # FFN, norms, block
    "ffn width": (
        lambda: tc.FeedForward(D_MODEL, D_FF)(x[..., :20]),
        r"x must have shape \(\.\.\., C\) with C=24, got \(2, 7, 20\)",
    ),
    "ffn activation": (
        lambda: tc.FeedForward(D_MODEL, D_FF, activation="tanh"),
        r"activation must be one of .*got 'tanh'",
    ),
    "norm width": (lambda: tc.LayerNorm(D_MODEL)(x[..., :23]), r"with C=24, got \(2, 7, 23\)"),
    "norm eps": (lambda: tc.RMSNorm(D_MODEL, eps=0.0), r"eps must be a number in \(0, inf\), got 0.0"),
    "norm position": (
        lambda: tc.TransformerBlock(D_MODEL, N_HEADS, D_FF, norm_position="middle"),
        r"norm_position must be one of \['post', 'pre'\], got 'middle'",
    ),
    "block context": (
        lambda: tc.TransformerBlock(D_MODEL, N_HEADS, D_FF)(x, context=x),
        r"this block has no cross-attention",
    ),
    # models
    "idx dtype": (lambda: decoder(idx.float()), r"idx must be an integer tensor, got dtype torch.float32"),
    "idx rank": (lambda: decoder(idx[0]), r"idx must have shape \(B, T\), got \(7,\)"),
    "idx range": (
        lambda: decoder(idx + VOCAB),
        r"idx must hold T >= 1 token ids in \[0, 50\), got values in \[\d+, \d+\]",
    ),
    "idx empty": (lambda: decoder(idx[:, :0]), r"idx must hold T >= 1 token ids .*got T=0"),
    "src batch": (
        lambda: tc.EncoderDecoder(tiny_config())(idx, idx[:1]),
        r"context must have shape \(B, S, C\) with B=1",
    ),
    "gpt2 weights": (
        lambda: tc.load_gpt2_state_dict(decoder, {"transformer.wte.weight": torch.zeros(3, 3)}),
        r"(?s)hf_state_dict does not fit model: .*Missing key",
    ),
    # KV cache
    "cache size": (
        lambda: tc.KVCache(n_layers=0, batch_size=1, n_heads=1, d_head=2, max_len=4),
        r"n_layers must be an int >= 1, got 0",
    ),
    "cache heads": (
        lambda: cache.layer(0).update(torch.zeros(B, 2, 1, D_HEAD), torch.zeros(B, 2, 1, D_HEAD)),
        r"k must have shape \(B, H, T, d_head\) with B=2, H=3, d_head=8, got \(2, 2, 1, 8\)",
    ),
    "cache layer": (lambda: cache.layer(1), r"index must be an int in \[0, 1\), got 1"),
    "bytes seq_len": (lambda: tc.kv_cache_bytes(tiny_config(), 0), r"seq_len must be an int >= 1, got 0"),
    # generation
    "generate idx": (
        lambda: tc.generate(decoder, idx.float(), 2),
        r"idx must be an integer tensor, got dtype torch.float32",
    ),
    "max_new_tokens": (lambda: tc.generate(decoder, idx, -1), r"max_new_tokens must be an int >= 0, got -1"),
    "temperature": (
        lambda: tc.generate(decoder, idx, 1, temperature=-1.0),
        r"temperature must be a number in \[0, inf\), got -1.0",
    ),
    "top_k": (lambda: tc.top_k_filter(torch.randn(B, VOCAB), 0), r"k must be an int >= 1, got 0"),
    "top_p": (lambda: tc.top_p_filter(torch.randn(B, VOCAB), 1.5), r"p must be a number in \(0, 1\], got 1.5"),
    "sample rank": (lambda: tc.sample(torch.randn(B, T, VOCAB)), r"logits must have shape \(B, V\), got \(2, 7, 50\)"),
    # tokenizer
    "bpe vocab": (lambda: tokenizer.train("abc", 100), r"vocab_size must be an int >= 256, got 100"),
    "bpe text": (lambda: tokenizer.encode(b"abc"), r"text must be a str, got bytes"),
    "bpe ids": (
        lambda: tokenizer.decode([65, 1000]),
        r"ids must be a list of int token ids in \[0, 256\), got \[65, 1000\]",
    ),
    "bpe specials": (
        lambda: tc.BPETokenizer(special_tokens=("<|eot|>", "<|eot|>")),
        r"special_tokens must be distinct non-empty strings, got \['<\|eot\|>', '<\|eot\|>'\]",
    ),
    "bpe special str": (
        lambda: tc.BPETokenizer(special_tokens="<|eot|>"),
        r"special_tokens must be a collection of str, got the str '<\|eot\|>'",
    ),
    "bpe allowed": (
        lambda: tokenizer.encode("abc", allowed_special={"<|eot|>"}),
        r"allowed_special must be 'all' or a set of \[\], got \{'<\|eot\|>'\}",
    ),
    "bpe specials vocab": (
        lambda: tc.BPETokenizer(special_tokens=("<|eot|>",)).train("abc", 256),
        r"vocab_size must be an int >= 257, got 256",
    ),
    # RNNs
    "rnn input": (
        lambda: tc.LSTM(5, 6)(torch.randn(B, T, 4)),
        r"x must have shape \(B, T, input_size\) with input_size=5, got \(2, 7, 4\)",
    ),
    "rnn h0": (
        lambda: tc.RNN(5, 6)(torch.randn(B, T, 5), torch.zeros(B, 7)),
        r"h0 must have shape \(B, hidden\) with B=2, hidden=6, got \(2, 7\)",
    ),
    # data and training
    "task size": (lambda: tc.data.copy_task(0, 5, 10, generator=0), r"n_samples must be an int >= 1, got 0"),
    "task vocab": (lambda: tc.data.copy_task(4, 5, 2, generator=0), r"vocab_size must be an int >= 3, got 2"),
    "recall pairs": (
        lambda: tc.data.associative_recall_task(4, 12, 10, generator=0),
        r"n_pairs must be <= vocab_size - 1 = 9 .*got 12",
    ),
    "lm_batch len": (
        lambda: tc.data.lm_batch(torch.arange(10), 2, 10, generator=0),
        r"seq_len must be < len\(ids\) = 10, got 10",
    ),
    "poems split": (
        lambda: tc.data.load_poems("test"),
        r"split must be one of \['all', 'train', 'val'\], got 'test'",
    ),
    "poems collection": (
        lambda: tc.data.load_poems(collection="宋"),
        r"collection must be one of \['all', 'song', 'tang'\], got '宋'",
    ),
    "train steps": (lambda: tc.train(decoder, lambda: (idx, idx), steps=0), r"steps must be an int >= 1, got 0"),
    "loss targets": (
        lambda: tc.lm_loss(torch.randn(B, T, VOCAB), idx[:, :5]),
        r"targets must have shape \(B, T\) with B=2, T=7, got \(2, 5\)",
    ),
}


@pytest.mark.parametrize("call, message", CASES.values(), ids=CASES.keys())
def test_bad_input_raises_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
