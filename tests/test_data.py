"""Synthetic tasks mean what they say and are seeded; the shipped corpus is what the generator makes."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from transformer_course.data import (
    IGNORE_INDEX,
    SEP,
    associative_recall_task,
    copy_task,
    load_corpus,
    lm_batch,
    long_range_task,
    reverse_task,
)

ROOT = Path(__file__).resolve().parents[1]
N, L, V = 6, 5, 13


@pytest.mark.parametrize("task, answer", [(copy_task, lambda x: x), (reverse_task, lambda x: x.flip(1))])
def test_copy_and_reverse_score_only_the_answer(task, answer):
    inputs, targets = task(N, L, V, generator=0)
    assert inputs.shape == targets.shape == (N, 2 * L) and inputs.dtype == torch.long
    prompt = inputs[:, :L]
    assert ((prompt >= 1) & (prompt < V)).all() and (inputs[:, L] == SEP).all()
    assert (targets[:, :L] == IGNORE_INDEX).all()
    assert torch.equal(targets[:, L:], answer(prompt))
    assert torch.equal(inputs[:, L + 1 :], targets[:, L:-1])  # teacher forcing: inputs are targets shifted


def test_associative_recall_asks_for_the_value_of_the_last_key():
    inputs, targets = associative_recall_task(N, 4, V, generator=torch.Generator().manual_seed(3))
    assert inputs.shape == targets.shape == (N, 9)
    keys, values, query = inputs[:, 0:8:2], inputs[:, 1:8:2], inputs[:, 8]
    assert all(len(set(row.tolist())) == 4 for row in keys)  # distinct keys
    expected = values[keys == query[:, None]]  # exactly one match per row
    assert torch.equal(targets[:, -1], expected)
    assert (targets[:, :-1] == IGNORE_INDEX).all()


def test_long_range_asks_for_the_first_token_after_the_gap():
    inputs, targets = long_range_task(N, 20, V, generator=1)
    assert inputs.shape == (N, 21)
    assert torch.equal(targets[:, -1], inputs[:, 0]) and (targets[:, :-1] == IGNORE_INDEX).all()


def test_tasks_are_reproducible_from_a_seed():
    a = associative_recall_task(N, 3, V, generator=7)
    b = associative_recall_task(N, 3, V, generator=torch.Generator().manual_seed(7))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(copy_task(N, L, V, generator=1)[0], copy_task(N, L, V, generator=2)[0])


def test_lm_batch_targets_are_the_inputs_shifted_by_one():
    ids = torch.arange(100, 200)
    inputs, targets = lm_batch(ids, 4, 10, generator=0)
    assert inputs.shape == targets.shape == (4, 10)
    assert torch.equal(targets, inputs + 1)


def test_the_shipped_corpus_is_what_the_generator_makes():
    spec = importlib.util.spec_from_file_location("make_corpus", ROOT / "tools" / "make_corpus.py")
    make_corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_corpus)
    text = load_corpus()
    assert text == make_corpus.make_corpus()
    assert 100_000 <= len(text.encode("utf-8")) <= 300_000
    for phrase in ("我", "非常", "喜欢", "非常喜欢", "吃苹果", "I really like"):
        assert phrase in text
