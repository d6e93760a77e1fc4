"""How evenly chapter 16's top-1 MoE model uses its experts, over seeds and balancing-loss weights.

    python tools/moe_balance.py 0.1 switch 8     # weight 0.1, Switch's gate, seed shifts 0-7
    python tools/moe_balance.py 0 mixtral 2      # the old rule: the router does not move at weight 0

The chapter prints one run of each weight and asserts none of it (the balance varies from seed to seed);
this is the measurement its prose quotes. Each line: validation loss, the balancing loss summed over the
two layers (balanced 2, collapsed 8), the largest and smallest share of tokens any expert got in either
layer, and how far the routers' weights moved during training (0: the router never learned).
The recipe is chapter 16's (``make_model``, ``train_lm`` with 4 experts, top-1, 200 steps); one thread.
"""
from __future__ import annotations

import os
import sys

import torch

import transformer_course as tc
from transformer_course.poems import load_poems
from transformer_course.poet import CharVocab

L = 32


def main(argv: list[str]) -> None:
    weight, gate, seeds = float(argv[0]), argv[1], int(argv[2])
    torch.set_num_threads(1)
    vocab = CharVocab("".join(p.text for p in load_poems("train")))
    train_ids, val_ids = (torch.tensor(vocab.encode("\n".join(p.text for p in load_poems(split))))
                          for split in ("train", "val"))
    x_val, y_val = tc.data.lm_batch(val_ids, 128, L, generator=16)
    for seed in range(seeds):
        os.environ["TC_SEED_SHIFT"] = str(seed)
        tc.set_seed(0)
        config = tc.TransformerConfig(vocab_size=len(vocab), d_model=64, n_heads=4, n_layers=2, d_ff=256,
                                      max_len=4 * L, positional="learned", norm="rmsnorm", n_experts=4,
                                      moe_top_k=1)
        moe = tc.DecoderOnly(config)
        for block in moe.transformer.blocks:
            block.ffn.router.gate = gate  # "switch" or "mixtral"
        before = [block.ffn.router.weight.detach().clone() for block in moe.transformer.blocks]
        gen = torch.Generator().manual_seed(0)

        def step() -> torch.Tensor:
            x, y = tc.data.lm_batch(train_ids, 32, L, generator=gen)
            logits, balancing = moe.logits_and_balancing_loss(x)
            return tc.lm_loss(logits, y) + weight * balancing

        tc.train(moe, loss_step=step, steps=200, lr=3e-3, progress=False)
        moved = max((b.ffn.router.weight - w).abs().max().item() for b, w in zip(moe.transformer.blocks, before))
        with torch.no_grad():
            trace = moe.inspect(x_val)
            loss, aux = tc.lm_loss(trace.logits, y_val).item(), moe.logits_and_balancing_loss(x_val)[1].item()
        shares = [torch.bincount(layer.experts.flatten(), minlength=4).float() / layer.experts.numel()
                  for layer in trace.layers]
        print(f"weight {weight} gate {gate} seed {seed}: validation {loss:.3f}, balancing loss {aux:.3f}, "
              f"largest share {max(s.max().item() for s in shares):.2f}, "
              f"smallest {min(s.min().item() for s in shares):.2f}, router moved {moved:.3g}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
