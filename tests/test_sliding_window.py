"""Sliding-window attention: the band mask, windowed models against a plain model given the band mask,
the rolling cache (constant size, decoding past the window and past max_len, prefill longer than the
window), and the receptive field that grows by ``window - 1`` positions per layer."""
from __future__ import annotations

import pytest
import torch

import transformer_course as tc


def band(t_q: int, t_k: int, window: int) -> torch.Tensor:
    """Brute force: query i sits at key index i + t_k - t_q and sees the window keys up to it."""
    q_at = torch.arange(t_q)[:, None] + t_k - t_q
    j = torch.arange(t_k)[None, :]
    return (j <= q_at) & (j > q_at - window)


@pytest.mark.parametrize("t_q,t_k,window", [(5, 5, 2), (3, 9, 4), (1, 7, 3), (6, 6, 1), (4, 4, 10)])
def test_sliding_window_mask_is_the_band(t_q: int, t_k: int, window: int) -> None:
    assert torch.equal(tc.sliding_window_mask(t_q, t_k, window), band(t_q, t_k, window))


def windowed(positional: str = "rope", window: int = 4, n_layers: int = 3, max_len: int = 16):
    config = tc.TransformerConfig(vocab_size=37, d_model=36, n_heads=6, n_kv_heads=2, n_layers=n_layers, d_ff=44,
                                  max_len=max_len, positional=positional, sliding_window=window, norm="rmsnorm")
    tc.set_seed(1)
    return tc.DecoderOnly(config).eval()


def ids(t: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 37, (2, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("positional", ["rope", "alibi", "learned"])
def test_windowed_model_is_the_plain_model_with_the_band_mask(positional: str) -> None:
    model = windowed(positional)
    plain = tc.DecoderOnly(model.config.replace(sliding_window=None)).eval()
    plain.load_state_dict(model.state_dict())
    idx = ids(13)
    with torch.no_grad():
        got = model.transformer(idx)
        expected = plain.transformer(idx, mask=band(13, 13, 4))
        unwindowed = plain.transformer(idx)
    assert (got - expected).abs().max() < 1e-6 and (got - unwindowed).abs().max() > 1e-3


@pytest.mark.parametrize("positional", ["rope", "alibi"])
def test_rolling_cache_decodes_like_the_full_forward_in_constant_memory(positional: str) -> None:
    model = windowed(positional)
    idx = ids(23, seed=1)  # longer than max_len=16: RoPE and ALiBi have no table to run out of
    cache = tc.KVCache.from_config(model.config, batch_size=2)
    assert isinstance(cache, tc.RollingKVCache) and cache.k.shape == (3, 2, 2, 4, 6)
    sizes = []
    with torch.no_grad():
        full = model(idx)
        first = model(idx[:, :10], cache=cache)  # a prompt longer than the window
        steps = [first] + [model(idx[:, t:t + 1], cache=cache) for t in range(10, 23)]
        sizes = [cache.nbytes]
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-5
    assert sizes == [tc.kv_cache_bytes(model.config, 4, batch_size=2)]  # 4 positions kept, not 23
    assert cache.pos == 23 and cache.first_kept == 19


def test_generation_past_the_window_and_max_len_equals_uncached() -> None:
    model = windowed("rope", max_len=12)
    prompt = ids(5, seed=2)
    cached = tc.generate(model, prompt, 20, temperature=0.0)  # 25 positions, window 4, max_len 12
    uncached = tc.generate(model, prompt, 20, use_cache=False, temperature=0.0)
    assert torch.equal(cached, uncached)
    cache = tc.KVCache.from_config(model.config, batch_size=2)
    with torch.no_grad():
        model(prompt, cache=cache)
    # a ring buffer cannot rewind (older positions were overwritten): it is not a KVCache, has no truncate
    assert not isinstance(cache, tc.KVCache) and not hasattr(cache, "truncate")
    cache.reset()
    assert cache.pos == 0 and cache.nbytes == 0


@pytest.mark.parametrize("n_layers,window", [(1, 3), (3, 3), (2, 5)])
def test_receptive_field_grows_by_window_minus_one_per_layer(n_layers: int, window: int) -> None:
    """The logits at the last position change when the token k positions back changes iff k <= L (W - 1)."""
    model = windowed("rope", window=window, n_layers=n_layers, max_len=32)
    idx = ids(20, seed=3)[:1]
    reach = n_layers * (window - 1)
    with torch.no_grad():
        base = model(idx)[0, -1]
        for k in range(1, 19):
            changed = idx.clone()
            changed[0, -1 - k] = (changed[0, -1 - k] + 1) % 37
            moved = not torch.equal(model(changed)[0, -1], base)
            assert moved == (k <= reach), f"k={k}, reach={reach}"
