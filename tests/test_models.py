"""The three architectures: GPT-2 parity with Hugging Face, causality, bidirectionality, cross-attention."""
from __future__ import annotations

import pytest
import torch
from tiny import B, MAX_LEN, T, VOCAB, tiny_config

from transformer_course.config import POSITIONAL_SCHEMES
from transformer_course.kv_cache import KVCache
from transformer_course.hf import from_hf_gpt2
from transformer_course.models import DecoderOnly, EncoderDecoder, EncoderOnly

S = 5  # source length for the encoder-decoder, different from T


@pytest.fixture(scope="module")
def hf_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB, n_positions=MAX_LEN, n_embd=24, n_layer=2, n_head=3, n_inner=40,
        bos_token_id=0, eos_token_id=0
    )
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # HF starts biases at 0 and norms at 1: perturb them so that their mapping is tested
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p) if p.dim() == 1 else 0.02 * torch.randn_like(p))
    return model


def _idx(length: int = T) -> torch.Tensor:
    return torch.randint(0, VOCAB, (B, length), generator=torch.Generator().manual_seed(1))


def test_gpt2_weights_give_hugging_face_logits(hf_gpt2):
    model = from_hf_gpt2(hf_gpt2).eval()
    assert model.config.activation == "gelu_tanh" and model.config.d_ff == 40
    idx = _idx(MAX_LEN)
    with torch.no_grad():
        expected = hf_gpt2(idx).logits
        torch.testing.assert_close(model(idx), expected, atol=1e-5, rtol=0)


def test_gpt2_weights_give_hugging_face_logits_with_the_cache(hf_gpt2):
    model = from_hf_gpt2(hf_gpt2).eval()
    idx = _idx(MAX_LEN)
    cache = KVCache.from_config(model.config, batch_size=B)
    with torch.inference_mode():
        expected = hf_gpt2(idx).logits
        prefill = model(idx[:, :6], cache=cache)
        steps = [model(idx[:, t : t + 1], cache=cache) for t in range(6, MAX_LEN)]
    torch.testing.assert_close(torch.cat([prefill, *steps], dim=1), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("flag, value", [("scale_attn_weights", False), ("scale_attn_by_inverse_layer_idx", True),
                                         ("reorder_and_upcast_attn", True), ("add_cross_attention", True)])
def test_gpt2_loader_refuses_flags_it_does_not_implement(hf_gpt2, flag, value):
    from transformers import GPT2LMHeadModel

    config = hf_gpt2.config.to_dict()
    config[flag] = value
    other = GPT2LMHeadModel(type(hf_gpt2.config).from_dict(config)).eval()
    with pytest.raises(ValueError, match=f"{flag}={value}"):
        from_hf_gpt2(other)
    if flag != "add_cross_attention":  # the refusal matters: the flag changes the logits
        other.load_state_dict(hf_gpt2.state_dict())
        idx = _idx(MAX_LEN)
        with torch.no_grad():
            gap = (other(idx).logits - hf_gpt2(idx).logits).abs().max().item()
        # beyond the parity tolerance (1e-5); upcasting changes nothing in float32
        assert gap > 2e-5 or flag == "reorder_and_upcast_attn", gap


@pytest.mark.parametrize("positional", POSITIONAL_SCHEMES)
def test_decoder_logits_at_t_ignore_tokens_after_t(positional):
    model = DecoderOnly(tiny_config(positional=positional, norm_position="post", activation="swiglu")).eval()
    idx = _idx()
    changed = idx.clone()
    changed[:, 4:] = (changed[:, 4:] + 1) % VOCAB
    logits, changed_logits = model(idx), model(changed)
    assert logits.shape == (B, T, VOCAB)
    torch.testing.assert_close(logits[:, :4], changed_logits[:, :4])
    assert not torch.allclose(logits[:, 4:], changed_logits[:, 4:])


def test_decoder_refuses_a_sequence_longer_than_learned_positions():
    model = DecoderOnly(tiny_config(positional="learned"))
    with pytest.raises(ValueError, match="max_len=16"):
        model(_idx(MAX_LEN + 1))
    assert DecoderOnly(tiny_config(positional="alibi"))(_idx(MAX_LEN + 1)).shape == (B, MAX_LEN + 1, VOCAB)


def test_encoder_is_bidirectional_and_ignores_padding():
    model = EncoderOnly(tiny_config(positional="rope", norm="rmsnorm")).eval()
    idx = _idx()
    changed = idx.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % VOCAB
    assert not torch.allclose(model(idx)[:, :5], model(changed)[:, :5])  # earlier positions see later ones
    real = (torch.arange(T) < 5).expand(B, T)  # positions 5, 6 are padding
    torch.testing.assert_close(model(idx, attention_mask=real)[:, :5], model(changed, attention_mask=real)[:, :5])


def test_encoder_decoder_reads_the_source_through_cross_attention():
    model = EncoderDecoder(tiny_config(positional="sinusoidal", norm_position="post")).eval()
    src, tgt = _idx(S), _idx(T)
    logits = model(src, tgt)
    assert logits.shape == (B, T, VOCAB)
    other_src = (src + 1) % VOCAB
    assert not torch.allclose(logits, model(other_src, tgt))
    real = torch.arange(S) < torch.tensor([S, 3])[:, None]  # (B, S): sequence 1 has 2 padding positions
    padded = src.clone()
    padded[1, 3:] = 0  # change only sequence 1's padding
    torch.testing.assert_close(model(src, tgt, attention_mask=real), model(padded, tgt, attention_mask=real))


# One padding convention for the three models: attention_mask (B, positions), False at padding, wherever it
# is. Rows of different lengths padded left, right and in the middle (token 0 as padding and as a real token)
# give, at every real position, what each row gives alone; every positional scheme.
_ROWS = [[0, 5, 3, 9, 2], [7, 0], [4, 4, 8]]  # real tokens; the batch pads them to 7 positions
_PADDINGS = {"right": lambda n: [True] * n + [False] * (7 - n), "left": lambda n: [False] * (7 - n) + [True] * n,
             "middle": lambda n: [True] * (n - n // 2) + [False] * (7 - n) + [True] * (n // 2)}


def _padded(where: str, pad_id: int = 11) -> tuple[torch.Tensor, torch.Tensor]:
    real = torch.tensor([_PADDINGS[where](len(r)) for r in _ROWS])  # (3, 7)
    idx = torch.full(real.shape, pad_id)
    idx[real] = torch.tensor([t for r in _ROWS for t in r])
    return idx, real


@pytest.mark.parametrize("where", list(_PADDINGS))
@pytest.mark.parametrize("positional", POSITIONAL_SCHEMES)
def test_every_model_takes_attention_mask_and_each_row_then_equals_the_row_alone(where: str, positional: str):
    torch.manual_seed(4)
    config = tiny_config(positional=positional)
    idx, real = _padded(where)
    tgt = torch.tensor([[1, 6, 2, 9]] * 3)  # (3, 4)
    for model in (EncoderOnly(config).eval(), DecoderOnly(config).eval(), EncoderDecoder(config).eval()):
        with torch.no_grad():
            if isinstance(model, EncoderDecoder):
                batch = model(idx, tgt, attention_mask=real)  # (3, 4, V): every target position is real
                alone = [model(torch.tensor([r]), tgt[:1])[0] for r in _ROWS]
                got = list(batch)
            else:
                batch = model(idx, attention_mask=real.long())  # 0/1 works as bool
                alone = [model(torch.tensor([r]))[0] for r in _ROWS]
                got = [batch[i][real[i]] for i in range(3)]  # (n_i, V): the real positions
            other = model(*(_padded(where, pad_id=3)[0], tgt) if isinstance(model, EncoderDecoder) else
                          (_padded(where, pad_id=3)[0],), attention_mask=real)
        for g, a in zip(got, alone):
            torch.testing.assert_close(g, a, atol=2e-5, rtol=0)
        if isinstance(model, EncoderDecoder):  # another padding token changes nothing real
            torch.testing.assert_close(other, batch, atol=2e-5, rtol=0)
        else:
            torch.testing.assert_close(other[real], batch[real], atol=2e-5, rtol=0)
        if not (isinstance(model, DecoderOnly) and where == "right"):  # (a causal model never sees right padding)
            with torch.no_grad():  # the mutation: without the mask, real positions change
                plain = model(idx, tgt) if isinstance(model, EncoderDecoder) else model(idx)
            changed = (plain - batch).abs().amax(-1)  # (3, positions)
            assert (changed if isinstance(model, EncoderDecoder) else changed[real]).max() > 1e-3


def test_encoder_decoder_cached_decoding_equals_full():
    model = EncoderDecoder(tiny_config(positional="alibi")).eval()
    src, tgt = _idx(S), _idx(T)
    cache = KVCache.from_config(model.config, batch_size=B)
    with torch.inference_mode():
        memory = model.encode(src)
        steps = [model.decode(tgt[:, t : t + 1], memory, cache=cache) for t in range(T)]
        torch.testing.assert_close(torch.cat(steps, dim=1), model(src, tgt), atol=1e-5, rtol=0)


def test_tied_embeddings_share_one_matrix():
    tied, untied = DecoderOnly(tiny_config()), DecoderOnly(tiny_config(tie_embeddings=False))
    assert tied.lm_head.weight is tied.transformer.tok_emb.weight
    assert untied.lm_head.weight is not untied.transformer.tok_emb.weight


@pytest.mark.parametrize("positional", POSITIONAL_SCHEMES)
def test_a_decoding_step_never_reads_tensor_values(positional):
    """No host synchronisation on the decode hot path: on the meta device (shapes, no values) reading a value
    raises, so a decoding step must run through while a prefill, whose token ids are checked, may not."""
    config = tiny_config(positional=positional)
    with torch.device("meta"):
        model = DecoderOnly(config).eval()
        cache = KVCache.from_config(config, batch_size=B, device="meta")
        cache.advance(T)  # as if the prompt had been read
        with torch.inference_mode():
            logits = model(torch.zeros(B, 1, dtype=torch.long), cache=cache)
            assert logits.shape == (B, 1, VOCAB) and cache.pos == T + 1
            with pytest.raises((RuntimeError, NotImplementedError)):
                model(torch.zeros(B, T, dtype=torch.long))  # a prefill checks idx's values
