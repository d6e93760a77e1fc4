"""The training loop learns: a tiny Transformer solves the copy task; the history has one loss per step;
a learning-rate schedule sets the rate of each step."""
from __future__ import annotations

import copy
import logging
import re

import pytest
import torch
from tiny import tiny_config

from transformer_course.data import copy_task
from transformer_course.models import DecoderOnly
from transformer_course.rnn import RecurrentLM
from transformer_course.train import accuracy, lm_loss, train


def test_a_tiny_decoder_learns_to_copy():
    torch.manual_seed(0)
    model = DecoderOnly(tiny_config(vocab_size=10, max_len=12, positional="rope", n_layers=1))
    g = torch.Generator().manual_seed(0)
    history = train(model, lambda: copy_task(32, 5, 10, generator=g), steps=40, lr=2e-2, progress=False)
    assert len(history["loss"]) == 40
    assert sum(history["loss"][-5:]) < 0.1 * sum(history["loss"][:5])
    assert not model.training
    inputs, targets = copy_task(200, 5, 10, generator=123)
    with torch.no_grad():
        assert accuracy(model(inputs), targets) > 0.9


def test_lr_schedule_gives_the_rate_of_each_step():
    """``lr_schedule(step)`` replaces ``lr`` step by step: the weights are exactly those of a hand-written
    AdamW loop with the same rates, a schedule of zeros leaves them as they were, a bad rate is refused."""
    rates = [0.0, 3e-2, 0.0, 1e-2, 5e-3]
    torch.manual_seed(0)
    model = DecoderOnly(tiny_config(vocab_size=10, max_len=12, n_layers=1))
    start = copy.deepcopy(model.state_dict())
    by_hand = copy.deepcopy(model)
    batches = [copy_task(4, 5, 10, generator=i) for i in range(len(rates))]
    feed = iter(batches)
    train(model, lambda: next(feed), steps=len(rates), lr=1.0, grad_clip=None, progress=False,
          lr_schedule=rates.__getitem__)
    optimizer = torch.optim.AdamW(by_hand.parameters(), lr=1.0, weight_decay=0.0)
    for rate, (inputs, targets) in zip(rates, batches):
        optimizer.param_groups[0]["lr"] = rate
        optimizer.zero_grad(set_to_none=True)
        lm_loss(by_hand(inputs), targets).backward()
        optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), by_hand.parameters()))
    assert not torch.equal(model.state_dict()["lm_head.weight"], start["lm_head.weight"])

    model.load_state_dict(start)
    train(model, lambda: batches[0], steps=3, lr=1.0, progress=False, lr_schedule=lambda step: 0.0)
    assert all(torch.equal(v, start[k]) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match=r"lr_schedule\(step\) must be a number in \[0, inf\), got -0.1"):
        train(model, lambda: batches[0], steps=2, progress=False, lr_schedule=lambda step: -0.1)


FINAL = r"train: (\d+)/\1 steps, loss=\d+\.\d{3}"  # the bar's last state: no time, no rate


def _notebook(nbformat):
    code = ("import transformer_course as tc\n"
            "from transformer_course.data import copy_task\n"
            "from transformer_course.rnn import RecurrentLM\n"
            "batches = lambda: copy_task(8, 4, 10, generator=0)\n"
            "tc.train(RecurrentLM(10, 16), batches, steps=7)\n"
            "tc.train(RecurrentLM(10, 16), batches, steps=5, progress=False)\n"
            "print('done')")
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])


def _check_bar(outputs) -> None:
    bars = [o for o in outputs if o.output_type == "display_data"]
    assert len(bars) == 1 and set(bars[0].data) == {"text/plain"}, outputs  # none for progress=False
    assert re.fullmatch(FINAL, bars[0].data["text/plain"]) and "7/7" in bars[0].data["text/plain"], bars[0].data
    assert [o.text for o in outputs if o.output_type == "stream"] == ["done\n"], outputs


def test_progress_bar_is_one_text_output_in_a_notebook_built_as_make_book_does(tmp_path):
    """Executed the way ``make book`` executes a chapter (myst-nb hands the notebook to nbclient), the bar
    is one display output updated in place: the executed notebook keeps its last state as plain text (no
    widget, which the static book could not run, and no time); a bar that is off leaves no output at all
    (an empty one is a grey box in the page and takes a figure's caption)."""
    nbformat = pytest.importorskip("nbformat")
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.execute import create_client

    nb = _notebook(nbformat)
    source = tmp_path / "x.ipynb"
    nbformat.write(nb, source)
    config = NbParserConfig(execution_mode="force", execution_timeout=120)
    with create_client(nb, str(source), config, logging.getLogger("test")) as client:
        executed = client.notebook
    _check_bar(executed.cells[0].outputs)


def test_progress_bar_in_the_tests_kernel_runner_and_in_plain_nbclient(tmp_path):
    nbformat, nbclient = pytest.importorskip("nbformat"), pytest.importorskip("nbclient")
    from conftest import run_all_repeatedly

    nb = _notebook(nbformat)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    _check_bar(nb.cells[0].outputs)
    nb = _notebook(nbformat)
    for _ in run_all_repeatedly(nb, tmp_path, runs=1):
        _check_bar(nb.cells[0].outputs)


def test_progress_bar_outside_a_notebook_goes_to_stderr(capsys):
    model = RecurrentLM(10, 16)
    train(model, lambda: copy_task(8, 4, 10, generator=0), steps=4)
    captured = capsys.readouterr()
    assert captured.out == "" and re.fullmatch(FINAL, captured.err.rstrip().split("\r")[-1]), captured.err


def test_a_loss_step_trains_exactly_as_the_batches_it_replaces():
    """``loss_step`` is the general form: drawing the same batches gives the same losses and weights."""
    def run(use_loss_step: bool) -> tuple[list[float], torch.nn.Module]:
        torch.manual_seed(0)
        model = DecoderOnly(tiny_config(vocab_size=10, max_len=12, n_layers=1))
        g = torch.Generator().manual_seed(0)
        if use_loss_step:
            def step() -> torch.Tensor:
                inputs, targets = copy_task(8, 5, 10, generator=g)
                return lm_loss(model(inputs), targets)
            history = train(model, loss_step=step, steps=6, progress=False)
        else:
            history = train(model, lambda: copy_task(8, 5, 10, generator=g), steps=6, progress=False)
        return history["loss"], model

    (losses_a, a), (losses_b, b) = run(False), run(True)
    assert losses_a == losses_b and len(losses_a) == 6
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    with pytest.raises(ValueError, match="got both"):
        train(a, lambda: copy_task(8, 5, 10, generator=0), loss_step=lambda: torch.tensor(0.0), steps=1)
    with pytest.raises(ValueError, match="got neither"):
        train(a, steps=1)


def test_warmup_cosine_follows_its_stated_convention():
    from transformer_course.train import warmup_cosine

    lr = warmup_cosine(50, 2e-3, warmup=5, final_ratio=0.1)
    assert [lr(s) for s in range(5)] == pytest.approx([4e-4, 8e-4, 1.2e-3, 1.6e-3, 2e-3])
    assert lr(5) == pytest.approx(2e-3) and lr(50) == pytest.approx(2e-4)  # peak after warm-up, floor at steps
    assert lr(27.5) == pytest.approx(1.1e-3)  # half-way through the cosine: the middle of peak and floor
    rates = [lr(s) for s in range(5, 50)]
    assert all(a > b for a, b in zip(rates, rates[1:]))  # strictly decreasing after the warm-up
    assert warmup_cosine(10, 1.0, warmup=0)(0) == 1.0
    with pytest.raises(ValueError, match="final_ratio"):
        warmup_cosine(10, 1.0, warmup=2, final_ratio=2.0)


def _resume_setup(seed: int = 0):
    """A model with dropout (so torch's global random state matters) and a batch generator."""
    torch.manual_seed(seed)
    model = DecoderOnly(tiny_config(vocab_size=11, max_len=12, n_layers=2, dropout=0.3))
    g = torch.Generator().manual_seed(seed + 1)
    return model, g, lambda: copy_task(6, 5, 11, generator=g)


def test_a_resumed_run_ends_exactly_where_an_uninterrupted_one_does(tmp_path):
    """Train 12 steps straight; train the same run with a checkpoint every 4 steps, interrupt it during
    step 10, and resume from the file in a fresh model with a fresh generator: identical weights, optimizer
    moments and history. Without the random states in the checkpoint the weights differ (mutation)."""
    from transformer_course.train import warmup_cosine

    kwargs = dict(steps=12, lr_schedule=warmup_cosine(12, 1e-2, warmup=3), progress=False, weight_decay=0.1)
    model, _, get_batch = _resume_setup()
    straight = train(model, get_batch, **kwargs)

    path = tmp_path / "run.pt"
    model_a, g_a, get_batch_a = _resume_setup()
    calls = 0

    def interrupted():
        nonlocal calls
        calls += 1
        if calls == 10:
            raise KeyboardInterrupt
        return get_batch_a()

    with pytest.raises(KeyboardInterrupt):
        train(model_a, interrupted, checkpoint=path, checkpoint_every=4, generators=[g_a], **kwargs)
    assert torch.load(path, weights_only=True)["step"] == 8
    saved = tmp_path / "step8.pt"
    saved.write_bytes(path.read_bytes())
    torch.manual_seed(123)  # the resumed process starts with other random states
    model_b, g_b, get_batch_b = _resume_setup(seed=7)
    g_b.manual_seed(99)
    resumed = train(model_b, get_batch_b, checkpoint=path, checkpoint_every=4, generators=[g_b], **kwargs)
    assert resumed == straight
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model_b.state_dict().values()))
    assert torch.load(path, weights_only=True)["step"] == 12
    assert not path.with_name("run.pt.tmp").exists()

    # mutation: the step-8 state with other random states (what a resume that forgot them would see)
    state = torch.load(saved, weights_only=True)
    state["rng"] = torch.Generator().manual_seed(5).get_state()
    state["generators"] = [torch.Generator().manual_seed(6).get_state()]
    torch.save(state, path)
    model_c, g_c, get_batch_c = _resume_setup(seed=7)
    train(model_c, get_batch_c, checkpoint=path, checkpoint_every=4, generators=[g_c], **kwargs)
    assert not all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model_c.state_dict().values()))


def test_a_checkpoint_with_other_generators_is_refused(tmp_path):
    model, g, get_batch = _resume_setup()
    path = tmp_path / "run.pt"
    train(model, get_batch, steps=2, progress=False, checkpoint=path, checkpoint_every=1, generators=[g])
    with pytest.raises(ValueError, match="generator"):
        train(model, get_batch, steps=4, progress=False, checkpoint=path, checkpoint_every=1, generators=[])
    torch.save({"format": "something else"}, path)
    with pytest.raises(ValueError, match="checkpoint must be"):
        train(model, get_batch, steps=4, progress=False, checkpoint=path, checkpoint_every=1, generators=[g])


def test_validation_every_n_steps_is_in_the_history():
    """``evaluate`` runs after steps 3, 6, 9 and after the last (10), in eval mode without gradients."""
    model, _, get_batch = _resume_setup()
    fixed = copy_task(8, 5, 11, generator=5)
    seen = []

    def evaluate():
        seen.append((model.training, torch.is_grad_enabled()))
        return lm_loss(model(fixed[0]), fixed[1]).item()

    history = train(model, get_batch, steps=10, progress=False, evaluate=evaluate, eval_every=3)
    assert history["val_step"] == [3, 6, 9, 10]
    assert seen == [(False, False)] * 4
    with torch.no_grad():
        assert history["val_loss"][-1] == lm_loss(model(fixed[0]), fixed[1]).item()
    assert history["val_loss"][-1] < history["val_loss"][0]
    with pytest.raises(ValueError, match="together"):
        train(model, get_batch, steps=2, progress=False, evaluate=evaluate)
