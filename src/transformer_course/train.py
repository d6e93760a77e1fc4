"""One small training loop (AdamW, gradient clipping, a learning-rate schedule if asked, a progress bar)
and the loss and accuracy it uses.

Models map ``inputs (B, T)`` to logits ``(B, T, V)`` (``DecoderOnly``, ``EncoderOnly``, ``RecurrentLM``);
targets ``(B, T)`` mark unscored positions with ``IGNORE_INDEX`` (see ``data.py``).
"""
from __future__ import annotations

import sys
from collections.abc import Callable

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
    Returns ``{"loss": [loss of each step]}``.

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
    history: dict[str, list[float]] = {"loss": []}
    bar = tqdm(total=steps, disable=not progress, desc="train", file=_progress_target() if progress else None,
               mininterval=0.5)
    for step in range(steps):
        if lr_schedule is not None:
            optimizer.param_groups[0]["lr"] = check_float("lr_schedule(step)", lr_schedule(step), "[0, inf)")
        loss = loss_step()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        history["loss"].append(loss.item())
        bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", refresh=False)
        bar.update()
    bar.bar_format = _FINAL_FORMAT
    bar.close()  # draws the final state once more, in _FINAL_FORMAT
    model.eval()
    return history
