"""Mixture of experts: a router sends each token to ``top_k`` of ``n_experts`` feed-forward networks.

``MoEFeedForward`` stands where an FFN stands, ``(..., C) -> (..., C)``, and also returns its routing. A
linear ``Router`` scores every expert for every token; the token goes to its ``top_k`` best experts, whose
outputs are mixed with weights (gates) from their scores, by one of two rules (``gate``):

- ``"switch"`` (Switch Transformer, Fedus et al. 2021, ``k = 1``): each chosen expert's probability under the
  softmax over *all* experts, not renormalised;
- ``"mixtral"`` (Mixtral, Jiang et al. 2024, ``k = 2``): the softmax over the ``k`` chosen scores only.

By default ``top_k == 1`` gets ``"switch"`` and ``top_k >= 2`` gets ``"mixtral"``, as in the two papers: with
``k = 1`` Mixtral's gate is exactly 1, so the language-model loss gives the router no gradient at all.
Parameters grow with ``n_experts``; the work per token only with ``top_k`` (``active_params``). Training also
needs the experts used evenly: ``load_balancing_loss``, which the mixture does not add itself: it returns
its ``Routing`` (as Hugging Face's Mixtral returns its router logits) and the model sums the losses.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from ._checks import check_choice, check_int, check_tensor
from .ffn import make_ffn

GATES = ("switch", "mixtral")  # Switch Transformer's gate, Mixtral's gate


def load_balancing_loss(router_logits: Tensor, chosen: Tensor) -> Tensor:
    """Switch Transformer's auxiliary loss ``E · Σ_e f_e · P_e`` for ``router_logits (N, E)`` and the experts
    ``chosen (N, k)``: ``f_e`` is the share of the ``N·k`` assignments that went to expert ``e``, ``P_e`` the
    mean router probability of ``e``. It is 1 when both are uniform and ``E`` when every token goes to one
    expert with certainty; ``f`` is not differentiable, so the gradient flows through ``P``."""
    check_tensor("router_logits", router_logits, "(N, E)")
    check_tensor("chosen", chosen, "(N, k)", dtype="int", N=router_logits.shape[0])
    n_experts = router_logits.shape[1]
    share = torch.bincount(chosen.flatten(), minlength=n_experts).to(router_logits.dtype) / chosen.numel()  # (E,)
    probability = router_logits.softmax(dim=-1).mean(dim=0)  # (E,)
    return n_experts * (share * probability).sum()


class Routing(NamedTuple):
    """Where a router sent each token: ``gates (..., k)``, ``chosen (..., k)`` (best first) and
    ``router_logits (..., E)``. A mixture returns it to its caller; nothing is kept on the module."""

    gates: Tensor
    chosen: Tensor
    router_logits: Tensor

    def balancing_loss(self) -> Tensor:
        """``load_balancing_loss`` over every token of this routing."""
        n_experts, k = self.router_logits.shape[-1], self.chosen.shape[-1]
        return load_balancing_loss(self.router_logits.reshape(-1, n_experts), self.chosen.reshape(-1, k))


class Router(nn.Linear):
    """A linear layer that scores ``n_experts`` experts for each token (``forward``, as ``nn.Linear``) and
    picks each token's ``top_k`` with their mixing weights by ``gate`` (``route``).

    ``"switch"``: ``softmax(all E scores)`` at the chosen experts, *not* renormalised, so for ``k >= 2`` the
    gates sum to less than 1. That is the design: the full softmax's normaliser depends on every expert's
    score, so the gate carries the task loss's gradient to every row of the router; renormalising over the
    chosen experts would make the gate exactly 1 for ``k = 1`` and the router would learn only from the
    balancing loss. ``"mixtral"``: softmax over the ``k`` chosen scores (they sum to 1; the router learns
    from their differences, so it needs ``k >= 2``). ``None``: ``"switch"`` for ``top_k == 1``, else ``"mixtral"``.
    """

    def __init__(self, d_model: int, n_experts: int, *, top_k: int, gate: str | None = None) -> None:
        if check_int("top_k", top_k) > check_int("n_experts", n_experts):
            raise ValueError(f"top_k must be <= n_experts={n_experts}, got top_k={top_k}")
        super().__init__(check_int("d_model", d_model), n_experts, bias=False)  # one score per expert
        self.top_k = top_k
        self.gate = ("switch" if top_k == 1 else "mixtral") if gate is None else check_choice("gate", gate, GATES)

    def extra_repr(self) -> str:
        """Sizes and the gate, shown in the module's repr."""
        return f"d_model={self.in_features}, n_experts={self.out_features}, top_k={self.top_k}, gate={self.gate!r}"

    def route(self, x: Tensor) -> Routing:
        """``x (..., C) -> Routing``: each token's ``top_k`` experts (best first) and their gates."""
        check_tensor("x", x, "(..., C)", C=self.in_features)
        logits = self(x)  # (..., E)
        top_scores, chosen = logits.topk(self.top_k, dim=-1)  # (..., k) each: the best experts, best first
        if self.gate == "switch":  # probability among all E experts: the normaliser depends on every score
            return Routing(logits.softmax(dim=-1).gather(-1, chosen), chosen, logits)
        return Routing(top_scores.softmax(dim=-1), chosen, logits)  # among the k chosen only: sums to 1


class MoEFeedForward(nn.Module):
    """``n_experts`` FFNs and a ``Router``; each token is processed by its ``top_k`` experts.

    ``forward(x (..., C)) -> (out (..., C), routing)``: the caller keeps the ``Routing``; add
    ``routing.balancing_loss()`` (times a small weight, e.g. 0.01) to the training loss to keep the experts
    balanced (``DecoderOnly.logits_and_balancing_loss`` sums it over the layers). ``gate``: see ``Router``.

    Example:
        >>> moe = MoEFeedForward(8, 16, n_experts=4, top_k=2)
        >>> out, routing = moe(torch.randn(2, 5, 8))
        >>> out.shape, routing.chosen.shape, moe.active_params() < sum(p.numel() for p in moe.parameters())
        (torch.Size([2, 5, 8]), torch.Size([2, 5, 2]), True)
    """

    def __init__(self, d_model: int, d_ff: int, *, n_experts: int, top_k: int = 2, activation: str = "gelu",
                 bias: bool = True, gate: str | None = None) -> None:
        super().__init__()
        self.router = Router(d_model, n_experts, top_k=top_k, gate=gate)
        self.experts = nn.ModuleList(make_ffn(activation, d_model, d_ff, bias=bias) for _ in range(n_experts))

    def active_params(self) -> int:
        """Parameters that touch one token: the router and ``top_k`` experts."""
        per_expert = sum(p.numel() for p in self.experts[0].parameters())
        return self.router.weight.numel() + self.router.top_k * per_expert

    def forward(self, x: Tensor) -> tuple[Tensor, Routing]:
        check_tensor("x", x, "(..., C)", C=self.router.in_features)
        tokens = x.reshape(-1, x.shape[-1])  # (N, C)
        gates, chosen, logits = self.router.route(tokens)  # (N, k), (N, k), (N, E)
        out = torch.zeros_like(tokens)  # (N, C)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)  # which tokens chose e, in which of their k slots
            if rows.numel():
                out.index_add_(0, rows, gates[rows, slot, None] * expert(tokens[rows]))  # (n_e, C) into (N, C)
        shape = x.shape[:-1]
        return out.reshape(x.shape), Routing(gates.reshape(*shape, -1), chosen.reshape(*shape, -1),
                                             logits.reshape(*shape, -1))
