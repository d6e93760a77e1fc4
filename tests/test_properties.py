"""Property tests over random shapes (hypothesis): the invariants the book teaches hold for every
shape, not just the ones a test author picked."""
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import transformer_course as tc
from tiny import tiny_config

dims = st.integers(min_value=1, max_value=6)
FAST = settings(max_examples=25, deadline=None)


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@FAST
@given(b=dims, t_q=dims, t_k=dims, d_k=dims, d_v=dims, seed=st.integers(0, 2**16), masked=st.booleans())
def test_attention_weights_are_distributions(b, t_q, t_k, d_k, d_v, seed, masked):
    q, k, v = _randn(seed, b, t_q, d_k), _randn(seed + 1, b, t_k, d_k), _randn(seed + 2, b, t_k, d_v)
    mask = _randn(seed + 3, t_q, t_k) > 0 if masked else None
    out, w = tc.scaled_dot_product_attention(q, k, v, mask=mask)
    assert out.shape == (b, t_q, d_v) and w.shape == (b, t_q, t_k)
    assert (w >= 0).all() and not out.isnan().any()
    rows = torch.ones(t_q, dtype=torch.bool) if mask is None else mask.any(-1)  # rows with a visible key
    torch.testing.assert_close(w.sum(-1)[:, rows], torch.ones(b, int(rows.sum())))
    assert (w.sum(-1)[:, ~rows] == 0).all()  # a fully masked row is zeros, never NaN


@FAST
@given(t=st.integers(2, 12), cut=st.integers(1, 11),
       positional=st.sampled_from(["learned", "sinusoidal", "rope", "alibi", "none"]), seed=st.integers(0, 2**16))
def test_causal_model_never_looks_ahead(t, cut, positional, seed):
    cut = min(cut, t - 1)
    tc.set_seed(seed % 1000)
    model = tc.DecoderOnly(tiny_config(positional=positional)).eval()
    idx = torch.randint(0, 50, (2, t), generator=torch.Generator().manual_seed(seed))
    changed = idx.clone()
    changed[:, cut:] = (changed[:, cut:] + 1) % 50  # change every token from `cut` on
    with torch.no_grad():
        torch.testing.assert_close(model(idx)[:, :cut], model(changed)[:, :cut])


@FAST
@given(t=st.integers(2, 10), seed=st.integers(0, 2**16))
def test_attention_without_positions_is_permutation_equivariant(t, seed):
    tc.set_seed(seed % 1000)
    attn = tc.MultiHeadAttention(24, 3).eval()
    x = _randn(seed, 2, t, 24)
    perm = torch.randperm(t, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        torch.testing.assert_close(attn(x[:, perm])[0], attn(x)[0][:, perm], atol=1e-5, rtol=1e-5)


@FAST
@given(m=st.integers(0, 200), n=st.integers(0, 200), shift=st.integers(0, 300), seed=st.integers(0, 2**16))
def test_rope_score_depends_only_on_offset(m, n, shift, seed):
    rope = tc.RotaryEmbedding(8)
    q, k = _randn(seed, 8), _randn(seed + 1, 8)

    def score(pm: int, pn: int) -> torch.Tensor:
        cos, sin = rope(torch.tensor([pm, pn]))  # (2, 8) each
        rotated_q = tc.apply_rope(q[None], cos[:1], sin[:1])
        rotated_k = tc.apply_rope(k[None], cos[1:], sin[1:])
        return (rotated_q * rotated_k).sum()

    torch.testing.assert_close(score(m, n), score(m + shift, n + shift), atol=1e-3, rtol=1e-4)
