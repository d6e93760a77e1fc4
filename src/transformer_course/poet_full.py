"""The shipped poet: one model trained on 全唐诗's regular poems, with a form token that starts each poem.

A row is ``<|五绝|>`` (or one of the other three forms) + the poem + ``<|endoftext|>``; one row in ten
starts with ``<|endoftext|>`` instead, so the same model can also write without being told the form.
Every poem of one form has the same length (五绝 25 characters with the line break, 七律 67), so a batch
drawn from one form needs no padding: ``form_batches`` picks a form (in proportion to its tokens), then
that form's poems.

``train_full`` trains a recipe with validation every N steps and a resumable checkpoint
(``python -m transformer_course.poet --train --recipe full``); ``export`` stores the weights in int8 with
one scale per row (what ships in ``data/poet.pt``), ``load_shipped`` checks its hash and vocabulary and
returns the model in float32.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import re
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

import torch
from torch import Tensor

from torch.nn import functional as F

from .config import TransformerConfig
from .generate import generate
from .models import DecoderOnly
from .poems import _HAN, EOT, REGULAR_FORMS, CharVocab, Poem, load_tang
from .train import lm_loss, train, warmup_cosine
from .utils import count_flops, machine, set_seed

_HAN_RE = re.compile(f"[{_HAN}]")
FORM_TOKENS = {form: f"<|{form}|>" for form in REGULAR_FORMS}
SHIPPED_FORMAT = "transformer_course shipped poet v1"
# SHA-256 of data/poet.pt, written by tools/ship_poet.py.
SHIPPED_SHA256 = "1b91bfc198bf7c66ad2cbd23d2f8806fcd49346dc9a2e4f29d79fcb1130621d3"

# Each recipe: the model, then the run. tokens: per batch (the row count depends on the form).
RECIPES = {
    "full": {"model": {"d_model": 256, "n_heads": 8, "n_layers": 4, "d_ff": 1024, "dropout": 0.1},
             "steps": 2400, "tokens": 4096, "peak_lr": 2e-3, "warmup": 100, "eval_every": 300},
    "short": {"model": {"d_model": 128, "n_heads": 4, "n_layers": 2, "d_ff": 512, "dropout": 0.0},
              "steps": 100, "tokens": 2048, "peak_lr": 3e-3, "warmup": 20, "eval_every": 25},
    "test": {"model": {"d_model": 24, "n_heads": 3, "n_layers": 1, "d_ff": 40, "dropout": 0.0},
             "steps": 4, "tokens": 256, "peak_lr": 3e-3, "warmup": 1, "eval_every": 2},
}
MAX_LEN = 68  # the longest row's inputs: <|七律|> + 67 characters


def poet_vocab() -> CharVocab:
    """Every character of the training poems and the four form tokens."""
    return CharVocab("".join(p.text for p in load_tang("train")), specials=tuple(FORM_TOKENS.values()))


def form_rows(poems: Sequence[Poem], vocab: CharVocab) -> dict[str, Tensor]:
    """Per form, one row per poem: ``<|form|>`` poem ``<|endoftext|>``, ``(N, L + 2)`` with ``L`` the
    form's length in characters (line breaks included)."""
    rows: dict[str, list[list[int]]] = {}
    for p in poems:
        rows.setdefault(p.form, []).append([vocab.stoi[FORM_TOKENS[p.form]], *vocab.encode(p.text), vocab.eot])
    return {form: torch.tensor(r) for form, r in rows.items()}


def form_batches(rows: dict[str, Tensor], tokens: int, *, generator: torch.Generator,
                 unconditioned: float = 0.1, eot: int = 0) -> Callable[[], tuple[Tensor, Tensor]]:
    """``get_batch()`` for ``tc.train``: a form drawn in proportion to its tokens, then ``tokens // T``
    of its rows (with replacement); a share ``unconditioned`` of them start with ``eot`` instead of the form
    token. Only ``generator`` decides, so a checkpoint of its state resumes the same batches."""
    forms = sorted(rows)
    weights = torch.tensor([float(rows[f].numel()) for f in forms])

    def get_batch() -> tuple[Tensor, Tensor]:
        form = forms[torch.multinomial(weights, 1, generator=generator).item()]
        data = rows[form]  # (N, T + 1)
        picked = data[torch.randint(len(data), (max(1, tokens // (data.shape[1] - 1)),), generator=generator)]
        plain = torch.rand(len(picked), generator=generator) < unconditioned  # (B,)
        picked[:, 0] = torch.where(plain, eot, picked[:, 0])
        return picked[:, :-1], picked[:, 1:]  # (B, T) each
    return get_batch


@torch.no_grad()
def validation_loss(model: DecoderOnly, rows: dict[str, Tensor], batch_rows: int = 256) -> float:
    """Mean loss per predicted token over every validation row (all forms, conditioned)."""
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for data in rows.values():
        for i in range(0, len(data), batch_rows):
            chunk = data[i : i + batch_rows].to(device)
            n = chunk[:, 1:].numel()
            total += lm_loss(model(chunk[:, :-1]), chunk[:, 1:]).item() * n
            count += n
    return total / count


def step_flops(model: DecoderOnly, T: int, B: int) -> int:
    """FLOPs of one training step on a ``(B, T)`` batch: 3x the forward's matrix products (the backward
    computes two products per forward product: the gradients of the input and of the weight)."""
    idx = torch.zeros(B, T, dtype=torch.long, device=next(model.parameters()).device)
    return 3 * count_flops(lambda: model(idx))


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """This machine's float32 matrix-product speed in FLOP/s: the best of ``repeats`` ``(n, n) @ (n, n)``."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def train_full(recipe: str = "full", *, checkpoint: str | Path | None = None, seed: int = 0,
               device: str | None = None, progress: bool = True, steps: int | None = None,
               log: Callable[[str], None] = print) -> tuple[DecoderOnly, CharVocab, dict[str, list[float]]]:
    """Train a recipe of ``RECIPES`` on 全唐诗's training poems; with ``checkpoint`` the run can be stopped
    and started again (it resumes from the file). Logs the configuration and the run's efficiency."""
    spec = RECIPES[recipe]
    steps = spec["steps"] if steps is None else steps
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    vocab = poet_vocab()
    train_rows = form_rows(load_tang("train"), vocab)
    val_rows = form_rows(load_tang("val"), vocab)
    set_seed(seed)
    model = DecoderOnly(TransformerConfig(vocab_size=len(vocab), max_len=MAX_LEN, **spec["model"])).to(device)
    generator = torch.Generator().manual_seed(seed)
    get_batch = form_batches(train_rows, spec["tokens"], generator=generator)
    n_tokens = sum(r[:, 1:].numel() for r in train_rows.values())
    flops = {f: step_flops(model, r.shape[1] - 1, spec["tokens"] // (r.shape[1] - 1)) for f, r in train_rows.items()}
    mean_flops = sum(flops[f] * train_rows[f].numel() for f in flops) / sum(r.numel() for r in train_rows.values())
    log(f"recipe {recipe}: {sum(p.numel() for p in model.parameters()):,} parameters, vocabulary {len(vocab):,}, "
        f"{steps} steps x {spec['tokens']} tokens = {steps * spec['tokens'] / n_tokens:.1f} passes over "
        f"{n_tokens:,} training tokens; {mean_flops / 1e9:.2f} GFLOP per step; {machine()}")
    start = time.perf_counter()
    history = train(model, get_batch, steps=steps, lr=spec["peak_lr"], weight_decay=0.1, device=device,
                    progress=progress, lr_schedule=warmup_cosine(steps, spec["peak_lr"], spec["warmup"]),
                    evaluate=lambda: validation_loss(model, val_rows), eval_every=spec["eval_every"],
                    checkpoint=checkpoint, checkpoint_every=spec["eval_every"] if checkpoint else None,
                    generators=[generator])
    seconds = time.perf_counter() - start
    log(f"{steps} steps in {seconds:.0f} s this session; validation loss {history['val_loss'][-1]:.3f}")
    return model, vocab, history


def efficiency(recipe: str = "full", steps: int = 20, log: Callable[[str], None] = print) -> dict[str, float]:
    """Time ``steps`` training steps of a recipe (after 3 warm-up steps): tokens/s, GFLOP/s, share of the
    machine's matrix-product peak, and what padding every poem to the longest form would waste."""
    spec = RECIPES[recipe]
    vocab = poet_vocab()
    rows = form_rows(load_tang("train"), vocab)
    set_seed(0)
    model = DecoderOnly(TransformerConfig(vocab_size=len(vocab), max_len=MAX_LEN, **spec["model"]))
    get_batch = form_batches(rows, spec["tokens"], generator=torch.Generator().manual_seed(0))
    batches = [get_batch() for _ in range(steps + 3)]
    flops = sum(step_flops(model, x.shape[1], x.shape[0]) for x, _ in batches[3:])
    tokens = sum(x.numel() for x, _ in batches[3:])
    feed = iter(batches)
    train(model, lambda: next(feed), steps=3, progress=False)
    start = time.perf_counter()
    train(model, lambda: next(feed), steps=steps, progress=False)
    seconds = time.perf_counter() - start
    peak = matmul_peak()
    real = sum(r[:, 1:].numel() for r in rows.values())
    padded = sum(len(r) for r in rows.values()) * MAX_LEN
    out = {"tokens_per_s": tokens / seconds, "gflops": flops / seconds / 1e9, "peak_gflops": peak / 1e9,
           "share_of_peak": flops / seconds / peak, "padding_waste": 1 - real / padded}
    log(f"{recipe}: {out['tokens_per_s']:,.0f} tokens/s, {out['gflops']:.0f} GFLOP/s = "
        f"{out['share_of_peak']:.0%} of this machine's matmul peak ({out['peak_gflops']:.0f} GFLOP/s, "
        f"{machine()}); padding all forms to {MAX_LEN} would waste {out['padding_waste']:.0%} of the tokens")
    return out


def write(model: DecoderOnly, vocab: CharVocab, form: str | None = None, *, n: int = 1, prompt: str = "",
          acrostic: str = "", rules: bool = False, temperature: float = 0.8, top_k: int | None = 20,
          generator: torch.Generator | None = None, use_cache: bool = True) -> list[str]:
    """``n`` poems in one batch: started by ``form``'s token (``None``: by ``<|endoftext|>``, form unasked)
    and ``prompt``; with ``rules`` or an ``acrostic``, decoded under ``poetics.VerseRules`` (the form's shape;
    with ``rules`` also the rhyme and no immediate repeats). Each poem ends at ``<|endoftext|>``."""
    from .poetics import VerseRules

    if (rules or acrostic) and form is None:
        raise ValueError("rules and acrostic need a form")
    start = vocab.eot if form is None else vocab.stoi[FORM_TOKENS[form]]
    idx = torch.tensor([[start, *vocab.encode(prompt)]] * n, device=next(model.parameters()).device)  # (n, T0)
    rules_filter = VerseRules(vocab, form, acrostic=acrostic, rhyme=rules, no_repeat=rules) \
        if (rules or acrostic) else None
    out = generate(model, idx, model.config.max_len - idx.shape[1], temperature=temperature, top_k=top_k,
                   generator=generator, logits_filter=rules_filter, use_cache=use_cache)[:, idx.shape[1]:].tolist()
    return [prompt + vocab.decode(row[: row.index(vocab.eot)] if vocab.eot in row else row) for row in out]


@torch.no_grad()
def token_losses(model: DecoderOnly, rows: dict[str, Tensor], batch_rows: int = 256) -> tuple[Tensor, Tensor]:
    """The loss of every predicted token of ``rows`` and the token itself, flattened over all rows: ``(N,)``
    each, in the order of ``rows`` (form by form)."""
    device = next(model.parameters()).device
    losses, targets = [], []
    for data in rows.values():
        for i in range(0, len(data), batch_rows):
            chunk = data[i : i + batch_rows].to(device)  # (b, T + 1)
            logits = model(chunk[:, :-1])  # (b, T, V)
            losses.append(F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="none").cpu())
            targets.append(chunk[:, 1:].flatten().cpu())
    return torch.cat(losses), torch.cat(targets)


def content_mask(targets: Tensor, vocab: CharVocab) -> Tensor:
    """True where the token is a Chinese character (the words), False for stops, line breaks and specials
    (the form)."""
    han = torch.tensor([len(c) == 1 and bool(_HAN_RE.fullmatch(c)) for c in vocab.itos])  # (V,)
    return han[targets]


def evaluate(model: DecoderOnly, vocab: CharVocab, *, per_form: int = 50, seed: int = 0,
             temperature: float = 0.8, top_k: int | None = 20) -> dict[str, dict[str, float]]:
    """Metrics of ``poetics.poem_metrics`` for held-out real poems (``per_form`` of each form), the model's
    poems (``per_form`` per form token, the same decoder settings) and the same under ``VerseRules``; and
    the model's validation loss per token: all, content (characters), form (stops, breaks, end)."""
    from .poetics import clause_set, poem_metrics

    train_clauses = clause_set(load_tang("train"))
    real = [p.text for form in REGULAR_FORMS for p in load_tang("val", form=form)[:per_form]]
    table = {"real (held out)": poem_metrics(real, train_clauses)}
    for name, rules in (("poet", False), ("poet + rules", True)):
        g = torch.Generator().manual_seed(seed)
        texts = [t for form in REGULAR_FORMS for t in write(model, vocab, form, n=per_form, rules=rules,
                                                            temperature=temperature, top_k=top_k, generator=g)]
        table[name] = poem_metrics(texts, train_clauses)
    losses, targets = token_losses(model, form_rows(load_tang("val"), vocab))
    content = content_mask(targets, vocab)
    table["poet"] |= {"loss": losses.mean().item(), "content loss": losses[content].mean().item(),
                      "form loss": losses[~content].mean().item()}
    return table


def export(model: DecoderOnly, vocab: CharVocab, path: str | Path, run: dict | None = None) -> str:
    """Write the shipped file: each float matrix as int8 with one float32 scale per row (symmetric,
    ``scale = max|row| / 127``), vectors in float32, and ``run`` (how it was trained: plain values, read
    back by ``shipped_run``); a tied output layer is stored once, as the embedding; returns the file's SHA-256."""
    state, seen = {}, set()
    for name, w in model.state_dict(keep_vars=True).items():
        if w.data_ptr() in seen:  # the output layer tied to the token embedding
            continue
        seen.add(w.data_ptr())
        w = w.detach().float().cpu()
        if w.dim() == 2:
            scale = (w.abs().amax(dim=1, keepdim=True) / 127).clamp(min=1e-12)  # (rows, 1)
            state[name] = {"q": torch.round(w / scale).to(torch.int8), "scale": scale}
        else:
            state[name] = {"w": w}
    buffer = io.BytesIO()
    torch.save({"format": SHIPPED_FORMAT, "config": dataclasses.asdict(model.config), "vocab": vocab.itos,
                "vocab_sha256": _vocab_hash(vocab.itos), "state": state, "run": run or {}}, buffer)
    Path(path).write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def _vocab_hash(itos: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(itos).encode("utf-8")).hexdigest()


def _read(path: str | Path | None) -> dict:
    data = (resources.files("transformer_course") / "data" / "poet.pt").read_bytes() if path is None \
        else Path(path).read_bytes()
    if path is None and hashlib.sha256(data).hexdigest() != SHIPPED_SHA256:
        raise ValueError("data/poet.pt does not match the SHA-256 recorded in poet_full.SHIPPED_SHA256")
    saved = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    if not isinstance(saved, dict) or saved.get("format") != SHIPPED_FORMAT:
        raise ValueError(f"path must be a file written by poet_full.export, got {str(path)!r}")
    return saved


def shipped_run(path: str | Path | None = None) -> dict:
    """How the shipped poet (or the file at ``path``) was trained: recipe, steps, seconds, machine, history."""
    return _read(path)["run"]


def load_shipped(path: str | Path | None = None, device: str = "cpu") -> tuple[DecoderOnly, CharVocab]:
    """The shipped poet (``eval()`` mode, float32) and its vocabulary; ``path``: another exported file.
    Refuses a shipped file whose SHA-256 is not the one recorded in the package, and a file whose
    vocabulary does not match its recorded hash."""
    saved = _read(path)
    if _vocab_hash(saved["vocab"]) != saved["vocab_sha256"]:
        raise ValueError("the vocabulary in the file does not match its recorded hash")
    itos = saved["vocab"]
    n_special = 2 + len(FORM_TOKENS)
    vocab = CharVocab(itos[n_special:], specials=itos[2:n_special])
    if vocab.itos != itos:
        raise ValueError("the file's vocabulary is not in CharVocab's order")
    model = DecoderOnly(TransformerConfig(**saved["config"]))
    state = {name: (v["q"].float() * v["scale"]) if "q" in v else v["w"] for name, v in saved["state"].items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = model.lm_head.weight is model.transformer.tok_emb.weight
    if unexpected or set(missing) - ({"lm_head.weight"} if tied else set()):
        raise ValueError(f"the file's weights do not fit the model: missing {missing}, unexpected {unexpected}")
    return model.to(device).eval(), vocab


__all__ = ["EOT", "FORM_TOKENS", "RECIPES", "content_mask", "efficiency", "export", "form_batches", "form_rows",
           "load_shipped", "poet_vocab", "token_losses", "train_full", "validation_loss", "write"]
