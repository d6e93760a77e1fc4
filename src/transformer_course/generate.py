"""Autoregressive generation: prefill the prompt, then decode one token at a time.

Choosing the next token is split into small pure functions on logits ``(B, V)``:
``scale_by_temperature``, ``top_k_filter``, ``top_p_filter`` (each logits -> logits), then ``sample``
(one draw per row, from an explicit ``torch.Generator``) or ``greedy`` (the argmax).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ._checks import check_float, check_int, check_tensor
from .kv_cache import Cache, KVCache


def scale_by_temperature(logits: Tensor, temperature: float) -> Tensor:
    """``logits / temperature``: below 1 sharpens the distribution, above 1 flattens it; ``(..., V)``."""
    check_tensor("logits", logits, "(..., V)")
    return logits / check_float("temperature", temperature, "(0, inf)")


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row, set the rest to ``-inf``; ``(..., V) -> (..., V)``.

    Example:
        >>> top_k_filter(torch.tensor([1.0, 3.0, 2.0]), 2)
        tensor([-inf, 3., 2.])
    """
    check_tensor("logits", logits, "(..., V)")
    k = min(check_int("k", k), logits.shape[-1])
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filter: keep the most likely tokens until their probabilities sum to ``p``; ``(..., V)``.

    The most likely token always stays; ``p = 1`` keeps every token (without the shortcut, float32
    rounding of the running sum reaches 1 early and drops the far tail of a large vocabulary).

    Example:
        >>> top_p_filter(torch.tensor([0.5, 0.3, 0.2]).log(), 0.7).exp()  # 0.5 < 0.7, 0.5 + 0.3 >= 0.7
        tensor([0.5000, 0.3000, 0.0000])
    """
    check_tensor("logits", logits, "(..., V)")
    if check_float("p", p, "(0, 1]") == 1.0:
        return logits
    probs, order = logits.softmax(dim=-1).sort(dim=-1, descending=True)  # (..., V) most likely first
    mass_before = probs.cumsum(dim=-1) - probs  # (..., V) probability of the tokens ranked above
    drop_sorted = mass_before >= p  # the nucleus is already complete without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def greedy(logits: Tensor) -> Tensor:
    """The most likely token of each row: ``(B, V) -> (B,)``."""
    check_tensor("logits", logits, "(B, V)")
    return logits.argmax(dim=-1)


def sample(logits: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
    """Draw one token per row from ``softmax(logits)``: ``(B, V) -> (B,)``; pass a seeded ``generator``.

    The draw happens on the generator's device, so a CPU generator gives the same random draws on any
    device: the same tokens wherever the devices compute the same probabilities.
    """
    check_tensor("logits", logits, "(B, V)")
    probs = logits.softmax(dim=-1)  # (B, V)
    if generator is not None:
        probs = probs.to(generator.device)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1).to(logits.device)  # (B,)


def next_token(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    attention_mask: Tensor | None = None,
) -> Tensor:
    """Pick the next token ``(B,)`` from logits ``(B, V)``; ``temperature=0`` means greedy."""
    if check_float("temperature", temperature, "[0, inf)") == 0:
        return greedy(logits)
    logits = scale_by_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return sample(logits, generator=generator)


@dataclass
class Step:
    """One decoding step of ``generate_steps``."""

    fed: Tensor  # (B, T') what the model read: the prompt (prefill), one token (cached), or all (no cache)
    logits: Tensor  # (B, V) for the token after the sequence so far
    tokens: Tensor  # (B, t + 1) the sequence so far, the new token last


@torch.no_grad()  # not inference_mode: torch 2.2's FlopCounterMode counts nothing there
def generate_steps(
    model: nn.Module,
    idx: Tensor,
    max_new_tokens: int,
    *,
    use_cache: bool = True,
    cache: Cache | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    attention_mask: Tensor | None = None,
    logits_filter: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> Iterator[Step]:
    """``generate``, one ``Step`` at a time: each ``next()`` runs one forward pass and picks one token, so
    a caller can time a step, count its FLOPs or look at its logits without writing the loop again.

    With ``use_cache`` a new ``KVCache`` is made unless ``cache`` (empty; any object the model accepts)
    is given. Arguments as in ``generate``; ``Step.logits`` are the model's, before ``logits_filter``.
    """
    check_tensor("idx", idx, "(B, T)", dtype="int")
    check_int("max_new_tokens", max_new_tokens, minimum=0)
    B, T = idx.shape
    real = None  # (B, T + max_new_tokens): the prompt's padding False, every new token True
    if attention_mask is not None:
        check_tensor("attention_mask", attention_mask, "(B, T)", dtype="mask", B=B, T=T)
        real = torch.ones(B, T + max_new_tokens, dtype=torch.bool, device=idx.device)
        real[:, :T] = attention_mask.bool()
    tokens = torch.empty(B, T + max_new_tokens, dtype=idx.dtype, device=idx.device)  # filled left to right
    tokens[:, :T] = idx
    if not use_cache:
        if cache is not None:
            raise ValueError("cache was given with use_cache=False")
    elif cache is None:
        param = next(model.parameters())
        cache = KVCache.from_config(
            model.config, batch_size=B, max_len=T + max_new_tokens, dtype=param.dtype, device=param.device
        )
    elif cache.pos != 0:
        raise ValueError(f"cache must be empty (pos=0), got pos={cache.pos}")
    for t in range(T, T + max_new_tokens):
        # With a cache the model gets what it has not seen: the prompt first (prefill), then one token.
        fed = tokens[:, (0 if cache is None else cache.pos) : t]  # (B, T')
        extra = {} if real is None else {"attention_mask": real[:, :t]}  # every position so far
        logits = model.next_token_logits(fed, cache=cache, **extra)  # (B, V), last position only
        allowed = logits if logits_filter is None else logits_filter(tokens[:, :t], logits)  # (B, V)
        tokens[:, t] = next_token(allowed, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
        yield Step(fed=fed, logits=logits, tokens=tokens[:, : t + 1])


@torch.inference_mode()
def generate(
    model: nn.Module,
    idx: Tensor,
    max_new_tokens: int,
    *,
    use_cache: bool = True,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    attention_mask: Tensor | None = None,
    logits_filter: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> Tensor:
    """Continue the prompts ``idx (B, T)`` by ``max_new_tokens`` tokens; returns ``(B, T + max_new_tokens)``.

    ``model`` is a ``DecoderOnly`` (anything with ``.config`` and ``.next_token_logits(idx, cache)``);
    call ``model.eval()`` first. With ``use_cache`` the prompt is run once (prefill) and each step
    feeds only the newest token (decode); without it, each step re-reads the whole sequence.
    ``attention_mask (B, T)``: for a batch of left-padded prompts, False/0 at the padding; each row then
    continues as its prompt would alone (greedy: the same tokens).
    ``logits_filter(tokens (B, t), logits (B, V)) -> logits``: applied to the model's logits at each step,
    before temperature, top-k, top-p and greedy (e.g. ``-inf`` at forbidden tokens, as ``poetics.VerseRules``).
    """
    tokens = None
    for step in generate_steps(model, idx, max_new_tokens, use_cache=use_cache, temperature=temperature,
                               top_k=top_k, top_p=top_p, generator=generator, attention_mask=attention_mask,
                               logits_filter=logits_filter):
        tokens = step.tokens  # (B, t + 1)
    return idx.clone() if tokens is None else tokens  # max_new_tokens=0: the prompt, as a new tensor
