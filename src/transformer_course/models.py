"""The three architectures, built from one ``TransformerStack`` (embeddings, blocks, final norm):

* ``EncoderOnly``: bidirectional attention and a masked-language-model head (BERT);
* ``DecoderOnly``: causal attention and a next-token head (GPT; ``hf.py`` loads GPT-2 and Llama weights);
* ``EncoderDecoder``: an encoder, and a causal decoder that cross-attends to it (the original Transformer).

Token ids ``idx`` are integer tensors ``(B, T)``; logits are ``(B, T, vocab_size)``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ._checks import check_tensor
from .attention import causal_mask, sliding_window_mask
from .block import TransformerBlock
from .config import TransformerConfig
from .kv_cache import Cache
from .moe import Routing
from .norm import make_norm
from .positional import ALiBi, LearnedPositions, RotaryEmbedding, SinusoidalPositions
from .trace import LayerTrace, Trace


def init_weights(module: nn.Module) -> None:
    """GPT-2's base initialisation: weights ``N(0, 0.02)``, biases 0 (norms keep their ones and zeros).

    GPT-2 also scales the residual projections (attention output, FFN down) by ``1/sqrt(2 * n_layers)``;
    this package does not, so that every layer starts alike and the chapters' small models stay simple.
    """
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def _input_positions(config: TransformerConfig) -> nn.Module | None:
    """The position table added to the token embeddings, for the schemes that have one."""
    if config.positional == "learned":
        return LearnedPositions(config.max_len, config.d_model)
    if config.positional == "sinusoidal":
        return SinusoidalPositions(config.d_model)
    return None


def make_lm_head(config: TransformerConfig, tok_emb: nn.Embedding) -> nn.Linear:
    """The output layer ``C -> vocab_size``; with ``tie_embeddings`` it shares ``tok_emb``'s ``(V, C)`` matrix."""
    lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
    if config.tie_embeddings:
        lm_head.weight = tok_emb.weight  # one matrix both reads tokens in and scores them out
    return lm_head


class TransformerStack(nn.Module):
    """Token embedding, positions, ``n_layers`` blocks and (pre-LN only) a final norm.

    ``forward(idx (B, T), ...) -> (B, T, C)``. ``causal=True`` adds the causal mask (a decoder);
    ``cross_attention=True`` gives every block cross-attention to a ``context``.
    """

    def __init__(self, config: TransformerConfig, *, causal: bool, cross_attention: bool = False) -> None:
        super().__init__()
        self.config, self.causal = config, causal
        C, scheme = config.d_model, config.positional
        self.tok_emb = nn.Embedding(config.vocab_size, C)
        # At most one of the three is set: positions added to the input, rotating q and k, or biasing scores.
        self.pos_emb = _input_positions(config)
        self.rope = (RotaryEmbedding(config.d_head, base=config.rope_base, scaling=config.rope_scaling)
                     if scheme == "rope" else None)
        self.alibi = ALiBi(config.n_heads) if scheme == "alibi" else None
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock.from_config(config, cross_attention=cross_attention) for _ in range(config.n_layers)
        )
        # Pre-LN leaves the residual stream unnormalised, so it ends with a norm; post-LN already has one.
        pre = config.norm_position == "pre"
        self.final_norm = make_norm(config.norm, C, eps=config.norm_eps, bias=config.bias) if pre else nn.Identity()

    def forward(
        self,
        idx: Tensor,
        *,
        mask: Tensor | None = None,
        cache: Cache | None = None,
        context: Tensor | None = None,
        context_mask: Tensor | None = None,
        trace: list[LayerTrace] | None = None,
        attention_mask: Tensor | None = None,
        routing: list[Routing] | None = None,
    ) -> Tensor:
        """Hidden states ``(B, T, C)`` of token ids ``idx (B, T)``.

        ``mask`` (bool, broadcastable to ``(B, H, T, Tk)``: which query may see which key, e.g. a prefix-LM
        or banded mask; advanced use, the models do not take it) is combined with the causal mask; with a
        ``cache`` the ``T`` tokens sit at positions ``cache.pos .. cache.pos+T-1``.
        ``context (B, S, C)`` and ``context_mask`` go to cross-attention. ``trace``: a list that gets
        one ``LayerTrace`` per block (attention weights, q, k, v, output); the models' ``inspect``.
        ``routing``: a list that gets each mixture-of-experts block's ``Routing`` (``n_experts`` set).
        ``attention_mask (B, start + T)`` (bool or 0/1, as in Hugging Face) marks real tokens over every
        position so far, padding False: the one padding convention of the three models (left-padded prompts
        of different lengths, padded sources). Each row's positions then count its real tokens only, and no
        real token attends to padding.
        """
        start = 0 if cache is None else cache.pos
        self._check_ids(idx, start)
        T = idx.shape[1]
        # A cache needs only pos, layer(i).update and advance (the protocol in kv_cache.py); one that forgets
        # old positions (RollingKVCache) also says which it still holds.
        first_key = getattr(cache, "first_kept", 0)
        positions, key_positions, padding = self._positions(idx, start, first_key, attention_mask)
        if padding is not None:
            mask = padding if mask is None else mask & padding  # a padding query may look anywhere: no NaN

        x = self.tok_emb(idx)  # (B, T, C)
        if self.pos_emb is not None:
            x = x + (self.pos_emb(positions, end=start + T) if isinstance(self.pos_emb, LearnedPositions)
                     else self.pos_emb(positions))  # (B, T, C) + (T, C) or (B, T, C)
        x = self.dropout(x)
        cos_sin = None if self.rope is None else self.rope(positions)  # (cos, sin), (T, d_head) or (B, T, d_head)
        bias = None if self.alibi is None else self.alibi(positions, key_positions)  # (H, T, Tk) or (B, H, T, Tk)
        mask = self._self_attention_mask(mask, T, start + T - first_key, idx.device)
        for i, block in enumerate(self.blocks):
            layer_cache = None if cache is None else cache.layer(i)
            x = block(x, mask=mask, cache=layer_cache, rope_cos_sin=cos_sin, position_bias=bias,
                      context=context, context_mask=context_mask, trace=trace, routing=routing)
        if cache is not None:
            cache.advance(T)  # every layer has stored positions start .. start+T-1
        return self.final_norm(x)  # (B, T, C)

    def _check_ids(self, idx: Tensor, start: int) -> None:
        """``idx (B, T)`` holds ``T >= 1`` token ids below the vocabulary size."""
        check_tensor("idx", idx, "(B, T)", dtype="int")
        T, V = idx.shape[1], self.config.vocab_size
        # Reading idx's values waits for the GPU: checked on every forward except a decoding step (one new
        # token after a filled cache, which the model itself has just chosen): that hot path never waits.
        decoding_step = start > 0 and T == 1
        if T == 0 or (not decoding_step and (int(idx.min()) < 0 or int(idx.max()) >= V)):
            got = f"T={T}" if T == 0 else f"values in [{int(idx.min())}, {int(idx.max())}]"
            raise ValueError(f"idx must hold T >= 1 token ids in [0, {V}), got {got}")

    @staticmethod
    def _positions(idx: Tensor, start: int, first_key: int,
                   attention_mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Where the new tokens sit and where the keys sit, ``(T,)`` and ``(Tk,)``; with an ``attention_mask``
        each row counts its real tokens only, ``(B, T)`` and ``(B, Tk)``, and the padding mask
        ``(B, 1, T, Tk)`` hides padding from real tokens (``None`` without one)."""
        B, T = idx.shape
        if attention_mask is None:
            positions = torch.arange(start, start + T, device=idx.device)  # (T,)
            return positions, torch.arange(first_key, start + T, device=idx.device), None  # (T,), (Tk,)
        check_tensor("attention_mask", attention_mask, "(B, Tk)", dtype="mask", B=B, Tk=start + T)
        real = attention_mask.bool()  # (B, start + T)
        counted = (real.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, start + T): real tokens before
        padding = real[:, None, None, first_key:] | ~real[:, None, start:, None]  # (B, 1, T, Tk)
        return counted[:, start:], counted[:, first_key:], padding

    def _self_attention_mask(self, mask: Tensor | None, T: int, t_k: int, device: torch.device) -> Tensor | None:
        """``mask`` and (in a decoder) the causal or sliding-window mask ``(T, Tk)``. One new token may see
        every key so far (no mask needed), unless a window hides the oldest."""
        window = self.config.sliding_window
        if not self.causal or (T == 1 and (window is None or t_k <= window)):
            return mask
        causal = (causal_mask(T, t_k, device=device) if window is None
                  else sliding_window_mask(T, t_k, window, device=device))  # (T, Tk)
        return causal if mask is None else mask & causal


class DecoderOnly(nn.Module):
    """A GPT-style language model: ``forward(idx (B, T), cache=None) -> logits (B, T, vocab_size)``.

    Logit ``t`` predicts token ``t + 1`` from tokens ``0 .. t`` only (causal attention).

    Example:
        >>> config = TransformerConfig(vocab_size=50, d_model=24, n_heads=3, n_layers=2, d_ff=40, max_len=16)
        >>> DecoderOnly(config)(torch.zeros(2, 7, dtype=torch.long)).shape
        torch.Size([2, 7, 50])
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = TransformerStack(config, causal=True)
        self.lm_head = make_lm_head(config, self.transformer.tok_emb)
        self.apply(init_weights)

    def forward(self, idx: Tensor, cache: Cache | None = None, attention_mask: Tensor | None = None) -> Tensor:
        """Logits ``(B, T, V)`` for every position; with a ``cache``, ``idx`` holds only the new tokens.
        ``attention_mask (B, positions so far)``: False/0 at left padding (``TransformerStack.forward``)."""
        return self.lm_head(self.transformer(idx, cache=cache, attention_mask=attention_mask))  # (B, T, V)

    def inspect(self, idx: Tensor, cache: Cache | None = None, attention_mask: Tensor | None = None) -> Trace:
        """``forward``, also returning every layer's attention weights, q, k, v and output (call ``.eval()``)."""
        layers: list[LayerTrace] = []
        hidden = self.transformer(idx, cache=cache, trace=layers, attention_mask=attention_mask)  # (B, T, C)
        return Trace(logits=self.lm_head(hidden), layers=layers)

    def next_token_logits(
        self, idx: Tensor, cache: Cache | None = None, attention_mask: Tensor | None = None
    ) -> Tensor:
        """Logits ``(B, V)`` for the token after ``idx``: the LM head runs at the last position only."""
        return self.lm_head(self.transformer(idx, cache=cache, attention_mask=attention_mask)[:, -1])  # (B, V)

    def logits_and_balancing_loss(
        self, idx: Tensor, cache: Cache | None = None, attention_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """``forward``'s logits ``(B, T, V)`` and the load-balancing losses of its mixture-of-experts layers,
        summed (``()``; 0 without experts): add the sum, times a small weight (0.01), to the training loss."""
        routing: list[Routing] = []
        logits = self.lm_head(self.transformer(idx, cache=cache, attention_mask=attention_mask, routing=routing))
        losses = [layer.balancing_loss() for layer in routing]
        return logits, torch.stack(losses).sum() if losses else logits.new_zeros(())


class EncoderOnly(nn.Module):
    """A BERT-style encoder with a masked-language-model head: ``forward(idx (B, T)) -> logits (B, T, V)``.

    Every position sees every other (no causal mask); ``attention_mask (B, T)`` (bool or 0/1, False at
    padding, as in ``DecoderOnly``) hides padding from the real tokens.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = TransformerStack(config, causal=False)
        self.mlm_transform = nn.Sequential(  # BERT's head: dense, GELU, norm, then the output layer
            nn.Linear(config.d_model, config.d_model, bias=config.bias),
            nn.GELU(),
            make_norm(config.norm, config.d_model, eps=config.norm_eps, bias=config.bias),
        )
        self.lm_head = make_lm_head(config, self.transformer.tok_emb)
        self.apply(init_weights)

    def forward(self, idx: Tensor, *, attention_mask: Tensor | None = None) -> Tensor:
        """Logits ``(B, T, V)`` for the token at every position (train on the masked ones)."""
        hidden = self.transformer(idx, attention_mask=attention_mask)  # (B, T, C)
        return self.lm_head(self.mlm_transform(hidden))  # (B, T, V)

    def inspect(self, idx: Tensor, *, attention_mask: Tensor | None = None) -> Trace:
        """``forward``, also returning every layer's attention weights, q, k, v and output (call ``.eval()``)."""
        layers: list[LayerTrace] = []
        hidden = self.transformer(idx, attention_mask=attention_mask, trace=layers)  # (B, T, C)
        return Trace(logits=self.lm_head(self.mlm_transform(hidden)), layers=layers)


class EncoderDecoder(nn.Module):
    """Encoder over ``src (B, S)``, causal decoder over ``tgt (B, T)`` with cross-attention to the encoder.

    ``forward(src, tgt, attention_mask=None) -> logits (B, T, V)``; ``attention_mask (B, S)`` (False at
    source padding, as in the other two models) hides source padding from the encoder and from the decoder's
    cross-attention.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = TransformerStack(config, causal=False)
        self.decoder = TransformerStack(config, causal=True, cross_attention=True)
        self.lm_head = make_lm_head(config, self.decoder.tok_emb)
        self.apply(init_weights)

    def encode(self, src: Tensor, *, attention_mask: Tensor | None = None) -> Tensor:
        """The encoder's output ``(B, S, C)`` (the "memory" the decoder attends to)."""
        return self.encoder(src, attention_mask=attention_mask)

    def decode(
        self, tgt: Tensor, memory: Tensor, *, attention_mask: Tensor | None = None, cache: Cache | None = None
    ) -> Tensor:
        """Logits ``(B, T, V)`` of the decoder over ``tgt (B, T)`` attending to ``memory (B, S, C)``;
        ``attention_mask (B, S)``: the source's real tokens."""
        return self.lm_head(self.decoder(tgt, cache=cache, context=memory, context_mask=_key_mask(attention_mask)))

    def forward(self, src: Tensor, tgt: Tensor, *, attention_mask: Tensor | None = None) -> Tensor:
        memory = self.encode(src, attention_mask=attention_mask)  # (B, S, C)
        return self.decode(tgt, memory, attention_mask=attention_mask)  # (B, T, V)

    def inspect(self, src: Tensor, tgt: Tensor, *, attention_mask: Tensor | None = None) -> Trace:
        """``forward``, also returning both stacks' per-layer attention (the decoder's cross-attention too)."""
        encoder_layers: list[LayerTrace] = []
        layers: list[LayerTrace] = []
        memory = self.encoder(src, attention_mask=attention_mask, trace=encoder_layers)  # (B, S, C)
        hidden = self.decoder(tgt, context=memory, context_mask=_key_mask(attention_mask), trace=layers)  # (B, T, C)
        return Trace(logits=self.lm_head(hidden), layers=layers, encoder_layers=encoder_layers)


def _key_mask(attention_mask: Tensor | None) -> Tensor | None:
    """``attention_mask (B, S)`` as a key mask ``(B, 1, 1, S)`` for cross-attention (every query, every head)."""
    return None if attention_mask is None else attention_mask.bool()[:, None, None, :]
