"""Byte-level BPE: the textbook case, round trips of any text, rare characters cost more, save/load, speed,
deterministic tie-breaking, and special tokens."""
from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_course.data import load_corpus, load_poems
from transformer_course.tokenizer import BPETokenizer, most_frequent_pair

EOT = "<|endoftext|>"
PIECES = ["<|", "|>", "endoftext", EOT]  # the special token and parts of it


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


def test_ties_go_to_the_smallest_pair():
    assert most_frequent_pair({(9, 9): 3, (5, 1): 4, (3, 9): 4, (3, 4): 4}) == (3, 4)
    # " ab cd": four pairs, each once. Smallest first: " a" (32, 97), then " c" (32, 99), then ...
    expected = {(32, 97): 256, (32, 99): 257, (256, 98): 258, (257, 100): 259}
    for text in (" ab cd", " cd ab"):  # the same chunks met in the other order
        tok = BPETokenizer()
        tok.train(text, vocab_size=260)
        assert tok.merges == expected, text


def test_merges_depend_on_the_chunks_not_on_their_order():
    lines = [line for poem in load_poems()[:120] for line in poem.lines]
    shuffled = random.Random(0).sample(lines, len(lines))  # every line ends in "\n": same chunk multiset
    a, b = BPETokenizer(), BPETokenizer()
    a.train("\n".join(lines) + "\n", vocab_size=400)
    b.train("\n".join(shuffled) + "\n", vocab_size=400)
    assert len(a.merges) == 144 and a.merges == b.merges


def poem_corpus() -> str:
    return EOT.join(f"《{p.title}》\n{p.author}\n{p.text}\n" for p in load_poems())


@pytest.fixture(scope="module")
def poem_tokenizer() -> BPETokenizer:
    tok = BPETokenizer(special_tokens=(EOT,))
    tok.train(poem_corpus(), vocab_size=512)
    return tok


def test_special_tokens_come_after_the_merges_and_count_in_the_vocabulary(poem_tokenizer):
    tok = poem_tokenizer
    assert tok.vocab_size == 512 and len(tok.merges) == 511 - 256 + 1 - 1
    assert tok.special_tokens == {EOT: 511} and tok.decode([511]) == EOT
    assert max(tok.merges.values()) == 510


def test_training_never_merges_across_a_special_token(poem_tokenizer):
    # As plain text, "<|endoftext|>《" (the next title) holds the punctuation chunk "|>《": a merge learns
    # ">《", part special token, part poem. The test can fail: without the special token, it does.
    plain = BPETokenizer()
    plain.train(poem_corpus(), vocab_size=512)
    assert ">《".encode() in [plain.vocab[i] for i in plain.merges.values()]
    tok = poem_tokenizer
    assert not any(set(tok.vocab[i]) & set(EOT.encode()) for i in tok.merges.values())  # poems hold no ASCII


def test_poem_corpus_round_trips_with_special_tokens(poem_tokenizer):
    tok, text = poem_tokenizer, poem_corpus()
    ids = tok.encode(text, allowed_special="all")
    assert tok.decode(ids) == text and ids.count(tok.special_tokens[EOT]) == len(load_poems()) - 1
    # between special tokens, each poem is encoded exactly as on its own
    per_poem = [tok.encode(piece) for piece in text.split(EOT)]
    assert ids == [i for k, piece in enumerate(per_poem) for i in ([511] if k else []) + piece]
    assert tok.encode(text, allowed_special={EOT}) == ids


def test_special_tokens_come_only_from_allowed_special(poem_tokenizer):
    tok = poem_tokenizer
    text = f"床前明月光{EOT}疑是地上霜"
    plain = tok.encode(text)  # default: the special token's text is ordinary text
    assert 511 not in plain and tok.decode(plain) == text
    assert tok.encode(text, allowed_special=set()) == plain
    assert tok.encode(text, allowed_special="all") == tok.encode("床前明月光") + [511] + tok.encode("疑是地上霜")
    expected = r"allowed_special must be 'all' or a set of \['<\|endoftext\|>'\], got "
    for bad in ("none", {"<|pad|>"}, 3):
        with pytest.raises(ValueError, match=expected):
            tok.encode(text, allowed_special=bad)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",))) | st.sampled_from(PIECES)))
def test_any_text_with_special_tokens_round_trips(poem_tokenizer, parts):
    text = "".join(parts)
    for allowed in (frozenset(), "all"):
        ids = poem_tokenizer.encode(text, allowed_special=allowed)
        assert poem_tokenizer.decode(ids) == text
        assert ids.count(511) == (text.count(EOT) if allowed == "all" else 0)


def test_save_and_load_keep_special_tokens_and_read_version_1(poem_tokenizer, tmp_path):
    path = tmp_path / "bpe.txt"
    poem_tokenizer.save(path)
    assert path.read_text(encoding="utf-8").startswith('bpe v2\n1\n"<|endoftext|>"\n')
    loaded = BPETokenizer.load(path)
    assert loaded.special_tokens == poem_tokenizer.special_tokens and loaded.vocab == poem_tokenizer.vocab
    text = f"《静夜思》\n李白\n床前明月光，疑是地上霜。{EOT}"
    assert loaded.encode(text, allowed_special="all") == poem_tokenizer.encode(text, allowed_special="all")
    (tmp_path / "v1.txt").write_text("bpe v1\n97 97\n256 98\n", encoding="utf-8")
    old = BPETokenizer.load(tmp_path / "v1.txt")
    assert old.special_tokens == {} and old.vocab_size == 258 and old.encode("aab") == [257]
