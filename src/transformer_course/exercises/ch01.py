"""Checkers for chapter 1 (RNN 的两个致命缺陷).

Row-vector convention, as in ``x @ W``: an input ``x_t`` is ``(B, D)`` or ``(D,)``, ``W_ih`` is
``(D, H)``, ``W_hh`` is ``(H, H)``. Each exercise lists the typical mistakes it recognises;
``tests/test_exercises.py`` proves that every one of them is rejected with its own hint. The last
case of each exercise is a twin: the first case's shapes with new values (a cached answer shows).
"""
from __future__ import annotations

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


def _rnn(x: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor, *, act=torch.tanh, recurrent: bool = True,
         transpose: bool = False, store_before: bool = False) -> Tensor:
    w = w_hh.T if transpose else w_hh
    h = x.new_zeros(x.shape[0], w_hh.shape[0])  # (B, H)
    hs = []
    for t in range(x.shape[1]):
        before = h
        h = act(x[:, t] @ w_ih + (h @ w if recurrent else 0.0) + b)  # (B, H)
        hs.append(before if store_before else h)
    return torch.stack(hs, dim=1)  # (B, T, H)


def _rnn_reference(x: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> Tensor:
    return _rnn(x, w_ih, w_hh, b)


RNN_LOOP = Exercise(
    name="rnn_forward",
    reference=_rnn_reference,
    make_cases=_rnn_cases,
    mistakes=(
        Mistake("缺少 tanh：h_t = tanh(x_t W_ih + h_{t-1} W_hh + b)，没有非线性，RNN 就只是一个线性系统。",
                lambda x, wi, wh, b: _rnn(x, wi, wh, b, act=lambda a: a)),
        Mistake("每一步都只用了当前输入：别忘了加上上一步的隐状态 h_{t-1} @ w_hh，这才是「循环」。",
                lambda x, wi, wh, b: _rnn(x, wi, wh, b, recurrent=False)),
        Mistake("w_hh 用转置了：本题约定行向量，h_{t-1} @ w_hh，而不是 h_{t-1} @ w_hh.T。",
                lambda x, wi, wh, b: _rnn(x, wi, wh, b, transpose=True)),
        Mistake("存错了隐状态：第 t 个输出应是读完 x_t 之后的 h_t，你存的是更新之前的 h_{t-1}（第一个输出成了全 0）。",
                lambda x, wi, wh, b: _rnn(x, wi, wh, b, store_before=True)),
        Mistake("激活函数用错了：RNN 的隐状态用 tanh（取值 -1..1，可正可负），你用的是 sigmoid。",
                lambda x, wi, wh, b: _rnn(x, wi, wh, b, act=torch.sigmoid)),
    ),
)
check_rnn_forward = RNN_LOOP.check


# ---- 练习 2: one LSTM step ---------------------------------------------------------------------

def _lstm_cases() -> list[tuple[Tensor, ...]]:
    g = torch.Generator().manual_seed(12)
    dims = [(2, 3, 4), (5, 6, 2), (1, 4, 7), (2, 3, 4)]  # (B, D, H); the last: the first's twin
    return [(_randn(g, b, d), _randn(g, b, h), _randn(g, b, h), _randn(g, d, 4 * h, scale=d**-0.5),
             _randn(g, h, 4 * h, scale=h**-0.5), _randn(g, 4 * h)) for b, d, h in dims]


def _lstm(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor, *, order: str = "ifgo",
          g_act=torch.tanh, tanh_c: bool = True, old_c: bool = False,
          input_gate: bool = True) -> tuple[Tensor, Tensor]:
    gates = dict(zip(order, (x @ w_ih + h @ w_hh + b).chunk(4, dim=-1)))  # 4 × (B, H)
    i, f, o = torch.sigmoid(gates["i"]), torch.sigmoid(gates["f"]), torch.sigmoid(gates["o"])
    c_new = f * c + (i if input_gate else 1.0) * g_act(gates["g"])  # (B, H): forget some, write some
    h_new = o * (torch.tanh(c if old_c else c_new) if tanh_c else c_new)  # (B, H)
    return h_new, c_new


def _lstm_reference(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return _lstm(x, h, c, w_ih, w_hh, b)


LSTM_STEP = Exercise(
    name="lstm_step",
    reference=_lstm_reference,
    make_cases=_lstm_cases,
    mistakes=(
        Mistake("门的顺序不对：4H 个预激活按 (i, f, g, o) 切成四块——输入门、遗忘门、候选值、输出门。",
                lambda *a: _lstm(*a, order="figo")),
        Mistake("候选值 g 要用 tanh（取值 -1..1，可正可负），而不是 sigmoid；三个门才用 sigmoid。",
                lambda *a: _lstm(*a, g_act=torch.sigmoid)),
        Mistake("输出少了 tanh：h_t = o ⊙ tanh(c_t)，不是 o ⊙ c_t。",
                lambda *a: _lstm(*a, tanh_c=False)),
        Mistake("h_t 要用更新之后的细胞状态：h_t = o ⊙ tanh(c_t)，你用的是旧的 c_{t-1}。",
                lambda *a: _lstm(*a, old_c=True)),
        Mistake("漏了输入门：c_t = f ⊙ c_{t-1} + i ⊙ g，候选值 g 要先乘输入门 i 再写入细胞状态。",
                lambda *a: _lstm(*a, input_gate=False)),
    ),
)
check_lstm_step = LSTM_STEP.check


# ---- 练习 3: the gradient at a distance --------------------------------------------------------

def _grad_cases() -> list[tuple[Tensor, Tensor, Tensor]]:
    g = torch.Generator().manual_seed(13)
    dims = [(6, 3, 4), (9, 5, 2), (12, 4, 7), (1, 2, 3), (6, 3, 4)]  # (T, D, H); one step; the first's twin
    return [(_randn(g, t, d), _randn(g, d, h, scale=d**-0.5), _randn(g, h, h, scale=h**-0.5)) for t, d, h in dims]


def _grads(x: Tensor, w_ih: Tensor, w_hh: Tensor, *, flip: bool = True, all_steps: bool = False,
           squared: bool = False, norm_dim: int = -1) -> Tensor:
    x = x.detach().clone().requires_grad_()
    h, total = x.new_zeros(w_hh.shape[0]), 0.0
    for t in range(x.shape[0]):
        h = torch.tanh(x[t] @ w_ih + h @ w_hh)  # (H,)
        total = total + h.sum()
    (total if all_steps else h.sum()).backward()
    g = x.grad  # (T, D): row t is d loss / d x_t
    norms = (g**2).sum(norm_dim) if squared else g.norm(dim=norm_dim)
    return norms.flip(0) if flip and norm_dim == -1 else norms


def _grad_reference(x: Tensor, w_ih: Tensor, w_hh: Tensor) -> Tensor:
    return _grads(x, w_ih, w_hh)


GRADIENT = Exercise(
    name="gradient_by_distance",
    reference=_grad_reference,
    make_cases=_grad_cases,
    mistakes=(
        Mistake("顺序反了：第 d 个元素应是距离最后一步 d 步的输入 x_{T-1-d} 的梯度（d = 0 是最后一个输入），"
                "把按位置排的结果翻转一下（flip）。",
                lambda x, wi, wh: _grads(x, wi, wh, flip=False)),
        Mistake("损失只取最后一步：loss = h_T.sum()。你把每一步的隐状态都加进了损失，近处的梯度就混进来了。",
                lambda x, wi, wh: _grads(x, wi, wh, all_steps=True)),
        Mistake("要的是梯度的 L2 范数（.norm()），你返回的是平方和。",
                lambda x, wi, wh: _grads(x, wi, wh, squared=True)),
        Mistake("范数的维度不对：对每个时刻 t，在特征维（最后一维）上求范数，得到长度为 T 的向量。",
                lambda x, wi, wh: _grads(x, wi, wh, norm_dim=0)),
    ),
)
check_gradient_by_distance = GRADIENT.check

EXERCISES = (RNN_LOOP, LSTM_STEP, GRADIENT)
