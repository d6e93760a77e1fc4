"""《Transformer 架构原理：可执行课程》的共享实现。Import as ``import transformer_course as tc``."""
from __future__ import annotations

import importlib
from types import ModuleType

from . import data
from .attention import (
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
    tiled_attention,
)
from .block import PostNormResidual, PreNormResidual, TransformerBlock
from .config import RopeScaling, TransformerConfig
from .ffn import FeedForward, SwiGLU
from .generate import (
    Step,
    generate,
    generate_steps,
    greedy,
    next_token,
    sample,
    scale_by_temperature,
    top_k_filter,
    top_p_filter,
)
from .kv_cache import KVCache, RollingKVCache, kv_cache_bytes
from .hf import from_hf_gpt2, from_hf_llama, load_gpt2_state_dict, load_llama_state_dict
from .models import DecoderOnly, EncoderDecoder, EncoderOnly, TransformerStack
from .moe import MoEFeedForward, load_balancing_loss
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .norm import LayerNorm, RMSNorm
from .positional import (
    ALiBi,
    LearnedPositions,
    RotaryEmbedding,
    SinusoidalPositions,
    alibi_slopes,
    apply_rope,
    rotate_half,
    sinusoidal_table,
)
from .rnn import LSTM, RNN, RecurrentLM
from .tokenizer import BPETokenizer
from .trace import AttentionTrace, LayerTrace, Trace
from .train import accuracy, lm_loss, train, warmup_cosine
from .utils import (LINEAR_OPS, claim, count_flops, count_params, flops_by_op, get_device, machine, set_seed,
                    time_call)

__version__ = "0.1.0"

_ON_FIRST_USE = ("exercises", "viz")  # the checkers and matplotlib: the model does not need them


def __getattr__(name: str) -> ModuleType:
    """``tc.exercises`` and ``tc.viz`` are imported on first use (``import transformer_course`` stays light)."""
    if name in _ON_FIRST_USE:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "LINEAR_OPS",
    "ALiBi",
    "AttentionTrace",
    "BPETokenizer",
    "DecoderOnly",
    "EncoderDecoder",
    "EncoderOnly",
    "FeedForward",
    "KVCache",
    "LSTM",
    "LayerNorm",
    "LayerTrace",
    "LearnedPositions",
    "MoEFeedForward",
    "MultiHeadAttention",
    "PostNormResidual",
    "PreNormResidual",
    "RMSNorm",
    "RNN",
    "RecurrentLM",
    "RollingKVCache",
    "RopeScaling",
    "RotaryEmbedding",
    "SinusoidalPositions",
    "Step",
    "SwiGLU",
    "Trace",
    "TransformerBlock",
    "TransformerConfig",
    "TransformerStack",
    "accuracy",
    "alibi_slopes",
    "apply_rope",
    "causal_mask",
    "claim",
    "count_flops",
    "count_params",
    "data",
    "exercises",
    "flops_by_op",
    "from_hf_gpt2",
    "from_hf_llama",
    "generate",
    "generate_steps",
    "get_device", "machine",
    "greedy",
    "kv_cache_bytes",
    "lm_loss",
    "load_balancing_loss",
    "load_gpt2_state_dict",
    "load_llama_state_dict",
    "merge_heads",
    "next_token",
    "padding_mask",
    "rotate_half",
    "sample",
    "scale_by_temperature",
    "scaled_dot_product_attention",
    "set_seed",
    "sinusoidal_table",
    "sliding_window_mask",
    "split_heads",
    "tiled_attention",
    "time_call",
    "top_k_filter",
    "top_p_filter",
    "train",
    "viz",
    "warmup_cosine",
]
