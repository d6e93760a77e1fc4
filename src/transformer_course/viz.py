"""The course's plotting style and attention heatmaps.

Text inside figures is English or math only: Colab and most servers have no CJK font, and a
Chinese label would render as empty boxes. Chinese belongs in the surrounding prose.
"""
from __future__ import annotations

import re
from typing import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import torch

_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")

COURSE_STYLE = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],  # ships with matplotlib: renders everywhere
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "figure.figsize": (6.4, 3.6),
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
}


def use_course_style() -> None:
    """Apply the course's matplotlib style (called once by each chapter's setup cell)."""
    mpl.rcParams.update(COURSE_STYLE)


def check_plot_text(*texts: str | Sequence[str] | None) -> None:
    """Raise ``ValueError`` if any text for a figure contains CJK characters (they render as boxes)."""
    for text in texts:
        items = [text] if isinstance(text, str) or text is None else list(text)
        for item in items:
            if item is not None and _CJK.search(str(item)):
                raise ValueError(
                    f"figure text {item!r} contains CJK characters, which render as boxes without a CJK font; "
                    "use English or math in figures and Chinese in the prose"
                )


def plot_attention(
    weights: torch.Tensor,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    annotate: bool = True,
) -> plt.Axes:
    """Heatmap of one attention matrix ``(Tq, Tk)``: rows are queries, columns are keys."""
    if not isinstance(weights, torch.Tensor) or weights.dim() != 2:
        got = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(f"weights must be a 2-D tensor (Tq, Tk), got {got}")
    t_q, t_k = weights.shape
    for name, labels, n in (("x_labels", x_labels, t_k), ("y_labels", y_labels, t_q)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} must have {n} entries to match weights {tuple(weights.shape)}, got {len(labels)}")
    check_plot_text(x_labels, y_labels, title)
    w = weights.detach().float().cpu()
    if ax is None:
        _, ax = plt.subplots(figsize=(0.45 * t_k + 1.8, 0.45 * t_q + 1.2))
    im = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=max(1e-9, float(w.max())))
    ax.grid(False)
    ax.set_xticks(range(t_k), x_labels if x_labels is not None else range(t_k), rotation=45, ha="right")
    ax.set_yticks(range(t_q), y_labels if y_labels is not None else range(t_q))
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if annotate and t_q * t_k <= 144:
        for i in range(t_q):
            for j in range(t_k):
                val = float(w[i, j])
                ax.text(j, i, f"{val:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if val > 0.6 * float(w.max()) else "black")
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax
