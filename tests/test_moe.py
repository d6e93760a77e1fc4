"""Mixture of experts: the routed computation against a dense one that runs every expert, the single-expert
case against a plain FFN, the balancing loss at its two ends, parameters total vs active."""
from __future__ import annotations

import pytest
import torch

import transformer_course as tc


def test_routed_output_equals_every_expert_run_densely_and_masked() -> None:
    torch.manual_seed(0)
    moe = tc.MoEFeedForward(12, 20, n_experts=5, top_k=2)
    x = torch.randn(3, 7, 12)
    out, _ = moe(x)
    logits = moe.router(x)  # (3, 7, 5)
    top, chosen = logits.topk(2, dim=-1)
    gates = torch.zeros_like(logits).scatter(-1, chosen, top.softmax(dim=-1))  # (3, 7, 5), zero if not chosen
    dense = sum(gates[..., e, None] * expert(x) for e, expert in enumerate(moe.experts))  # (3, 7, 12)
    assert out.shape == x.shape and (out - dense).abs().max() < 1e-6
    assert (gates > 0).sum(dim=-1).eq(2).all()  # every token used exactly two experts


def test_one_expert_is_the_plain_ffn_and_gradients_reach_router_and_experts() -> None:
    torch.manual_seed(1)
    moe = tc.MoEFeedForward(8, 16, n_experts=1, top_k=1)
    x = torch.randn(4, 8)
    out, aux = moe(x)
    assert torch.allclose(out, moe.experts[0](x), atol=1e-7) and abs(aux.item() - 1.0) < 1e-6
    moe = tc.MoEFeedForward(8, 16, n_experts=4, top_k=2)
    out, aux = moe(torch.randn(6, 8))
    (out.sum() + aux).backward()
    assert moe.router.weight.grad.abs().sum() > 0
    assert sum(p.grad is not None for e in moe.experts for p in e.parameters()) > 0


def test_balancing_loss_is_one_when_balanced_and_n_experts_when_collapsed() -> None:
    E, N = 4, 8
    chosen = torch.arange(N)[:, None] % E  # (N, 1): every expert twice
    assert abs(tc.load_balancing_loss(torch.zeros(N, E), chosen).item() - 1.0) < 1e-6
    collapsed = torch.full((N, E), -1e4)
    collapsed[:, 2] = 1e4  # every token certain of expert 2
    loss = tc.load_balancing_loss(collapsed, torch.full((N, 1), 2))
    assert abs(loss.item() - E) < 1e-6


def test_parameters_total_and_active() -> None:
    moe = tc.MoEFeedForward(10, 24, n_experts=6, top_k=2, bias=False)
    per_expert = 2 * 10 * 24
    assert sum(p.numel() for p in moe.parameters()) == 10 * 6 + 6 * per_expert
    assert moe.active_params() == 10 * 6 + 2 * per_expert
    with pytest.raises(ValueError, match="top_k must be <= n_experts=3, got top_k=4"):
        tc.MoEFeedForward(10, 24, n_experts=3, top_k=4)
