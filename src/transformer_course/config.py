"""One frozen dataclass that describes every model of the course.

Leaf modules (attention, FFN, norm, block) take explicit arguments and work without it; the
models in ``models.py`` are built from a ``TransformerConfig``. Invalid values raise
``ValueError`` at construction, naming the field, the value and what is allowed.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ._checks import check_choice, check_float, check_int

# The allowed values of each choice live here; the modules that implement them import these names
# (``positional.py``/``models.py``, ``norm.py``, ``block.py``, ``ffn.py``), and so do the tests.
POSITIONAL_SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")
NORMS = ("layernorm", "rmsnorm")
NORM_POSITIONS = ("pre", "post")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")  # FeedForward's elementwise activations
FFN_ACTIVATIONS = (*ACTIVATIONS, "swiglu")  # SwiGLU replaces the whole FFN
ROPE_SCALINGS = ("linear", "ntk", "yarn")  # RopeScaling.kind


@dataclass(frozen=True)
class RopeScaling:
    """How RoPE reaches past the length a model was trained on (``positional.scaled_inverse_frequencies``).

    Attributes:
        kind: ``"linear"`` (position interpolation: every angle divided by ``factor``), ``"ntk"`` (NTK-aware:
            a larger base, so slow dimensions are interpolated and fast ones kept) or ``"yarn"`` (per
            dimension: keep the fast, interpolate the slow, a ramp between; and sharper attention).
        factor: the stretch, new length / trained length (``>= 1``).
        original_max_len: the length trained on; YaRN counts each dimension's turns within it.
        beta_fast, beta_slow: YaRN's ramp runs from dimensions turning ``beta_fast`` times within
            ``original_max_len`` (kept) to those turning ``beta_slow`` times (interpolated).
    """

    kind: str
    factor: float
    original_max_len: int | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, ROPE_SCALINGS)
        check_float("factor", self.factor, "[1, inf)")
        if self.kind == "yarn" and self.original_max_len is None:
            raise ValueError("kind='yarn' needs original_max_len (the length trained on), got None")
        if self.original_max_len is not None:
            check_int("original_max_len", self.original_max_len)
        check_float("beta_fast", self.beta_fast, "(0, inf)")
        check_float("beta_slow", self.beta_slow, "(0, inf)")


@dataclass(frozen=True, kw_only=True)
class TransformerConfig:
    """Sizes and architectural choices of a Transformer.

    Attributes:
        vocab_size: number of token ids ``V``.
        d_model: width ``C`` of the residual stream.
        n_heads: attention heads ``H``; must divide ``d_model`` (``d_head = d_model / n_heads``).
        n_kv_heads: key/value heads of self-attention; ``None`` (the default) means ``n_heads`` (multi-head
            attention); fewer, dividing ``n_heads``, is grouped-query attention (1: multi-query).
        n_layers: number of blocks.
        d_ff: hidden width of the feed-forward network (often ``4 · d_model``).
        max_len: the context length: learned positions exist only below it; the default KV cache size.
        positional: ``"learned"``, ``"sinusoidal"`` (added to the input), ``"rope"`` (rotates q, k),
            ``"alibi"`` (biases the scores) or ``"none"``.
        norm: ``"layernorm"`` or ``"rmsnorm"``; ``norm_eps`` its epsilon.
        norm_position: ``"pre"`` (GPT-2, Llama) or ``"post"`` (original Transformer, BERT).
        activation: ``"relu"``, ``"gelu"``, ``"gelu_tanh"`` (GPT-2's approximation) or ``"swiglu"``.
        dropout: probability for attention weights, residual branches and embeddings.
        bias: whether Linear layers and LayerNorm have a bias.
        tie_embeddings: share the token embedding with the output layer (LM head).
        rope_base: the base ``θ`` of RoPE's frequencies.
        rope_scaling: a ``RopeScaling`` to run RoPE past the trained length, or ``None``.
        sliding_window: each position attends to itself and the ``sliding_window - 1`` before it (causal
            models; ``KVCache.from_config`` then makes a ``RollingKVCache`` of that many positions), or ``None``.
        n_experts: replace every block's FFN by a mixture of this many experts (``MoEFeedForward``), or
            ``None`` (one dense FFN); ``moe_top_k`` experts process each token.

    Example:
        >>> TransformerConfig(vocab_size=50, d_model=24, n_heads=3, n_layers=2, d_ff=40, max_len=16).d_head
        8
    """

    vocab_size: int
    d_model: int
    n_heads: int
    n_kv_heads: int | None = None
    n_layers: int
    d_ff: int
    max_len: int
    positional: str = "learned"
    norm: str = "layernorm"
    norm_position: str = "pre"
    activation: str = "gelu"
    dropout: float = 0.0
    bias: bool = True
    tie_embeddings: bool = True
    norm_eps: float = 1e-5
    rope_base: float = 10000.0
    rope_scaling: RopeScaling | None = None
    sliding_window: int | None = None
    n_experts: int | None = None
    moe_top_k: int = 2

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len"):
            check_int(name, getattr(self, name))
        check_choice("positional", self.positional, POSITIONAL_SCHEMES)
        check_choice("norm", self.norm, NORMS)
        check_choice("norm_position", self.norm_position, NORM_POSITIONS)
        check_choice("activation", self.activation, FFN_ACTIVATIONS)
        check_float("dropout", self.dropout, "[0, 1)")
        check_float("norm_eps", self.norm_eps, "(0, inf)")
        check_float("rope_base", self.rope_base, "(1, inf)")
        for name in ("bias", "tie_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.n_kv_heads is not None and self.n_heads % check_int("n_kv_heads", self.n_kv_heads):
            raise ValueError(f"n_kv_heads must divide n_heads={self.n_heads}, got n_kv_heads={self.n_kv_heads}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if self.positional == "rope" and self.d_head % 2:
            raise ValueError(f"positional='rope' needs an even d_head = d_model / n_heads, got d_head={self.d_head}")
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, RopeScaling):
            raise ValueError(f"rope_scaling must be a RopeScaling or None, got {self.rope_scaling!r}")
        if self.rope_scaling is not None and self.positional != "rope":
            raise ValueError(f"rope_scaling needs positional='rope', got positional={self.positional!r}")
        if self.sliding_window is not None:
            check_int("sliding_window", self.sliding_window)
        if self.n_experts is not None:
            if check_int("moe_top_k", self.moe_top_k) > check_int("n_experts", self.n_experts):
                raise ValueError(f"moe_top_k must be <= n_experts={self.n_experts}, got moe_top_k={self.moe_top_k}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"positional='sinusoidal' needs an even d_model, got d_model={self.d_model}")

    @property
    def d_head(self) -> int:
        """Width of one attention head, ``d_model / n_heads``."""
        return self.d_model // self.n_heads

    def replace(self, **changes: object) -> TransformerConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def gpt2_small(cls, **overrides: object) -> TransformerConfig:
        """GPT-2 small (124M parameters): 12 layers, 12 heads, d_model 768, vocab 50257, context 1024,
        pre-LN with LayerNorm (eps 1e-5), GELU (tanh approximation), learned positions, tied embeddings."""
        gpt2 = cls(
            vocab_size=50257,
            d_model=768,
            n_heads=12,
            n_layers=12,
            d_ff=3072,
            max_len=1024,
            positional="learned",
            norm="layernorm",
            norm_position="pre",
            activation="gelu_tanh",
            dropout=0.1,
            bias=True,
            tie_embeddings=True,
            norm_eps=1e-5,
        )
        return gpt2.replace(**overrides)
