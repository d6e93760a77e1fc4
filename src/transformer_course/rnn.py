"""RNN and LSTM from scratch (batch first), the baselines of chapter 1.

Both read the sequence one step at a time: step ``t`` needs the hidden state of step ``t - 1``,
so the time loop cannot run in parallel, and information from step 1 reaches step ``T`` only
through ``T - 1`` repeated updates. The input projections of all steps are computed at once.
Weight layout and gate order (i, f, g, o) follow ``torch.nn.RNN`` / ``torch.nn.LSTM``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ._checks import check_choice, check_int, check_tensor


class _Recurrent(nn.Module):
    """What RNN and LSTM share: ``ih`` (W_ih, applied to all steps at once) and ``hh`` (W_hh, step by step)."""

    def __init__(self, input_size: int, hidden_size: int, *, gates: int, bias: bool) -> None:
        super().__init__()
        self.input_size, self.hidden_size = check_int("input_size", input_size), check_int("hidden_size", hidden_size)
        self.ih = nn.Linear(input_size, gates * hidden_size, bias=bias)  # (gates·hidden, input_size)
        self.hh = nn.Linear(hidden_size, gates * hidden_size, bias=bias)  # (gates·hidden, hidden)

    def _start(self, x: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
        """Check the inputs; return the first hidden state ``(B, hidden)`` and ``W_ih x_t + b`` for all ``t``."""
        check_tensor("x", x, "(B, T, input_size)", input_size=self.input_size)
        B = x.shape[0]
        h = x.new_zeros(B, self.hidden_size) if h0 is None else h0
        check_tensor("h0", h, "(B, hidden)", B=B, hidden=self.hidden_size)
        return h, self.ih(x)  # (B, hidden), (B, T, gates·hidden): one matmul for all steps


class RNN(_Recurrent):
    """Elman RNN ``h_t = tanh(W_ih x_t + W_hh h_{t-1} + b)``.

    ``forward(x (B, T, input_size), h0 (B, hidden)=None) -> (hs (B, T, hidden), h_T (B, hidden))``.
    """

    def __init__(self, input_size: int, hidden_size: int, *, bias: bool = True) -> None:
        super().__init__(input_size, hidden_size, gates=1, bias=bias)

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        h, xs = self._start(x, h0)  # (B, hidden), (B, T, hidden)
        hs = []
        for t in range(x.shape[1]):  # sequential: step t waits for step t - 1
            h = torch.tanh(xs[:, t] + self.hh(h))  # (B, hidden)
            hs.append(h)
        return torch.stack(hs, dim=1), h  # (B, T, hidden), (B, hidden)


class LSTM(_Recurrent):
    """LSTM: input, forget and output gates, and a cell state ``c`` that is updated additively.

    ``forward(x (B, T, input_size), state=(h0, c0)=None) -> (hs (B, T, hidden), (h_T, c_T))``.
    """

    def __init__(self, input_size: int, hidden_size: int, *, bias: bool = True) -> None:
        super().__init__(input_size, hidden_size, gates=4, bias=bias)  # rows: input, forget, cell, output gates

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        h, xs = self._start(x, None if state is None else state[0])  # (B, hidden), (B, T, 4·hidden)
        c = torch.zeros_like(h) if state is None else state[1]
        check_tensor("c0", c, "(B, hidden)", B=x.shape[0], hidden=self.hidden_size)
        hs = []
        for t in range(x.shape[1]):
            i, f, g, o = (xs[:, t] + self.hh(h)).chunk(4, dim=-1)  # (B, hidden) each
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)  # forget some, write some
            h = torch.sigmoid(o) * torch.tanh(c)  # (B, hidden)
            hs.append(h)
        return torch.stack(hs, dim=1), (h, c)  # (B, T, hidden), ((B, hidden), (B, hidden))


class RecurrentLM(nn.Module):
    """Embedding, an ``RNN`` or ``LSTM``, and a linear head: ``idx (B, T) -> logits (B, T, vocab_size)``.

    The same interface as ``DecoderOnly``, so the same training loop and tasks compare them.
    """

    def __init__(self, vocab_size: int, hidden_size: int, *, cell: str = "lstm") -> None:
        super().__init__()
        self.embedding = nn.Embedding(check_int("vocab_size", vocab_size), hidden_size)
        self.rnn = {"rnn": RNN, "lstm": LSTM}[check_choice("cell", cell, ("rnn", "lstm"))](hidden_size, hidden_size)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, idx: Tensor) -> Tensor:
        check_tensor("idx", idx, "(B, T)", dtype="int")
        hs, _ = self.rnn(self.embedding(idx))  # (B, T, hidden)
        return self.head(hs)  # (B, T, V)
