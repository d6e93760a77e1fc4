"""Generation: cached == uncached (tokens and logits), sampling filters, temperature -> 0 is argmax."""
from __future__ import annotations

import pytest
import torch
from tiny import B, T, VOCAB, tiny_config

from transformer_course.generate import (
    generate,
    greedy,
    next_token,
    sample,
    scale_by_temperature,
    top_k_filter,
    top_p_filter,
)
from transformer_course.kv_cache import KVCache
from transformer_course.models import DecoderOnly

CONFIGS = {
    "learned": {},
    "sinusoidal": {"positional": "sinusoidal", "norm_position": "post"},
    "rope": {"positional": "rope", "norm": "rmsnorm", "activation": "swiglu", "bias": False},
    "alibi": {"positional": "alibi", "activation": "relu"},
    "none": {"positional": "none", "tie_embeddings": False},
}


def _model(name: str) -> DecoderOnly:
    torch.manual_seed(0)
    return DecoderOnly(tiny_config(n_layers=3, max_len=24, **CONFIGS[name])).double().eval()


def _prompt(length: int = T) -> torch.Tensor:
    return torch.randint(0, VOCAB, (B, length), generator=torch.Generator().manual_seed(2))


@pytest.mark.parametrize("name", CONFIGS)
def test_greedy_tokens_are_the_same_with_and_without_the_cache(name):
    model, prompt = _model(name), _prompt()
    cached = generate(model, prompt, 12, temperature=0.0, use_cache=True)
    uncached = generate(model, prompt, 12, temperature=0.0, use_cache=False)
    assert cached.shape == (B, T + 12)
    assert torch.equal(cached[:, :T], prompt)
    assert torch.equal(cached, uncached)


@pytest.mark.parametrize("name", ["learned", "rope", "alibi"])
def test_cached_logits_equal_uncached_logits(name):
    model = _model(name).float()
    tokens = _prompt(20)
    cache = KVCache.from_config(model.config, batch_size=B)
    with torch.inference_mode():
        cached = [model.next_token_logits(tokens[:, :5], cache=cache)]  # prefill
        cached += [model.next_token_logits(tokens[:, t - 1 : t], cache=cache) for t in range(6, 21)]  # decode
        uncached = [model.next_token_logits(tokens[:, :t]) for t in range(5, 21)]
    torch.testing.assert_close(torch.stack(cached), torch.stack(uncached), atol=1e-5, rtol=0)


def test_sampling_with_the_same_generator_seed_repeats():
    model, prompt = _model("rope"), _prompt()

    def run(seed: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        return generate(model, prompt, 8, temperature=1.5, top_k=20, top_p=0.9, generator=g)

    assert torch.equal(run(0), run(0))
    assert not torch.equal(run(0), run(1))


def test_temperature_towards_zero_is_argmax():
    logits = torch.randn(64, VOCAB, generator=torch.Generator().manual_seed(0))
    best = logits.argmax(-1, keepdim=True)  # (64, 1)
    p_best = [scale_by_temperature(logits, t).softmax(-1).gather(-1, best).min() for t in (1.0, 0.1, 0.01, 1e-6)]
    assert p_best == sorted(p_best) and p_best[-1] == 1.0  # the argmax takes all the probability
    g = torch.Generator().manual_seed(0)
    assert torch.equal(next_token(logits, temperature=1e-6, generator=g), best.squeeze(-1))
    assert torch.equal(next_token(logits, temperature=0.0), greedy(logits))


def test_sample_follows_the_softmax_probabilities():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([sample(logits, generator=g) for _ in range(4000)])
    frequencies = torch.bincount(draws.flatten(), minlength=4) / 4000
    torch.testing.assert_close(frequencies, logits.softmax(-1)[0], atol=0.03, rtol=0)


def test_top_k_and_top_p_keep_the_right_tokens():
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(0))
    kept = top_k_filter(logits, 5).isfinite()
    assert (kept.sum(-1) == 5).all()
    assert torch.equal(kept, torch.zeros_like(kept).scatter(-1, logits.topk(5).indices, True))

    probs = logits.softmax(-1)
    nucleus = top_p_filter(logits, 0.6).isfinite()
    for row in range(3):
        kept_mass = probs[row][nucleus[row]].sort(descending=True).values
        assert kept_mass.sum() >= 0.6 and kept_mass[:-1].sum() < 0.6  # the smallest such set
        assert probs[row][~nucleus[row]].max() <= kept_mass.min()  # and it holds the most likely tokens
    assert torch.equal(top_p_filter(logits, 1.0), logits)
    wide = torch.randn(50257, generator=torch.Generator().manual_seed(0)) * 3  # a GPT-2-sized vocabulary
    assert top_p_filter(wide, 1.0).isfinite().all()  # float32 rounding of the running sum drops no tail


def test_generating_past_learned_positions_raises():
    model = DecoderOnly(tiny_config(max_len=10)).eval()
    with pytest.raises(ValueError, match="max_len=10"):
        generate(model, _prompt(8), 5)



def test_generate_steps_feed_the_prompt_once_then_one_token_and_end_where_generate_ends():
    from transformer_course.generate import generate_steps
    from transformer_course.utils import LINEAR_OPS, count_flops

    torch.manual_seed(0)
    model = DecoderOnly(tiny_config(positional="rope", max_len=T + 6)).eval()
    idx = torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(2))
    flops_of = {}
    for use_cache in (True, False):
        steps = generate_steps(model, idx, 6, use_cache=use_cache, temperature=0.7,
                               generator=torch.Generator().manual_seed(5))
        taken = []
        flops = [count_flops(lambda: taken.append(next(steps)), LINEAR_OPS) for _ in range(6)]  # one step each
        with pytest.raises(StopIteration):
            next(steps)
        expected = generate(model, idx, 6, use_cache=use_cache, temperature=0.7,
                            generator=torch.Generator().manual_seed(5))
        assert torch.equal(taken[-1].tokens, expected)
        assert all(s.logits.shape == (B, VOCAB) and torch.equal(s.tokens[:, :T], idx) for s in taken)
        fed = [s.fed.shape[1] for s in taken]
        assert fed == ([T, 1, 1, 1, 1, 1] if use_cache else list(range(T, T + 6)))
        flops_of[use_cache] = flops
    cached, full = flops_of[True], flops_of[False]
    per_token = full[1] - full[0]  # the blocks' Linear FLOPs of one more position (the LM head reads the last)
    assert cached[0] == full[0] and len(set(cached[1:])) == 1 and cached[0] - cached[1] == (T - 1) * per_token
    assert all(b - a == per_token for a, b in zip(full, full[1:]))  # uncached: one position more each step


def test_generate_steps_use_a_given_empty_cache_and_refuse_a_filled_one():
    from transformer_course.generate import generate_steps

    torch.manual_seed(0)
    model = DecoderOnly(tiny_config()).eval()
    idx = torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(2))
    cache = KVCache.from_config(model.config, batch_size=B, max_len=T + 3)
    out = [s.tokens for s in generate_steps(model, idx, 3, cache=cache, temperature=0.0)][-1]
    assert cache.pos == T + 2 and torch.equal(out, generate(model, idx, 3, temperature=0.0))
    with pytest.raises(ValueError, match="must be empty"):
        next(generate_steps(model, idx, 1, cache=cache))
    with pytest.raises(ValueError, match="use_cache=False"):
        next(generate_steps(model, idx, 1, cache=KVCache.from_config(model.config, batch_size=B), use_cache=False))
