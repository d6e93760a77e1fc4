"""Byte-level BPE: the textbook case, round trips of any text, rare characters cost more, save/load, speed."""
from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_course.data import load_corpus
from transformer_course.tokenizer import BPETokenizer


@pytest.fixture(scope="module")
def corpus_tokenizer() -> BPETokenizer:
    tok = BPETokenizer()
    tok.train(load_corpus(), vocab_size=512)
    return tok


def test_textbook_example():
    tok = BPETokenizer()
    tok.train("aaabdaaabac", vocab_size=259)
    assert tok.merges == {(97, 97): 256, (97, 98): 257, (256, 257): 258}  # aa -> Z, ab -> Y, ZY -> X
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]  # XdXac
    assert tok.decode([258, 100, 258, 97, 99]) == "aaabdaaabac"


def test_training_on_the_corpus_takes_seconds():
    text = load_corpus()
    assert len(text.encode("utf-8")) > 100_000
    start = time.perf_counter()
    BPETokenizer().train(text, vocab_size=400)
    assert time.perf_counter() - start < 10


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_any_text_round_trips(corpus_tokenizer, text):
    assert corpus_tokenizer.decode(corpus_tokenizer.encode(text)) == text


@pytest.mark.parametrize("text", ["我非常喜欢吃苹果。", "龘靐齉麤", "😀👩‍💻🇨🇳", "mixed 中文 and\n\t  spaces"])
def test_examples_round_trip(corpus_tokenizer, text):
    assert corpus_tokenizer.decode(corpus_tokenizer.encode(text)) == text


def test_common_phrases_become_overlapping_tokens_and_rare_characters_cost_more(corpus_tokenizer):
    tok = corpus_tokenizer
    token_of = {piece: i for i, piece in tok.vocab.items()}
    for word in ("我", "非常", "喜欢", "苹果", "吃苹果", "喜欢吃苹果"):  # nested: 苹果 ⊂ 吃苹果 ⊂ 喜欢吃苹果
        assert word.encode("utf-8") in token_of, word
    expected = [token_of[w.encode("utf-8")] for w in ("我", "非常", "喜欢吃苹果")]
    assert tok.encode("我非常喜欢吃苹果") == expected
    assert len(tok.encode("龘")) == 3 and len(tok.encode("😀")) == 4  # unseen: one token per UTF-8 byte
    assert len(tok.encode("喜欢")) < len(tok.encode("龘"))


def test_save_and_load_give_the_same_tokenizer(corpus_tokenizer, tmp_path):
    path = tmp_path / "bpe.txt"
    corpus_tokenizer.save(path)
    loaded = BPETokenizer.load(path)
    assert loaded.merges == corpus_tokenizer.merges and loaded.vocab == corpus_tokenizer.vocab
    text = "今天小明在公园跑步。I really like to read books."
    assert loaded.encode(text) == corpus_tokenizer.encode(text)
