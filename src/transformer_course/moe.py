"""Mixture of experts: a router sends each token to ``top_k`` of ``n_experts`` feed-forward networks.

``MoEFeedForward`` can stand where an FFN stands: ``(..., C) -> (..., C)``. A linear router scores every
expert for every token; the token goes to its ``top_k`` best experts, whose outputs are mixed with the
softmax of their scores (Mixtral's rule). Parameters grow with ``n_experts``; the work per token only with
``top_k`` (``active_params``). Training also needs the experts used evenly: ``load_balancing_loss``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ._checks import check_int, check_tensor
from .ffn import make_ffn


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


class MoEFeedForward(nn.Module):
    """``n_experts`` FFNs and a router; each token is processed by its ``top_k`` experts.

    ``forward(x (..., C)) -> (out (..., C), aux_loss ())``: add ``aux_loss`` (times a small weight, e.g.
    0.01) to the training loss to keep the experts balanced.

    Example:
        >>> moe = MoEFeedForward(8, 16, n_experts=4, top_k=2)
        >>> out, aux = moe(torch.randn(2, 5, 8))
        >>> out.shape, moe.active_params() < sum(p.numel() for p in moe.parameters())
        (torch.Size([2, 5, 8]), True)
    """

    def __init__(self, d_model: int, d_ff: int, *, n_experts: int, top_k: int = 2, activation: str = "gelu",
                 bias: bool = True) -> None:
        super().__init__()
        if check_int("top_k", top_k) > check_int("n_experts", n_experts):
            raise ValueError(f"top_k must be <= n_experts={n_experts}, got top_k={top_k}")
        self.d_model, self.top_k = check_int("d_model", d_model), top_k
        self.router = nn.Linear(d_model, n_experts, bias=False)  # one score per expert
        self.experts = nn.ModuleList(make_ffn(activation, d_model, d_ff, bias=bias) for _ in range(n_experts))

    def active_params(self) -> int:
        """Parameters that touch one token: the router and ``top_k`` experts."""
        per_expert = sum(p.numel() for p in self.experts[0].parameters())
        return self.router.weight.numel() + self.top_k * per_expert

    def route(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``x (..., C) -> (gates (..., k), chosen (..., k), router_logits (..., E))``: each token's ``top_k``
        experts (best first) and their mixing weights, the softmax of their scores."""
        check_tensor("x", x, "(..., C)", C=self.d_model)
        logits = self.router(x)  # (..., E)
        top_scores, chosen = logits.topk(self.top_k, dim=-1)  # (..., k) each: the best experts, best first
        return top_scores.softmax(dim=-1), chosen, logits

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        check_tensor("x", x, "(..., C)", C=self.d_model)
        tokens = x.reshape(-1, x.shape[-1])  # (N, C)
        gates, chosen, logits = self.route(tokens)  # (N, k), (N, k), (N, E)
        out = torch.zeros_like(tokens)  # (N, C)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)  # which tokens chose e, in which of their k slots
            if rows.numel():
                out.index_add_(0, rows, gates[rows, slot, None] * expert(tokens[rows]))  # (n_e, C) into (N, C)
        return out.reshape(x.shape), load_balancing_loss(logits, chosen)
