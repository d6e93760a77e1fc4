"""Ship a poet: export the training state of a ``--recipe full`` run into src/transformer_course/data/poet.pt
(int8 weights with per-row scales, the vocabulary, and how the run went) and record its SHA-256 in
``poet_full.SHIPPED_SHA256``.

    python -m transformer_course.poet --train --recipe full --out poet-full.pt   # writes poet-full.state.pt
    python tools/ship_poet.py poet-full.state.pt --seconds 2700 --machine "AMD EPYC, 2 threads"

``--seconds`` and ``--machine``: the run's wall time and where it ran, as its log printed them.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

from common import ROOT, use_source_tree

use_source_tree()  # the package this script writes into, installed or not
from transformer_course import poet_full  # noqa: E402
from transformer_course.config import TransformerConfig  # noqa: E402
from transformer_course.models import DecoderOnly  # noqa: E402

OUT = ROOT / "src" / "transformer_course" / "data" / "poet.pt"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("state", type=Path, help="the training state a --recipe full run wrote")
    parser.add_argument("--recipe", default="full")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--machine", required=True)
    parser.add_argument("--note", default="", help="anything a reader of the figures should know")
    args = parser.parse_args()
    state = torch.load(args.state, map_location="cpu", weights_only=True)
    spec = poet_full.RECIPES[args.recipe]
    vocab = poet_full.poet_vocab()
    model = DecoderOnly(TransformerConfig(vocab_size=len(vocab), max_len=poet_full.MAX_LEN, **spec["model"]))
    model.load_state_dict(state["model"])
    run = {"recipe": args.recipe, "steps": state["step"], "tokens_per_step": spec["tokens"],
           "peak_lr": spec["peak_lr"], "warmup": spec["warmup"], "seconds": args.seconds, "machine": args.machine,
           "note": args.note, "history": state["history"]}
    digest = poet_full.export(model.eval(), vocab, OUT, run)
    source = ROOT / "src" / "transformer_course" / "poet_full.py"
    text = source.read_text(encoding="utf-8")
    source.write_text(re.sub(r'SHIPPED_SHA256 = "[0-9a-f]*"', f'SHIPPED_SHA256 = "{digest}"', text), encoding="utf-8")
    print(f"{OUT}: {OUT.stat().st_size:,} bytes, sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
