"""Weights from Hugging Face ``transformers``: ``from_hf_gpt2`` (``GPT2LMHeadModel``) and ``from_hf_llama``
(``LlamaForCausalLM``, ``MistralForCausalLM``) build a ``DecoderOnly`` with the same configuration and weights.

Neither imports ``transformers``: they read ``hf_model.config`` and ``hf_model.state_dict()``. A
configuration value that would make our model compute something else (a RoPE scaling we lack, biases
where we have none, …) raises ``ValueError`` naming it, rather than giving other logits silently.
"""
from __future__ import annotations

import re
from typing import Any

import torch
from torch import Tensor

from .config import RopeScaling, TransformerConfig
from .models import DecoderOnly


def _load_strictly(model: DecoderOnly, state_dict: dict[str, Tensor]) -> None:
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as error:  # missing, unexpected or mis-shaped entries, listed by torch
        raise ValueError(f"hf_state_dict does not fit model: {error}") from None


def _like(model: DecoderOnly, hf_model: Any) -> DecoderOnly:
    first = next(hf_model.parameters())
    return model.to(device=first.device, dtype=first.dtype)  # where and in what the HF model is


# --- GPT-2 ---------------------------------------------------------------------------------------

_GPT2_NAMES = {  # Hugging Face GPT-2 name -> ours; HF's Conv1D stores Linear weights transposed
    "ln_1": ("self_attn_residual.norm", False),
    "attn.c_attn": ("self_attn.qkv_proj", True),
    "attn.c_proj": ("self_attn.out_proj", True),
    "ln_2": ("ffn_residual.norm", False),
    "mlp.c_fc": ("ffn.up", True),
    "mlp.c_proj": ("ffn.down", True),
}
_GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
# GPT2Config flags that change what the model computes, with the value this package implements
_GPT2_FLAGS = {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
               "reorder_and_upcast_attn": False, "add_cross_attention": False}


def load_gpt2_state_dict(model: DecoderOnly, hf_state_dict: dict[str, Tensor]) -> None:
    """Copy a Hugging Face ``GPT2LMHeadModel`` state dict into ``model`` (in place, strictly).

    Renames ``transformer.h.{i}.attn.c_attn`` to ``transformer.blocks.{i}.self_attn.qkv_proj`` etc.
    and transposes the Conv1D weights ``(in, out)`` to Linear's ``(out, in)``.
    """
    renamed = {}
    for name, tensor in hf_state_dict.items():
        block = re.fullmatch(r"transformer\.h\.(\d+)\.(.+)\.(weight|bias)", name)
        if block and block[2] in _GPT2_NAMES:
            ours, transpose = _GPT2_NAMES[block[2]]
            name, tensor = f"transformer.blocks.{block[1]}.{ours}.{block[3]}", tensor.t() if transpose else tensor
        else:
            for hf, ours in (("wte.", "tok_emb."), ("wpe.", "pos_emb.embedding."), ("ln_f.", "final_norm.")):
                name = name.replace(hf, ours)
        renamed[name] = tensor
    _load_strictly(model, renamed)


def from_hf_gpt2(hf_model: Any) -> DecoderOnly:
    """A ``DecoderOnly`` with the configuration and weights of a ``transformers.GPT2LMHeadModel``.

    Needs no import of ``transformers``: it reads ``hf_model.config`` and ``hf_model.state_dict()``.
    Configuration flags that would change the logits (``scale_attn_by_inverse_layer_idx=True``, …) raise
    ``ValueError``.
    """
    c = hf_model.config
    for flag, implemented in _GPT2_FLAGS.items():  # refuse what would silently give other logits
        if getattr(c, flag, implemented) != implemented:
            raise ValueError(f"{flag}={getattr(c, flag)!r} is not implemented (only {flag}={implemented})")
    if c.activation_function not in _GPT2_ACTIVATIONS:
        allowed = sorted(_GPT2_ACTIVATIONS)
        raise ValueError(f"activation_function must be one of {allowed}, got {c.activation_function!r}")
    config = TransformerConfig(
        vocab_size=c.vocab_size,
        d_model=c.n_embd,
        n_heads=c.n_head,
        n_layers=c.n_layer,
        d_ff=c.n_inner or 4 * c.n_embd,
        max_len=c.n_positions,
        activation=_GPT2_ACTIVATIONS[c.activation_function],
        norm_eps=c.layer_norm_epsilon,
        tie_embeddings=c.tie_word_embeddings,
    )
    model = DecoderOnly(config)
    load_gpt2_state_dict(model, hf_model.state_dict())
    return _like(model, hf_model)


# --- Llama (and the models that share its layout: RoPE, RMSNorm, SwiGLU, no biases, GQA) ----------

_LLAMA_NAMES = {  # Hugging Face Llama name -> ours; q, k and v are stacked into one qkv_proj
    "self_attn.o_proj": "self_attn.out_proj",
    "mlp.gate_proj": "ffn.gate",
    "mlp.up_proj": "ffn.up",
    "mlp.down_proj": "ffn.down",
    "input_layernorm": "self_attn_residual.norm",
    "post_attention_layernorm": "ffn_residual.norm",
}
# LlamaConfig values that change what the model computes, with the value this package implements
_LLAMA_FLAGS = {"hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1}


def _llama_rope(c: Any) -> tuple[float, RopeScaling | None]:
    """``rope_theta`` and the RoPE scaling (``rope_scaling`` in transformers 4, ``rope_parameters`` in 5):
    none, ``linear`` or ``yarn`` with the paper's attention factor; any other kind or option is refused."""
    params = dict(getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None) or {})
    base = float(params.pop("rope_theta", getattr(c, "rope_theta", 10000.0)))
    kind = params.pop("rope_type", params.pop("type", "default"))
    if kind == "default":
        return base, None
    if kind not in ("linear", "yarn"):
        raise ValueError(f"rope scaling rope_type={kind!r} is not implemented (only 'default', 'linear', 'yarn')")
    factor = params.pop("factor", None)
    original = params.pop("original_max_position_embeddings", None)
    beta = {"beta_fast": params.pop("beta_fast", None) or 32.0, "beta_slow": params.pop("beta_slow", None) or 1.0}
    if params.pop("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError("rope scaling partial_rotary_factor != 1 is not implemented (every dimension rotates)")
    if kind == "yarn" and params.pop("truncate", True) is not True:
        raise ValueError("rope scaling truncate=False is not implemented (only YaRN's rounded ramp ends)")
    unknown = {key: value for key, value in params.items() if value is not None}  # attention_factor, mscale, …
    if unknown or factor is None:
        raise ValueError(f"rope scaling options {unknown or {'factor': None}} are not implemented "
                         "(only factor, original_max_position_embeddings, beta_fast, beta_slow)")
    if kind == "linear":
        return base, RopeScaling("linear", float(factor))
    return base, RopeScaling("yarn", float(factor), int(original or c.max_position_embeddings), **beta)


def _llama_window(c: Any) -> int | None:
    """Mistral's ``sliding_window``, or ``None`` (Llama has none; Qwen2-style configs may turn it off).

    transformers' eager mask keeps key ``j`` for query ``i`` iff ``i - W < j <= i``: ``W`` keys including
    itself, as our ``sliding_window`` (measured: equal logits; ``W ± 1`` differ). One window for every layer:
    ``layer_types`` that mix full and sliding attention are refused."""
    window = getattr(c, "sliding_window", None) if getattr(c, "use_sliding_window", True) else None
    kinds = set(getattr(c, "layer_types", None) or ())
    if window is not None and kinds - {"sliding_attention"}:
        raise ValueError(f"layer_types={sorted(kinds)} is not implemented with sliding_window={window} "
                         "(only one window for every layer)")
    return window


def load_llama_state_dict(model: DecoderOnly, hf_state_dict: dict[str, Tensor]) -> None:
    """Copy a Hugging Face ``LlamaForCausalLM`` state dict into ``model`` (in place, strictly).

    ``model.layers.{i}.self_attn.{q,k,v}_proj`` become one ``transformer.blocks.{i}.self_attn.qkv_proj``
    (rows ``[W_Q; W_K; W_V]``); the other names map one to one (``mlp.gate_proj`` -> ``ffn.gate`` …).
    """
    renamed: dict[str, Tensor] = {}
    qkv: dict[str, dict[str, Tensor]] = {}
    for name, tensor in hf_state_dict.items():
        if name.endswith("rotary_emb.inv_freq"):  # a buffer some versions save; ours is computed
            continue
        layer = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.weight", name)
        if layer and layer[2] in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"):
            qkv.setdefault(layer[1], {})[layer[2][-6]] = tensor  # "q", "k" or "v"
            continue
        if layer and layer[2] in _LLAMA_NAMES:
            name = f"transformer.blocks.{layer[1]}.{_LLAMA_NAMES[layer[2]]}.weight"
        else:
            for hf, ours in (("model.embed_tokens.", "transformer.tok_emb."),
                             ("model.norm.", "transformer.final_norm.")):
                name = name.replace(hf, ours)
        renamed[name] = tensor
    for i, parts in qkv.items():
        if len(parts) != 3:
            raise ValueError(f"hf_state_dict: layer {i} needs q_proj, k_proj and v_proj, got {sorted(parts)}")
        renamed[f"transformer.blocks.{i}.self_attn.qkv_proj.weight"] = torch.cat([parts[x] for x in "qkv"])
    _load_strictly(model, renamed)


def from_hf_llama(hf_model: Any) -> DecoderOnly:
    """A ``DecoderOnly`` with the configuration and weights of a ``transformers.LlamaForCausalLM``.

    Implemented: RoPE (unscaled, linear or YaRN), RMSNorm, SwiGLU (``silu``), no biases, grouped-query attention
    (``num_key_value_heads``), tied or untied embeddings, Mistral's ``sliding_window`` (every layer).
    Anything else raises ``ValueError`` by name.
    """
    c = hf_model.config
    for flag, implemented in _LLAMA_FLAGS.items():  # refuse what would silently give other logits
        if getattr(c, flag, implemented) != implemented:
            raise ValueError(f"{flag}={getattr(c, flag)!r} is not implemented "
                             f"(only {flag}={implemented!r})")
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    if head_dim * c.num_attention_heads != c.hidden_size:
        raise ValueError(f"head_dim={head_dim} is not implemented: heads must split hidden_size={c.hidden_size} "
                         f"(head_dim = hidden_size / num_attention_heads = {c.hidden_size / c.num_attention_heads})")
    rope_base, rope_scaling = _llama_rope(c)
    sliding_window = _llama_window(c)
    config = TransformerConfig(
        vocab_size=c.vocab_size,
        d_model=c.hidden_size,
        n_heads=c.num_attention_heads,
        n_kv_heads=getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
        n_layers=c.num_hidden_layers,
        d_ff=c.intermediate_size,
        max_len=c.max_position_embeddings,
        positional="rope",
        rope_base=rope_base,
        rope_scaling=rope_scaling,
        sliding_window=sliding_window,
        norm="rmsnorm",
        norm_eps=c.rms_norm_eps,
        activation="swiglu",
        bias=False,
        tie_embeddings=c.tie_word_embeddings,
    )
    model = DecoderOnly(config)
    load_llama_state_dict(model, hf_model.state_dict())
    return _like(model, hf_model)
