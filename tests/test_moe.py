"""Mixture of experts: the routed computation against a dense one that runs every expert, the single-expert
case against a plain FFN, the two gates (Switch's, Mixtral's) and the router's gradient from the task loss
alone, the balancing loss at its two ends, parameters total vs active."""
from __future__ import annotations

import pytest
import torch

import transformer_course as tc


@pytest.mark.parametrize("gate", ["switch", "mixtral"])
def test_routed_output_equals_every_expert_run_densely_and_masked(gate: str) -> None:
    torch.manual_seed(0)
    moe = tc.MoEFeedForward(12, 20, n_experts=5, top_k=2, gate=gate)
    x = torch.randn(3, 7, 12)
    out, _ = moe(x)
    logits = moe.router(x)  # (3, 7, 5)
    top, chosen = logits.topk(2, dim=-1)  # (3, 7, 2) each
    weight = logits.softmax(dim=-1).gather(-1, chosen) if gate == "switch" else top.softmax(dim=-1)  # (3, 7, 2)
    gates = torch.zeros_like(logits).scatter(-1, chosen, weight)  # (3, 7, 5), zero if not chosen
    dense = sum(gates[..., e, None] * expert(x) for e, expert in enumerate(moe.experts))  # (3, 7, 12)
    assert out.shape == x.shape and (out - dense).abs().max() < 1e-6
    assert (gates > 0).sum(dim=-1).eq(2).all()  # every token used exactly two experts


def test_one_expert_is_the_plain_ffn() -> None:
    """One expert, ``k = 1``: Switch's gate is the softmax over one logit, exactly 1."""
    torch.manual_seed(1)
    moe = tc.MoEFeedForward(8, 16, n_experts=1, top_k=1)
    x = torch.randn(4, 8)
    out, routing = moe(x)
    assert moe.router.gate == "switch" and torch.equal(routing.gates, torch.ones(4, 1))
    assert torch.allclose(out, moe.experts[0](x), atol=1e-7) and abs(routing.balancing_loss().item() - 1.0) < 1e-6


@pytest.mark.parametrize(("top_k", "gate"), [(1, "switch"), (2, "switch"), (2, "mixtral")])
def test_the_task_loss_alone_gives_gradient_to_router_and_experts(top_k: int, gate: str) -> None:
    """No balancing loss here: the router must learn from the language-model loss through the gates."""
    torch.manual_seed(3)
    moe = tc.MoEFeedForward(8, 16, n_experts=4, top_k=top_k, gate=gate)
    out, _ = moe(torch.randn(6, 8))  # (6, 8)
    torch.nn.functional.mse_loss(out, torch.randn(6, 8)).backward()
    assert moe.router.weight.grad.abs().sum() > 0
    assert sum(p.grad is not None for e in moe.experts for p in e.parameters()) > 0


def test_mixtral_gate_with_top_1_is_exactly_one_so_only_the_balancing_loss_reaches_the_router() -> None:
    """Why ``k = 1`` defaults to Switch's gate: the softmax over one chosen score is 1 whatever the score."""
    torch.manual_seed(3)
    moe = tc.MoEFeedForward(8, 16, n_experts=4, top_k=1, gate="mixtral")
    x = torch.randn(6, 8)
    out, routing = moe(x)  # (6, 8), gates (6, 1)
    assert torch.equal(routing.gates, torch.ones(6, 1))
    aux = routing.balancing_loss()  # ()
    torch.nn.functional.mse_loss(out, torch.randn(6, 8)).backward(retain_graph=True)
    assert moe.router.weight.grad.abs().sum() == 0  # the task loss: nothing
    aux.backward()
    assert moe.router.weight.grad.abs().sum() > 0  # the balancing loss: something


def test_switch_gates_are_the_full_softmax_at_the_chosen_experts_and_mixtral_renormalises_them() -> None:
    torch.manual_seed(4)
    switch = tc.MoEFeedForward(10, 14, n_experts=6, top_k=2, gate="switch")
    mixtral = tc.MoEFeedForward(10, 14, n_experts=6, top_k=2, gate="mixtral")
    mixtral.load_state_dict(switch.state_dict())
    x = torch.randn(5, 9, 10)
    gates, chosen, logits = switch.router.route(x)  # (5, 9, 2), (5, 9, 2), (5, 9, 6)
    top_probs, top_experts = logits.softmax(dim=-1).topk(2, dim=-1)  # (5, 9, 2) each
    assert torch.equal(chosen, top_experts) and torch.allclose(gates, top_probs, atol=1e-7)
    assert (gates.sum(dim=-1) < 1 - 1e-3).all()  # the 4 experts left out keep their share of the probability
    mixed, mixtral_chosen, _ = mixtral.router.route(x)  # (5, 9, 2) each
    assert torch.equal(mixtral_chosen, chosen) and torch.allclose(mixed.sum(dim=-1), torch.ones(5, 9))
    assert torch.allclose(mixed, gates / gates.sum(dim=-1, keepdim=True), atol=1e-6)


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


def _moe_config(**overrides: object) -> tc.TransformerConfig:
    fields = dict(vocab_size=37, d_model=24, n_heads=3, n_layers=2, d_ff=40, max_len=19, positional="rope",
                  n_experts=5, moe_top_k=2)
    return tc.TransformerConfig(**{**fields, **overrides})


def test_one_expert_model_equals_the_dense_model_with_the_same_weights() -> None:
    """n_experts=1, top_k=1: the mixture is its one expert with gate 1, so the model is the dense model."""
    tc.set_seed(0)
    dense = tc.DecoderOnly(_moe_config(n_experts=None)).eval()
    moe = tc.DecoderOnly(_moe_config(n_experts=1, moe_top_k=1)).eval()
    weights = {k.replace(".ffn.", ".ffn.experts.0."): v for k, v in dense.state_dict().items()}
    missing = moe.load_state_dict(weights, strict=False).missing_keys
    assert sorted(missing) == [f"transformer.blocks.{i}.ffn.router.weight" for i in range(2)]
    idx = torch.randint(0, 37, (3, 11))
    logits, balancing = moe.logits_and_balancing_loss(idx)
    assert torch.allclose(logits, dense(idx), atol=1e-6) and torch.equal(logits, moe(idx))
    assert balancing.item() == pytest.approx(2.0)  # one expert: each layer's loss is 1
    assert dense.logits_and_balancing_loss(idx)[1].item() == 0.0
    assert not any(isinstance(v, torch.Tensor) for b in moe.transformer.blocks for v in vars(b).values())


def test_moe_model_routes_each_token_alone_so_cached_decoding_equals_the_full_forward() -> None:
    tc.set_seed(1)
    model = tc.DecoderOnly(_moe_config()).eval()
    idx = torch.randint(0, 37, (2, 13))
    with torch.no_grad():
        trace = model.inspect(idx)
        cache = tc.KVCache.from_config(model.config, batch_size=2)
        steps = [model(idx[:, :4], cache=cache)] + [model(idx[:, t : t + 1], cache=cache) for t in range(4, 13)]
    assert torch.allclose(torch.cat(steps, dim=1), trace.logits, atol=1e-5)
    for layer in trace.layers:  # (B, T, k) distinct experts per token, every expert used somewhere
        assert layer.experts.shape == (2, 13, 2) and (layer.experts[..., 0] != layer.experts[..., 1]).all()
    assert set(torch.cat([layer.experts.flatten() for layer in trace.layers]).tolist()) == set(range(5))
    prompt = idx[:, :3]
    greedy = [tc.generate(model, prompt, 8, use_cache=cached, temperature=0.0) for cached in (True, False)]
    assert torch.equal(*greedy)


def test_the_balancing_loss_is_the_sum_of_the_layers_routings_and_nothing_stays_on_the_modules() -> None:
    tc.set_seed(2)
    model = tc.DecoderOnly(_moe_config(n_layers=3)).train()
    idx = torch.randint(0, 37, (4, 9))
    routing: list = []
    hidden = model.transformer(idx, routing=routing)  # (B, T, C)
    assert [r.chosen.shape for r in routing] == [(4, 9, 2)] * 3 and routing[0].router_logits.shape == (4, 9, 5)
    layers = [r.balancing_loss() for r in routing]
    assert all(1.0 <= loss.item() <= 5.0 for loss in layers)  # between balanced (1) and collapsed (E)
    logits, total = model.logits_and_balancing_loss(idx)
    assert torch.equal(logits, model.lm_head(hidden)) and total.item() == pytest.approx(sum(x.item() for x in layers))
    kept = [name for block in model.transformer.blocks for name, value in vars(block).items()
            if isinstance(value, torch.Tensor)]
    assert kept == []  # the routing went to the caller, not onto the blocks
    total.backward()
    assert all(block.ffn.router.weight.grad.abs().sum() > 0 for block in model.transformer.blocks)
    per_expert = sum(p.numel() for p in model.transformer.blocks[0].ffn.experts[0].parameters())
    dense = tc.DecoderOnly(_moe_config(n_layers=3, n_experts=None))
    router = 24 * 5
    assert tc.count_params(model) - tc.count_params(dense) == 3 * (4 * per_expert + router)


@pytest.mark.parametrize("gate", ["switch", "mixtral"])
def test_the_task_loss_alone_trains_a_top_1_router_with_the_switch_gate_and_not_with_mixtrals(gate: str) -> None:
    """The gradient of the language-model loss alone (no balancing loss added) reaches every router of a
    top-1 model through Switch's gate; Mixtral's gate is exactly 1 at k = 1, so it gives the routers none."""
    tc.set_seed(6)
    model = tc.DecoderOnly(_moe_config(n_experts=4, moe_top_k=1))
    for block in model.transformer.blocks:
        block.ffn.router.gate = gate
    idx = torch.randint(0, 37, (3, 10), generator=torch.Generator().manual_seed(1))  # (B, T + 1)
    tc.lm_loss(model(idx[:, :-1]), idx[:, 1:]).backward()
    grads = [block.ffn.router.weight.grad for block in model.transformer.blocks]  # (4, 24) each
    if gate == "switch":
        assert all(g is not None and (g.abs().sum(dim=1) > 0).all() for g in grads)  # every expert's row
    else:
        assert all(g is None or torch.count_nonzero(g) == 0 for g in grads)


def test_the_default_gate_is_switch_for_top_1_and_mixtral_otherwise_and_unknown_gates_are_refused() -> None:
    gates = [tc.MoEFeedForward(8, 16, n_experts=4, top_k=k).router.gate for k in (1, 2, 3)]
    assert gates == ["switch", "mixtral", "mixtral"]
    assert tc.MoEFeedForward(8, 16, n_experts=4, top_k=1, gate="mixtral").router.gate == "mixtral"
    assert "n_experts=4, top_k=1, gate='switch'" in repr(tc.MoEFeedForward(8, 16, n_experts=4, top_k=1))
    for k, gate in ((1, "switch"), (2, "mixtral")):  # the config has no gate field: the default by k applies
        model = tc.DecoderOnly(_moe_config(moe_top_k=k))
        assert all(block.ffn.router.gate == gate for block in model.transformer.blocks)
    with pytest.raises(ValueError, match=r"gate must be one of \['mixtral', 'switch'\], got 'softmax'"):
        tc.MoEFeedForward(8, 16, n_experts=4, gate="softmax")


@pytest.mark.parametrize("gate", ["switch", "mixtral"])
def test_a_top_1_model_trained_without_the_balancing_loss_moves_its_routers_only_with_the_switch_gate(
    gate: str,
) -> None:
    """``tc.train`` minimises the language-model loss alone; with Mixtral's gate at ``k = 1`` (the old rule,
    set here by hand) the routers get zero gradient, and AdamW without weight decay leaves them as they were."""
    tc.set_seed(5)
    model = tc.DecoderOnly(_moe_config(n_experts=4, moe_top_k=1))
    moes = [block.ffn for block in model.transformer.blocks]
    for moe in moes:
        moe.router.gate = gate
    before = [moe.router.weight.detach().clone() for moe in moes]  # (4, 24) each
    idx = torch.randint(0, 37, (4, 12), generator=torch.Generator().manual_seed(0))  # (B, T + 1)
    tc.train(model, lambda: (idx[:, :-1], idx[:, 1:]), steps=3, progress=False)
    moved = [(moe.router.weight.detach() - w).abs().sum().item() for moe, w in zip(moes, before)]
    assert all(m > 0 for m in moved) if gate == "switch" else all(m == 0 for m in moved)


def test_the_mixtral_gate_equals_transformers_mixtral_block() -> None:
    """``MoEFeedForward(gate="mixtral", activation="swiglu", bias=False)`` with the weights of a random
    ``MixtralSparseMoeBlock`` (hidden 12, expert FFN 20, 5 experts, 2 per token; 3 × 7 tokens): the same
    output (to 1e-6: their router's softmax is float32), and the same experts for every token. Mixtral
    renormalises the chosen experts' probabilities, which is the softmax over the chosen scores."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    torch.manual_seed(3)
    config = transformers.MixtralConfig(hidden_size=12, intermediate_size=20, num_local_experts=5,
                                        num_experts_per_tok=2, hidden_act="silu")
    theirs = MixtralSparseMoeBlock(config).double().eval()
    for p in theirs.parameters():  # their init leaves the experts' weights empty
        torch.nn.init.normal_(p, std=0.3)
    ours = tc.MoEFeedForward(12, 20, n_experts=5, top_k=2, activation="swiglu", bias=False, gate="mixtral").double()
    with torch.no_grad():
        ours.router.weight.copy_(theirs.gate.weight)
        for e, expert in enumerate(ours.experts):
            gate_up = theirs.experts.gate_up_proj[e]  # (2 · 20, 12): the gate's rows, then the up rows
            expert.gate.weight.copy_(gate_up[:20])
            expert.up.weight.copy_(gate_up[20:])
            expert.down.weight.copy_(theirs.experts.down_proj[e])  # (12, 20)
    x = torch.randn(3, 7, 12, dtype=torch.float64)
    with torch.no_grad():
        expected = theirs(x)
        expected = expected[0] if isinstance(expected, tuple) else expected  # (3, 7, 12)
        got, _ = ours(x)
        _, their_weights, their_experts = theirs.gate(x.reshape(-1, 12))
        gates, chosen, _ = ours.router.route(x.reshape(-1, 12))
    # their router's softmax runs in float32 (router_logits.float()): agreement to float32 rounding
    assert torch.equal(chosen, their_experts) and (gates - their_weights).abs().max() < 1e-6
    assert (got - expected).abs().max() < 1e-6
    # the mutation: Switch's gate (not renormalised) differs from Mixtral's block
    ours.router.gate = "switch"
    with torch.no_grad():
        assert (ours(x)[0] - expected).abs().max() > 1e-3
