"""One small training loop (AdamW, gradient clipping, a learning-rate schedule if asked, a progress bar,
validation every N steps, a checkpoint to resume from) and the loss, accuracy and schedule it uses.

Models map ``inputs (B, T)`` to logits ``(B, T, V)`` (``DecoderOnly``, ``EncoderOnly``, ``RecurrentLM``);
targets ``(B, T)`` mark unscored positions with ``IGNORE_INDEX`` (see ``data.py``).
"""
from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from tqdm import tqdm

from ._checks import check_float, check_int, check_tensor
from .data import IGNORE_INDEX


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy over the scored positions: ``(B, T, V), (B, T) -> ()``."""
    check_tensor("logits", logits, "(B, T, V)")
    check_tensor("targets", targets, "(B, T)", dtype="int", B=logits.shape[0], T=logits.shape[1])
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)  # (B·T, V) vs (B·T,)


def accuracy(logits: Tensor, targets: Tensor) -> float:
    """Fraction of scored positions where the argmax of ``logits (B, T, V)`` equals ``targets (B, T)``."""
    check_tensor("logits", logits, "(B, T, V)")
    check_tensor("targets", targets, "(B, T)", dtype="int", B=logits.shape[0], T=logits.shape[1])
    scored = targets != IGNORE_INDEX  # (B, T)
    correct = (logits.argmax(dim=-1) == targets) & scored
    return correct.sum().item() / max(1, scored.sum().item())


def warmup_cosine(steps: int, peak_lr: float, warmup: int, final_ratio: float = 0.1) -> Callable[[int], float]:
    """The usual schedule, as ``lr_schedule(step)`` for ``train``: a linear warm-up over ``warmup`` steps
    (``peak_lr * (step + 1) / warmup``, so step ``warmup - 1`` is the first at ``peak_lr``), then half a
    cosine from ``peak_lr`` at step ``warmup`` down to ``final_ratio * peak_lr`` at step ``steps`` (the step
    after the last one: the last step's rate is just above the floor).

    Example:
        >>> lr = warmup_cosine(100, 1e-3, warmup=10)
        >>> lr(0), lr(9), lr(10), round(lr(55), 7)
        (0.0001, 0.001, 0.001, 0.00055)
    """
    check_int("steps", steps)
    check_int("warmup", warmup, minimum=0)
    check_float("peak_lr", peak_lr, "(0, inf)")
    check_float("final_ratio", final_ratio, "[0, 1]")

    def lr(step: int) -> float:
        if step < warmup:
            return peak_lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)  # 0 at the end of the warm-up, 1 at ``steps``
        return peak_lr * (final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
    return lr


CHECKPOINT_FORMAT = "transformer_course training state v1"


def _save_state(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, step: int,
                history: dict[str, list[float]], generators: Sequence[torch.Generator]) -> None:
    """Everything a resumed run needs to continue bit for bit: weights, optimizer moments, the step, the
    history, torch's global random state (dropout) and the state of every batch ``generator``."""
    state = {"format": CHECKPOINT_FORMAT, "step": step, "model": model.state_dict(),
             "optimizer": optimizer.state_dict(), "history": history, "rng": torch.get_rng_state(),
             "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
             "generators": [g.get_state() for g in generators]}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic: an interrupted save leaves the previous checkpoint whole


def _load_state(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
                generators: Sequence[torch.Generator]) -> tuple[int, dict[str, list[float]]]:
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint must be a file written by train(checkpoint=...), got {str(path)!r}")
    if len(state["generators"]) != len(generators):
        raise ValueError(f"checkpoint holds {len(state['generators'])} generator states, got "
                         f"{len(generators)} generators")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    if state["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    for g, g_state in zip(generators, state["generators"]):
        g.set_state(g_state)
    return state["step"], state["history"]


class _DisplayLine:
    """Where tqdm writes in a notebook: one text output, replaced in place at each update. Not a widget,
    so the stored notebook and the rendered book keep the bar's last state as plain text. The output is
    created by the first non-empty write, so a bar that never draws leaves no (empty) output behind."""

    encoding = "utf-8"  # tells tqdm it may draw the bar with block characters

    def __init__(self) -> None:
        self.handle = None

    def write(self, text: str) -> None:
        from IPython.display import display

        text = text.strip("\r\n").rstrip()  # tqdm pads with spaces to overwrite a longer line
        if not text:
            return
        if self.handle is None:
            self.handle = display({"text/plain": text}, raw=True, display_id=True)
        else:
            self.handle.update({"text/plain": text}, raw=True)

    def flush(self) -> None:
        pass


def _progress_target() -> object:
    """A ``_DisplayLine`` inside a Jupyter kernel (Jupyter, Colab, the book's build), else ``sys.stderr``."""
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    return _DisplayLine() if shell is not None and hasattr(shell, "kernel") else sys.stderr


# The bar's last state, which the stored notebook and the book keep: no elapsed time or rate, which would
# record the executing machine's speed and load rather than anything about the model.
_FINAL_FORMAT = "{desc}: {n_fmt}/{total_fmt} steps{postfix}"


def train(
    model: nn.Module,
    get_batch: Callable[[], tuple[Tensor, Tensor]] | None = None,
    *,
    steps: int,
    loss_step: Callable[[], Tensor] | None = None,
    lr: float = 3e-3,
    weight_decay: float = 0.0,
    grad_clip: float | None = 1.0,
    device: torch.device | str | None = None,
    progress: bool = True,
    loss_fn: Callable[[Tensor, Tensor], Tensor] = lm_loss,
    lr_schedule: Callable[[int], float] | None = None,
    evaluate: Callable[[], float] | None = None,
    eval_every: int | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_every: int | None = None,
    generators: Sequence[torch.Generator] = (),
) -> dict[str, list[float]]:
    """Train ``model`` for ``steps`` AdamW steps on batches ``get_batch() -> (inputs, targets)``.

    For a model that is not ``model(inputs) -> logits`` (two inputs, two losses, an extra term), pass
    ``loss_step() -> loss`` instead of ``get_batch``: it draws its own batch and returns the loss of the
    step; ``train`` does the rest (zero_grad, backward, clipping, step, schedule, bar, history).
    ``device`` defaults to where the model is; batches from ``get_batch`` are moved there.
    ``lr_schedule(step) -> float``, where given, is the learning rate of step 0, 1, ..., ``steps - 1``
    (a warm-up, say) in place of the constant ``lr``. ``progress`` shows a text bar with the step count
    and the latest loss; its last state, which a stored notebook keeps, reads ``train: 200/200 steps,
    loss=1.234`` (no time or rate: those belong to the machine). The model is left in ``eval()`` mode.
    Returns ``{"loss": [loss of each step]}``, and with ``evaluate`` also ``"val_step"`` and ``"val_loss"``.

    ``evaluate() -> float`` (a validation loss, say) is called every ``eval_every`` steps and after the
    last one, with the model in ``eval()`` mode and gradients off: ``history["val_loss"][i]`` is the value
    after ``history["val_step"][i]`` steps.

    ``checkpoint``: a file for the training state (weights, optimizer, step, history, random states of
    torch and of each batch generator in ``generators``), written every ``checkpoint_every`` steps and at the
    end. If the file exists when ``train`` starts, the run resumes from it: on the same machine, an
    interrupted run resumed this way ends with the same weights as an uninterrupted one.

    Example:
        >>> from transformer_course.data import copy_task
        >>> from transformer_course.rnn import RecurrentLM
        >>> model = RecurrentLM(10, 16)
        >>> history = train(model, lambda: copy_task(8, 4, 10, generator=0), steps=3, progress=False)
        >>> len(history["loss"])
        3
    """
    check_int("steps", steps)
    check_float("lr", lr, "(0, inf)")
    if (evaluate is None) != (eval_every is None):
        raise ValueError("give evaluate and eval_every together")
    if (checkpoint is None) != (checkpoint_every is None):
        raise ValueError("give checkpoint and checkpoint_every together")
    for name, every in (("eval_every", eval_every), ("checkpoint_every", checkpoint_every)):
        if every is not None:
            check_int(name, every)
    if (get_batch is None) == (loss_step is None):
        raise ValueError("give get_batch (for model(inputs) -> logits) or loss_step (() -> loss), got "
                         + ("both" if loss_step is not None else "neither"))
    device = next(model.parameters()).device if device is None else torch.device(device)
    model.to(device).train()
    if loss_step is None:
        def loss_step() -> Tensor:
            inputs, targets = (t.to(device) for t in get_batch())
            return loss_fn(model(inputs), targets)

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    history: dict[str, list[float]] = {"loss": []} | ({"val_step": [], "val_loss": []} if evaluate else {})
    start = 0
    if checkpoint is not None:
        checkpoint = Path(checkpoint)
        if checkpoint.exists():
            start, history = _load_state(checkpoint, model, optimizer, generators)

    def validate(done: int) -> None:
        model.eval()
        with torch.no_grad():
            history["val_step"].append(done)
            history["val_loss"].append(float(evaluate()))
        model.train()

    bar = tqdm(total=steps, initial=start, disable=not progress, desc="train",
               file=_progress_target() if progress else None, mininterval=0.5)
    for step in range(start, steps):
        if lr_schedule is not None:
            optimizer.param_groups[0]["lr"] = check_float("lr_schedule(step)", lr_schedule(step), "[0, inf)")
        loss = loss_step()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        history["loss"].append(loss.item())
        done = step + 1
        if evaluate is not None and (done % eval_every == 0 or done == steps):
            validate(done)
        if checkpoint is not None and (done % checkpoint_every == 0 or done == steps):
            _save_state(checkpoint, model, optimizer, done, history, generators)
        postfix = {"loss": f"{history['loss'][-1]:.3f}"}
        if evaluate is not None and history["val_loss"]:
            postfix["val"] = f"{history['val_loss'][-1]:.3f}"
        bar.set_postfix(postfix, refresh=False)
        bar.update()
    bar.bar_format = _FINAL_FORMAT
    bar.close()  # draws the final state once more, in _FINAL_FORMAT
    model.eval()
    return history
