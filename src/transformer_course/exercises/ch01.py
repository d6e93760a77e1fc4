"""Checkers for chapter 1 (RNN 的两个致命缺陷).

Row-vector convention, as in ``x @ W``: an input ``x_t`` is ``(B, D)`` or ``(D,)``, ``W_ih`` is
``(D, H)``, ``W_hh`` is ``(H, H)``. Each exercise lists the typical mistakes it recognises;
``tests/test_exercises.py`` proves that every one of them is rejected with its own hint. The last
case of each exercise is a twin: the first case's shapes with new values (a cached answer shows).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ._core import Exercise, Mistake, randn as _randn


# ---- 练习 1: the RNN's time loop ---------------------------------------------------------------

def _rnn_cases() -> list[tuple[Tensor, Tensor, Tensor, Tensor]]:
    g = torch.Generator().manual_seed(11)
    # (B, T, D, H): all differ within a case; a single step (T = 1); the twin of the first case
    dims = [(2, 5, 3, 4), (1, 7, 6, 2), (3, 4, 2, 5), (4, 1, 3, 2), (2, 5, 3, 4)]
    return [(_randn(g, b, t, d), _randn(g, d, h, scale=d**-0.5), _randn(g, h, h, scale=h**-0.5), _randn(g, h))
            for b, t, d, h in dims]


def _rnn_reference(x: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> Tensor:
    h = x.new_zeros(x.shape[0], w_hh.shape[0])  # (B, H): h_0 = 0
    hs = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ w_ih + h @ w_hh + b)  # (B, H)
        hs.append(h)
    return torch.stack(hs, dim=1)  # (B, T, H)


# The mistakes: each is its own ``step(x_t, h_{t-1}) -> h_t``, run over time by ``_scan``.
_Step = Callable[[Tensor, Tensor], Tensor]


def _scan(x: Tensor, hidden: int, step: _Step) -> Tensor:
    """``step`` applied at t = 0, 1, ... from ``h_0 = 0``: the states ``(B, T, H)`` after each step."""
    states = [x.new_zeros(x.shape[0], hidden)]  # (B, H)
    for t in range(x.shape[1]):
        states.append(step(x[:, t], states[-1]))
    return torch.stack(states[1:], dim=1)


def _stores_previous(x: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> Tensor:
    """Right steps, but output t is h_{t-1}, the state before reading x_t (output 0 is h_0 = 0)."""
    hs = _scan(x, w_hh.shape[0], lambda x_t, h: torch.tanh(x_t @ w_ih + h @ w_hh + b))  # (B, T, H)
    return torch.cat((torch.zeros_like(hs[:, :1]), hs[:, :-1]), dim=1)


RNN_LOOP = Exercise(
    name="rnn_forward",
    reference=_rnn_reference,
    make_cases=_rnn_cases,
    mistakes=(
        Mistake("缺少 tanh：h_t = tanh(x_t W_ih + h_{t-1} W_hh + b)，没有非线性，RNN 就只是一个线性系统。",
                lambda x, wi, wh, b: _scan(x, wh.shape[0], lambda x_t, h: x_t @ wi + h @ wh + b)),
        Mistake("每一步都只用了当前输入：别忘了加上上一步的隐状态 h_{t-1} @ w_hh，这才是「循环」。",
                lambda x, wi, wh, b: _scan(x, wh.shape[0], lambda x_t, h: torch.tanh(x_t @ wi + b))),
        Mistake("w_hh 用转置了：本题约定行向量，h_{t-1} @ w_hh，而不是 h_{t-1} @ w_hh.T。",
                lambda x, wi, wh, b: _scan(x, wh.shape[0], lambda x_t, h: torch.tanh(x_t @ wi + h @ wh.T + b))),
        Mistake("存错了隐状态：第 t 个输出应是读完 x_t 之后的 h_t，你存的是更新之前的 h_{t-1}（第一个输出成了全 0）。",
                _stores_previous),
        Mistake("激活函数用错了：RNN 的隐状态用 tanh（取值 -1..1，可正可负），你用的是 sigmoid。",
                lambda x, wi, wh, b: _scan(x, wh.shape[0], lambda x_t, h: torch.sigmoid(x_t @ wi + h @ wh + b))),
    ),
)
check_rnn_forward = RNN_LOOP.check


# ---- 练习 2: one LSTM step ---------------------------------------------------------------------

def _lstm_cases() -> list[tuple[Tensor, ...]]:
    g = torch.Generator().manual_seed(12)
    dims = [(2, 3, 4), (5, 6, 2), (1, 4, 7), (2, 3, 4)]  # (B, D, H); the last: the first's twin
    return [(_randn(g, b, d), _randn(g, b, h), _randn(g, b, h), _randn(g, d, 4 * h, scale=d**-0.5),
             _randn(g, h, 4 * h, scale=h**-0.5), _randn(g, 4 * h)) for b, d, h in dims]


def _lstm_reference(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    i, f, g, o = (x @ w_ih + h @ w_hh + b).chunk(4, dim=-1)  # (B, H) each: input, forget, candidate, output
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)  # (B, H): forget some, write some
    return torch.sigmoid(o) * torch.tanh(c_new), c_new  # h_t, c_t


# The mistakes: the pre-activations cut in four (``_cut``), then the wrong line of each.
def _cut(x: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> tuple[Tensor, ...]:
    return (x @ w_ih + h @ w_hh + b).chunk(4, dim=-1)  # 4 × (B, H), in the order they lie


def _gates_figo(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    f, i, g, o = _cut(x, h, w_ih, w_hh, b)  # read as (f, i, g, o): the first two blocks swapped
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_new), c_new


def _sigmoid_candidate(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor,
                       b: Tensor) -> tuple[Tensor, Tensor]:
    i, f, g, o = _cut(x, h, w_ih, w_hh, b)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.sigmoid(g)  # sigmoid(g), not tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_new), c_new


def _no_tanh_of_c(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    i, f, g, o = _cut(x, h, w_ih, w_hh, b)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * c_new, c_new  # o ⊙ c_t, not o ⊙ tanh(c_t)


def _old_cell(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    i, f, g, o = _cut(x, h, w_ih, w_hh, b)
    h_new = torch.sigmoid(o) * torch.tanh(c)  # from c_{t-1}, before the update
    return h_new, torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)


def _no_input_gate(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    i, f, g, o = _cut(x, h, w_ih, w_hh, b)
    c_new = torch.sigmoid(f) * c + torch.tanh(g)  # g written without the input gate i
    return torch.sigmoid(o) * torch.tanh(c_new), c_new


LSTM_STEP = Exercise(
    name="lstm_step",
    arg_names=("x_t", "h", "c", "w_ih", "w_hh", "b"),
    reference=_lstm_reference,
    make_cases=_lstm_cases,
    mistakes=(
        Mistake("门的顺序不对：4H 个预激活按 (i, f, g, o) 切成四块——输入门、遗忘门、候选值、输出门。",
                _gates_figo),
        Mistake("候选值 g 要用 tanh（取值 -1..1，可正可负），而不是 sigmoid；三个门才用 sigmoid。",
                _sigmoid_candidate),
        Mistake("输出少了 tanh：h_t = o ⊙ tanh(c_t)，不是 o ⊙ c_t。",
                _no_tanh_of_c),
        Mistake("h_t 要用更新之后的细胞状态：h_t = o ⊙ tanh(c_t)，你用的是旧的 c_{t-1}。",
                _old_cell),
        Mistake("漏了输入门：c_t = f ⊙ c_{t-1} + i ⊙ g，候选值 g 要先乘输入门 i 再写入细胞状态。",
                _no_input_gate),
    ),
)
check_lstm_step = LSTM_STEP.check


# ---- 练习 3: the gradient at a distance --------------------------------------------------------

def _grad_cases() -> list[tuple[Tensor, Tensor, Tensor]]:
    g = torch.Generator().manual_seed(13)
    dims = [(6, 3, 4), (9, 5, 2), (12, 4, 7), (1, 2, 3), (6, 3, 4)]  # (T, D, H); one step; the first's twin
    return [(_randn(g, t, d), _randn(g, d, h, scale=d**-0.5), _randn(g, h, h, scale=h**-0.5)) for t, d, h in dims]


def _grad_reference(x: Tensor, w_ih: Tensor, w_hh: Tensor) -> Tensor:
    x = x.detach().clone().requires_grad_()
    h = x.new_zeros(w_hh.shape[0])  # (H,)
    for t in range(x.shape[0]):
        h = torch.tanh(x[t] @ w_ih + h @ w_hh)  # (H,)
    h.sum().backward()  # loss = h_T.sum()
    return x.grad.norm(dim=-1).flip(0)  # (T,): element d is ‖d loss / d x_{T-1-d}‖


# The mistakes: the gradient rows d loss / d x_t of a loss of the states (``_input_grads``), then the wrong reduction.
def _input_grads(x: Tensor, w_ih: Tensor, w_hh: Tensor, loss: Callable[[list[Tensor]], Tensor]) -> Tensor:
    """``d loss(h_1, ..., h_T) / d x`` ``(T, D)``: row t is the gradient at the input x_t."""
    x = x.detach().clone().requires_grad_()
    states = [x.new_zeros(w_hh.shape[0])]  # (H,) each
    for t in range(x.shape[0]):
        states.append(torch.tanh(x[t] @ w_ih + states[-1] @ w_hh))
    loss(states[1:]).backward()
    return x.grad


def _last_state(states: list[Tensor]) -> Tensor:
    return states[-1].sum()


GRADIENT = Exercise(
    name="gradient_by_distance",
    reference=_grad_reference,
    make_cases=_grad_cases,
    mistakes=(
        Mistake("顺序反了：第 d 个元素应是距离最后一步 d 步的输入 x_{T-1-d} 的梯度（d = 0 是最后一个输入），"
                "把按位置排的结果翻转一下（flip）。",
                lambda x, wi, wh: _input_grads(x, wi, wh, _last_state).norm(dim=-1)),
        Mistake("损失只取最后一步：loss = h_T.sum()。你把每一步的隐状态都加进了损失，近处的梯度就混进来了。",
                lambda x, wi, wh: _input_grads(x, wi, wh, lambda hs: sum(h.sum() for h in hs)).norm(dim=-1).flip(0)),
        Mistake("要的是梯度的 L2 范数（.norm()），你返回的是平方和。",
                lambda x, wi, wh: (_input_grads(x, wi, wh, _last_state) ** 2).sum(-1).flip(0)),
        Mistake("范数的维度不对：对每个时刻 t，在特征维（最后一维）上求范数，得到长度为 T 的向量。",
                lambda x, wi, wh: _input_grads(x, wi, wh, _last_state).norm(dim=0)),
    ),
)
check_gradient_by_distance = GRADIENT.check

EXERCISES = (RNN_LOOP, LSTM_STEP, GRADIENT)
