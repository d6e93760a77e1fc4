"""Chapter 10, 练习 4: the typical wrong beam searches, each written as a learner writes it (float32,
token ids as int64); ``beam_search`` lists them as the exercise's mistakes.
"""
from __future__ import annotations

import torch
from torch import Tensor


def _grow(seqs: Tensor, kept: Tensor, vocab: int) -> Tensor:
    """The kept candidates (flat indices into (K, V)) as sequences one token longer: (K', T + 1)."""
    return torch.cat([seqs[kept // vocab], (kept % vocab)[:, None]], dim=1)


def _top(candidates: Tensor, beam_width: int) -> Tensor:
    """The flat indices of the best candidates, best first (no more than there are)."""
    return candidates.flatten().topk(min(beam_width, candidates.numel())).indices


def _float32_search(model, prompt, n_new, beam_width):
    """A right beam search, as a learner writes it; the mistakes below that only get the output
    wrong start from it."""
    seqs, scores = prompt[None], torch.zeros(1)
    for _ in range(n_new):
        log_probs = model(seqs)[:, -1].log_softmax(dim=-1)  # (K, V)
        candidates = scores[:, None] + log_probs
        kept = _top(candidates, beam_width)
        seqs, scores = _grow(seqs, kept, log_probs.shape[-1]), candidates.flatten()[kept]
    return scores, seqs[:, prompt.numel():]


@torch.no_grad()
def _per_parent(model, prompt, n_new, beam_width):
    log_probs = model(prompt[None])[0, -1].log_softmax(dim=-1)  # (V,)
    scores, first = log_probs.topk(min(beam_width, len(log_probs)))
    seqs = torch.cat([prompt.expand(len(first), -1), first[:, None]], dim=1)
    for _ in range(n_new - 1):  # then every beam keeps only its own best continuation
        best = model(seqs)[:, -1].log_softmax(dim=-1).max(dim=-1)
        seqs, scores = torch.cat([seqs, best.indices[:, None]], dim=1), scores + best.values
    order = scores.sort(descending=True).indices
    return scores[order], seqs[order, prompt.numel():]


@torch.no_grad()
def _last_token_only(model, prompt, n_new, beam_width):
    seqs, scores = prompt[None], torch.zeros(1)
    for _ in range(n_new):
        log_probs = model(seqs)[:, -1].log_softmax(dim=-1)
        kept = _top(log_probs, beam_width)  # ranked by the new token alone
        seqs, scores = _grow(seqs, kept, log_probs.shape[-1]), log_probs.flatten()[kept]
    return scores, seqs[:, prompt.numel():]


@torch.no_grad()
def _copies_at_start(model, prompt, n_new, beam_width):
    seqs, scores = prompt.expand(beam_width, -1), torch.zeros(beam_width)  # k equal beams
    for _ in range(n_new):
        log_probs = model(seqs)[:, -1].log_softmax(dim=-1)
        candidates = scores[:, None] + log_probs
        kept = _top(candidates, beam_width)
        seqs, scores = _grow(seqs, kept, log_probs.shape[-1]), candidates.flatten()[kept]
    return scores, seqs[:, prompt.numel():]


@torch.no_grad()
def _multiplied_probabilities(model, prompt, n_new, beam_width):
    seqs, probs = prompt[None], torch.ones(1)
    for _ in range(n_new):  # float32 products: below ~1e-45 they are 0
        step_probs = model(seqs)[:, -1].softmax(dim=-1)
        candidates = probs[:, None] * step_probs
        kept = _top(candidates, beam_width)
        seqs, probs = _grow(seqs, kept, step_probs.shape[-1]), candidates.flatten()[kept]
    return probs.log(), seqs[:, prompt.numel():]


@torch.no_grad()
def _log_of_softmax(model, prompt, n_new, beam_width):
    seqs, scores = prompt[None], torch.zeros(1)
    for _ in range(n_new):
        log_probs = model(seqs)[:, -1].softmax(dim=-1).log()  # log(0) = -inf
        candidates = scores[:, None] + log_probs
        kept = _top(candidates, beam_width)
        seqs, scores = _grow(seqs, kept, log_probs.shape[-1]), candidates.flatten()[kept]
    return scores, seqs[:, prompt.numel():]


@torch.no_grad()
def _vocabulary_order(model, prompt, n_new, beam_width):
    seqs, scores = prompt[None], torch.zeros(1)
    for _ in range(n_new):
        log_probs = model(seqs)[:, -1].log_softmax(dim=-1)
        candidates = scores[:, None] + log_probs
        kept = _top(candidates, beam_width).sort().values  # the right ones, in (beam, token) order
        seqs, scores = _grow(seqs, kept, log_probs.shape[-1]), candidates.flatten()[kept]
    return scores, seqs[:, prompt.numel():]


@torch.no_grad()
def _prompt_dropped(model, prompt, n_new, beam_width):
    beams, scores = prompt[None, :0], torch.zeros(1)  # the continuations only
    for step in range(n_new):
        inputs = prompt[None] if step == 0 else beams  # from the second step on, no prompt
        log_probs = model(inputs)[:, -1].log_softmax(dim=-1)
        candidates = scores[:, None] + log_probs
        kept = _top(candidates, beam_width)
        beams, scores = _grow(beams, kept, log_probs.shape[-1]), candidates.flatten()[kept]
    return scores, beams


@torch.no_grad()
def _length_average(model, prompt, n_new, beam_width):
    scores, beams = _float32_search(model, prompt, n_new, beam_width)
    return scores / n_new, beams


@torch.no_grad()
def _prompt_scored(model, prompt, n_new, beam_width):
    scores, beams = _float32_search(model, prompt, n_new, beam_width)
    log_probs = model(prompt[None]).log_softmax(dim=-1)[:, :-1]  # (1, T0 - 1, V): t predicts t + 1
    prompt_log_prob = log_probs.gather(-1, prompt[None, 1:, None]).squeeze(-1).sum(dim=-1)  # (1,)
    return scores + prompt_log_prob, beams


@torch.no_grad()
def _greedy_only(model, prompt, n_new, beam_width):
    return _float32_search(model, prompt, n_new, 1)


@torch.no_grad()
def _with_prompt(model, prompt, n_new, beam_width):
    scores, beams = _float32_search(model, prompt, n_new, beam_width)
    return scores, torch.cat([prompt.expand(len(beams), -1), beams], dim=1)


@torch.no_grad()
def _swapped(model, prompt, n_new, beam_width):
    scores, beams = _float32_search(model, prompt, n_new, beam_width)
    return beams, scores
