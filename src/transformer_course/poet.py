"""Chapter 14's plumbing: a character vocabulary for poems, batches of whole poems, a format score, a
checkpoint (weights, configuration and vocabulary in one file) and a command line that writes poems::

    python -m transformer_course.poet "春风" --form 七绝        # the shipped poet continues a first line
    python -m transformer_course.poet --acrostic 春夏秋冬 --rules # 藏头诗, rhymed, no repeated character
    python -m transformer_course.poet --evaluate                # its metrics against held-out real poems
    python -m transformer_course.poet --train                   # chapter 14's small poet (a minute), poet.pt
    python -m transformer_course.poet --train --recipe full     # the shipped poet's run (resumable)
    python -m transformer_course.poet "床前明月光" --checkpoint poet.pt   # a poet you trained

One token per character: a Chinese character is already a unit of meaning, and a 五言 line is then
exactly 6 tokens (5 characters and a punctuation mark). ``<|endoftext|>`` starts and ends every poem;
characters never seen in training become ``<unk>``. The shipped poet (``poet_full``) starts a poem with its
form's token instead (``<|七绝|>``).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from ._checks import check_int
from .config import TransformerConfig
from .data import IGNORE_INDEX
from .generate import generate
from .models import DecoderOnly
from .poems import EOT, UNK, CharVocab, load_poems  # noqa: F401  (EOT, UNK, CharVocab: also poet's)
from .train import train
from .utils import set_seed

CHECKPOINT_FORMAT = "transformer_course poet v1"
_LINE = re.compile(r"(?:[^，。？！；\n]{5}[，。？！；])+|(?:[^，。？！；\n]{7}[，。？！；])+")


def poem_rows(texts: Sequence[str], vocab: CharVocab, max_len: int) -> tuple[Tensor, Tensor]:
    """One row per poem, ``<|endoftext|>`` poem ``<|endoftext|>``, cut to ``max_len + 1`` tokens, as
    next-token pairs ``(N, max_len)`` each; the padding after a poem is not scored (``IGNORE_INDEX``)."""
    check_int("max_len", max_len, minimum=2)
    inputs = torch.full((len(texts), max_len), vocab.eot, dtype=torch.long)
    targets = torch.full((len(texts), max_len), IGNORE_INDEX, dtype=torch.long)
    for i, text in enumerate(texts):
        ids = torch.tensor([vocab.eot, *vocab.encode(text), vocab.eot][: max_len + 1])
        inputs[i, : len(ids) - 1], targets[i, : len(ids) - 1] = ids[:-1], ids[1:]
    return inputs, targets


def poem_batches(inputs: Tensor, targets: Tensor, batch_size: int, *, generator: torch.Generator
                 ) -> Callable[[], tuple[Tensor, Tensor]]:
    """``get_batch()`` for ``tc.train``: ``batch_size`` rows drawn at random (with ``generator``)."""
    def get_batch() -> tuple[Tensor, Tensor]:
        rows = torch.randint(len(inputs), (batch_size,), generator=generator)
        return inputs[rows], targets[rows]
    return get_batch


def line_ok(line: str) -> bool:
    """A regular line: clauses of 5 (or all of 7) characters, each closed by ，。？！ or ；."""
    return _LINE.fullmatch(line) is not None


def format_score(poems: Iterable[str]) -> float:
    """The share of the non-empty lines of ``poems`` that are regular 五言 or 七言 lines."""
    lines = [line for poem in poems for line in poem.split("\n") if line]
    return sum(map(line_ok, lines)) / max(1, len(lines))


def write_poem(model: DecoderOnly, vocab: CharVocab, prompt: str = "", *, max_new: int = 64,
               temperature: float = 0.8, top_k: int | None = 20, generator: torch.Generator | None = None,
               use_cache: bool = True) -> str:
    """Continue ``prompt`` (start of a poem) until ``<|endoftext|>`` or ``max_new`` characters."""
    device = next(model.parameters()).device
    max_new = min(max_new, model.config.max_len - 1 - len(prompt))
    idx = torch.tensor([[vocab.eot, *vocab.encode(prompt)]], device=device)  # (1, T0)
    out = generate(model, idx, max_new, temperature=temperature, top_k=top_k, generator=generator,
                   use_cache=use_cache)[0, idx.shape[1]:].tolist()
    return prompt + vocab.decode(out[: out.index(vocab.eot)] if vocab.eot in out else out)


def save_checkpoint(path: str | Path, model: DecoderOnly, vocab: CharVocab) -> None:
    """Weights, configuration and vocabulary in one file that ``load_checkpoint`` reads back."""
    n_special = 2 + len(vocab.specials)
    torch.save({"format": CHECKPOINT_FORMAT, "config": dataclasses.asdict(model.config),
                "vocab": vocab.itos[n_special:], "specials": list(vocab.specials),
                "state_dict": model.state_dict()}, path)


def load_checkpoint(path: str | Path, device: torch.device | str = "cpu") -> tuple[DecoderOnly, CharVocab]:
    """The model (in ``eval()`` mode) and vocabulary saved by ``save_checkpoint``."""
    saved = torch.load(path, map_location=device, weights_only=True)  # tensors and plain values only
    if not isinstance(saved, dict) or saved.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"path must be a checkpoint written by save_checkpoint, got {str(path)!r}")
    model = DecoderOnly(TransformerConfig(**saved["config"])).to(device)
    model.load_state_dict(saved["state_dict"])
    return model.eval(), CharVocab(saved["vocab"], saved.get("specials", ()))


# The chapter's recipe, which the command line reuses: a 2-layer model, whole poems, AdamW with a
# short warm-up and a cosine decay.
POET_SIZE = {"d_model": 64, "n_heads": 4, "n_layers": 2, "d_ff": 256, "max_len": 80, "dropout": 0.2}


def poet_schedule(steps: int, peak_lr: float = 3e-3, warmup: int = 20) -> Callable[[int], float]:
    """Linear warm-up over ``warmup`` steps, then a cosine decay to a tenth of ``peak_lr``."""
    def lr(step: int) -> float:
        if step < warmup:
            return peak_lr * (step + 1) / warmup
        return peak_lr * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup))))
    return lr


def train_poet(steps: int = 200, *, seed: int = 0, progress: bool = True) -> tuple[DecoderOnly, CharVocab]:
    """A poet trained on the training split of every poem shipped (the chapter's recipe)."""
    texts = [p.text for p in load_poems("train")]
    vocab = CharVocab("".join(texts))
    set_seed(seed)
    model = DecoderOnly(TransformerConfig(vocab_size=len(vocab), **POET_SIZE))
    get_batch = poem_batches(*poem_rows(texts, vocab, POET_SIZE["max_len"]), 32,
                             generator=torch.Generator().manual_seed(seed))
    train(model, get_batch, steps=steps, weight_decay=0.1, progress=progress, lr_schedule=poet_schedule(steps))
    return model, vocab


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_course.poet", description=__doc__.split("::")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prompt", nargs="?", default="", help="the start of the poem (may be empty)")
    parser.add_argument("--form", choices=("五绝", "七绝", "五律", "七律"), default=None,
                        help="the form the shipped poet writes (default: 七绝 with --acrostic, else any)")
    parser.add_argument("--acrostic", default="", help="藏头: the first character of each clause")
    parser.add_argument("--rules", action="store_true", help="rhyme, and never the same character twice in a row")
    parser.add_argument("--evaluate", action="store_true", help="the shipped poet's metrics table")
    parser.add_argument("--checkpoint", default=None, help="a poet.pt from chapter 14 or --train (default: the "
                        "shipped poet; with --train: the file to write, poet.pt)")
    parser.add_argument("--train", action="store_true", help="train a poet first and save it")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: the recipe's)")
    parser.add_argument("--recipe", choices=("chapter", "full", "short", "test"), default="chapter",
                        help="with --train: chapter 14's small poet, or a recipe of poet_full.RECIPES on 全唐诗 "
                             "(full: about 45 minutes on 2 CPU cores; stop it any time, run it again to resume)")
    parser.add_argument("--out", default="poet-full.pt", help="with --recipe: the exported model file")
    parser.add_argument("-n", type=int, default=3, help="how many poems")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--temperature", type=float, default=0.8)
    args = parser.parse_args(argv)
    from . import poet_full

    if args.train and args.recipe != "chapter":
        state = Path(args.out).with_suffix(".state.pt")
        print(f"training state in {state} (run the same command again to resume)")
        model, vocab, _ = poet_full.train_full(args.recipe, checkpoint=state, seed=args.seed, steps=args.steps)
        print(f"saved {args.out} (sha256 {poet_full.export(model, vocab, args.out)})")
        return 0
    if args.train:
        model, vocab = train_poet(200 if args.steps is None else args.steps, seed=args.seed)
        save_checkpoint(args.checkpoint or "poet.pt", model, vocab)
        print(f"saved {args.checkpoint or 'poet.pt'}")
    elif args.checkpoint is not None and not Path(args.checkpoint).exists():
        print(f"no checkpoint at {args.checkpoint}: run chapter 14, or add --train")
        return 2
    elif args.checkpoint is not None and torch.load(args.checkpoint, weights_only=True).get("format") \
            == poet_full.SHIPPED_FORMAT:
        model, vocab = poet_full.load_shipped(args.checkpoint)
    elif args.checkpoint is not None:
        model, vocab = load_checkpoint(args.checkpoint)
    else:
        model, vocab = poet_full.load_shipped()
    generator = torch.Generator().manual_seed(args.seed)
    if args.evaluate:
        table = poet_full.evaluate(model, vocab, seed=args.seed, temperature=args.temperature)
        columns = list(table["real (held out)"])
        print(f"{'':16}" + "".join(f"{c:>9}" for c in columns))
        for name, row in table.items():
            print(f"{name:16}" + "".join(f"{row[c]:9.3f}" for c in columns))
        extra = {k: v for k, v in table["poet"].items() if k not in columns}
        print("poet, validation loss per token (nats): " + ", ".join(f"{k} {v:.3f}" for k, v in extra.items()))
        return 0
    if poet_full.FORM_TOKENS["五绝"] not in vocab.stoi:  # chapter 14's poet: no forms, no rules
        if args.form or args.acrostic or args.rules:
            parser.error("--form, --acrostic and --rules need the shipped poet (or a --recipe poet)")
        for _ in range(args.n):
            print(write_poem(model, vocab, args.prompt, temperature=args.temperature, generator=generator) + "\n")
        return 0
    form = args.form or ("七绝" if args.acrostic else None)
    try:
        poems = poet_full.write(model, vocab, form, n=args.n, prompt=args.prompt, acrostic=args.acrostic,
                                rules=args.rules, temperature=args.temperature, generator=generator)
    except ValueError as error:
        parser.error(str(error))
    print("\n\n".join(poems))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
