"""KVCache: the bytes formula against a filled cache, views into a preallocated buffer, overflow."""
from __future__ import annotations

import pytest
import torch
from tiny import B, D_HEAD, N_HEADS, T, VOCAB, tiny_config

from transformer_course.config import TransformerConfig
from transformer_course.kv_cache import KVCache, kv_cache_bytes
from transformer_course.models import DecoderOnly


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bytes_formula_equals_the_measured_filled_cache(dtype):
    config = tiny_config(n_layers=3)
    model = DecoderOnly(config).to(dtype).eval()
    cache = KVCache.from_config(config, batch_size=B, dtype=dtype)
    with torch.inference_mode():
        model(torch.randint(0, VOCAB, (B, T)), cache=cache)
        model(torch.randint(0, VOCAB, (B, 1)), cache=cache)
    filled = cache.pos
    assert filled == T + 1
    measured = sum(t[:, :, :, :filled].numel() * t.element_size() for t in (cache.k, cache.v))
    assert kv_cache_bytes(config, filled, B, dtype) == measured == cache.nbytes
    assert cache.k.nbytes + cache.v.nbytes == kv_cache_bytes(config, config.max_len, B, dtype)  # allocated


def test_grouped_query_attention_divides_the_bytes():
    config = TransformerConfig.gpt2_small()
    full = kv_cache_bytes(config, 1024, 1, torch.float16)
    assert full == 2 * 12 * 12 * 64 * 1024 * 2  # K and V, layers, heads, d_head, positions, bytes
    assert kv_cache_bytes(config, 1024, 1, torch.float16, n_kv_heads=3) * 4 == full
    with pytest.raises(ValueError, match="n_kv_heads must divide n_heads=12, got 5"):
        kv_cache_bytes(config, 1024, n_kv_heads=5)


def test_update_writes_into_the_buffer_and_returns_views():
    cache = KVCache(n_layers=2, batch_size=B, n_heads=N_HEADS, d_head=D_HEAD, max_len=10)
    k, v = torch.randn(B, N_HEADS, 4, D_HEAD), torch.randn(B, N_HEADS, 4, D_HEAD)
    all_k, all_v = cache.layer(1).update(k, v)
    assert all_k.shape == (B, N_HEADS, 4, D_HEAD)
    assert all_k.data_ptr() == cache.k[1].data_ptr()  # a view, no copy
    torch.testing.assert_close(cache.v[1, :, :, :4], v)
    assert (cache.k[0] == 0).all()  # layer 0 untouched
    cache.advance(4)
    all_k, _ = cache.layer(1).update(k[:, :, :1], v[:, :, :1])
    assert all_k.shape == (B, N_HEADS, 5, D_HEAD)
    with pytest.raises(ValueError, match="more than max_len=10"):
        cache.layer(0).update(torch.randn(B, N_HEADS, 7, D_HEAD), torch.randn(B, N_HEADS, 7, D_HEAD))
    cache.reset()
    assert cache.pos == 0 and cache.nbytes == 0


def test_bytes_from_plain_numbers_equal_the_config_and_need_all_three():
    config = tiny_config(n_layers=3)
    numbers = dict(n_layers=3, n_heads=N_HEADS, d_head=D_HEAD)
    expected = 2 * 3 * 2 * N_HEADS * 11 * D_HEAD * 4  # K and V, layers, batch, heads, positions, d_head, float32
    assert kv_cache_bytes(None, 11, 2, **numbers) == kv_cache_bytes(config, 11, 2) == expected
    assert kv_cache_bytes(config, 11, n_layers=5) == kv_cache_bytes(None, 11, **{**numbers, "n_layers": 5})
    with pytest.raises(ValueError, match="d_head is needed"):
        kv_cache_bytes(None, 11, n_layers=3, n_heads=N_HEADS)


def test_truncate_rewinds_and_the_rewound_step_gives_the_same_logits():
    torch.manual_seed(0)
    config = tiny_config(positional="rope")
    model = DecoderOnly(config).eval()
    idx = torch.randint(0, VOCAB, (B, T + 2), generator=torch.Generator().manual_seed(3))
    cache = KVCache.from_config(config, batch_size=B)
    with torch.inference_mode():
        model(idx[:, :T], cache=cache)
        first = model(idx[:, T : T + 1], cache=cache)  # (B, 1, V) at position T
        model(idx[:, T + 1 :], cache=cache)
        assert cache.pos == T + 2
        cache.truncate(T)  # forget positions T and T+1
        again = model(idx[:, T : T + 1], cache=cache)
    torch.testing.assert_close(again, first, atol=1e-6, rtol=0)
    assert cache.pos == T + 1
    with pytest.raises(ValueError, match="pos must be <="):
        cache.truncate(T + 2)
    cache.reset()
    assert cache.pos == 0 and cache.nbytes == 0
