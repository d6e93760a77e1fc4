"""TransformerConfig: invalid fields are refused with a message naming them; GPT-2 small's size."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from tiny import tiny_config

from transformer_course.config import TransformerConfig
from transformer_course.models import DecoderOnly
from transformer_course.utils import count_params


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"n_heads": 5}, r"d_model=24 must be divisible by n_heads=5"),
        ({"positional": "relative"}, r"positional must be one of .*'rope'.*, got 'relative'"),
        ({"positional": "rope", "d_model": 18, "n_heads": 6}, r"even d_head = d_model / n_heads, got d_head=3"),
        ({"positional": "sinusoidal", "d_model": 15, "n_heads": 3}, r"even d_model, got d_model=15"),
        ({"d_model": 0}, r"d_model must be an int >= 1, got 0"),
        ({"n_layers": -1}, r"n_layers must be an int >= 1, got -1"),
        ({"vocab_size": 10.0}, r"vocab_size must be an int >= 1, got 10.0"),
        ({"norm": "batchnorm"}, r"norm must be one of \['layernorm', 'rmsnorm'\], got 'batchnorm'"),
        ({"norm_position": "middle"}, r"norm_position must be one of \['post', 'pre'\]"),
        ({"activation": "tanh"}, r"activation must be one of .*'swiglu'.*, got 'tanh'"),
        ({"dropout": 1.0}, r"dropout must be a number in \[0, 1\), got 1.0"),
        ({"norm_eps": 0.0}, r"norm_eps must be a number in \(0, inf\)"),
        ({"bias": "yes"}, r"bias must be a bool, got 'yes'"),
        ({"n_experts": 2, "moe_top_k": 3}, r"moe_top_k must be <= n_experts=2, got moe_top_k=3"),
        ({"n_experts": 0}, r"n_experts must be an int >= 1, got 0"),
    ],
)
def test_invalid_fields_raise_value_error_naming_them(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**overrides)


def test_config_is_frozen_and_keyword_only():
    config = tiny_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 32
    with pytest.raises(TypeError):
        TransformerConfig(50, 24, 3, 2, 40, 16)
    assert config.replace(positional="rope").positional == "rope"


def test_gpt2_small_has_124m_parameters():
    config = TransformerConfig.gpt2_small()
    sizes = (config.n_layers, config.n_heads, config.d_model, config.vocab_size, config.max_len)
    assert sizes == (12, 12, 768, 50257, 1024)
    with torch.device("meta"):  # shapes only: no memory, no time
        model = DecoderOnly(config)
    assert count_params(model) == 124_439_808  # the number Hugging Face reports for "gpt2"


def test_every_allowed_value_is_implemented():
    """The allowed values live in config.py; each module implements exactly those (adding one: docs/howto.md)."""
    from transformer_course import block, ffn, norm
    from transformer_course.config import ACTIVATIONS, FFN_ACTIVATIONS, NORM_POSITIONS, NORMS, POSITIONAL_SCHEMES
    from transformer_course.models import DecoderOnly

    assert set(ffn.ACTIVATION_MODULES) == set(ACTIVATIONS) and set(block.RESIDUALS) == set(NORM_POSITIONS)
    for kind in NORMS:
        assert isinstance(norm.make_norm(kind, 8), (norm.LayerNorm, norm.RMSNorm))
    for activation in FFN_ACTIVATIONS:
        assert isinstance(ffn.make_ffn(activation, 8, 12), (ffn.FeedForward, ffn.SwiGLU))
    for scheme in POSITIONAL_SCHEMES:  # each builds a model whose logits depend on where a token sits
        torch.manual_seed(0)
        model = DecoderOnly(TransformerConfig(vocab_size=11, d_model=8, n_heads=2, n_layers=1, d_ff=12, max_len=6,
                                              positional=scheme)).eval()
        last = model(torch.tensor([[3, 5, 7]]))[0, -1], model(torch.tensor([[5, 3, 7]]))[0, -1]  # (V,) each
        order_matters = not torch.allclose(*last, atol=1e-6)  # without positions attention sees a set
        assert order_matters == (scheme != "none"), scheme
