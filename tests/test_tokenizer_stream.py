"""Streaming tokenization: ``encode_iterable(pieces)`` gives ``encode("".join(pieces))``, wherever the pieces
are cut (inside a word, a run of spaces, a contraction, a special token), and it encodes while it reads."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from transformer_course.data import load_corpus, load_poems
from transformer_course.tokenizer import BPETokenizer

# "<|end" is a prefix of the other two and "<|end|>" shares "<|end" with "<|endoftext|>": where two could
# start at the same place the longest wins, which a stream can only know once the longer one is complete.
SPECIALS = ("<|endoftext|>", "<|end|>", "<|end")
ENGLISH = "I don't think we'll see the cat's toys. They're here, 12 of them!  Well...\n\tthe end\n"
ATOMS = [
    "the", " the", " cat", "I", "don", "'t", "'s", "'ll", "'", "l", "re", "12", "2024", " ", "  ", "   ", "\n",
    "\n\n", "\t", " \n ", "\r\n", "。", "，", "“", "床前明月光", "我", "喜欢", "!", "?!", "...", "_", "😀",
    "<", "|", ">", "<|", "|>", "end", "oftext", *SPECIALS,
]  # words, digits, spaces, Chinese, punctuation, special tokens and pieces of them
ALLOWED = st.just("all") | st.sets(st.sampled_from(SPECIALS))


@pytest.fixture(scope="module")
def tok() -> BPETokenizer:
    tok = BPETokenizer(special_tokens=SPECIALS)
    tok.train(load_corpus()[:6000] + SPECIALS[0] + ENGLISH * 20, vocab_size=256 + 300 + len(SPECIALS))
    assert len(tok.merges) == 300
    return tok


@st.composite
def split_texts(draw: st.DrawFn) -> list[str]:
    """A text of atoms and random characters, cut at random places (two cuts at one place: an empty piece)."""
    atoms = st.sampled_from(ATOMS) | st.text(st.characters(blacklist_categories=("Cs",)), max_size=3)
    text = "".join(draw(st.lists(atoms, max_size=40)))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=len(text) + 2)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def per_piece(tok: BPETokenizer, pieces: list[str], allowed) -> list[int]:
    """The wrong way to stream: each piece on its own."""
    return [i for piece in pieces for i in tok.encode(piece, allowed_special=allowed)]


@settings(max_examples=500, deadline=None)
@given(split_texts(), ALLOWED)
def test_streaming_gives_the_ids_of_the_whole_text(tok, pieces, allowed):
    expected = tok.encode("".join(pieces), allowed_special=allowed)
    assert list(tok.encode_iterable(pieces, allowed_special=allowed)) == expected
    assert list(tok.encode_iterable(iter(pieces), allowed_special=allowed)) == expected  # a one-pass iterator


@pytest.mark.parametrize("pieces", [
    ["x <|endo", "ftext|> y"],  # a special token across two pieces
    ["<|end", "|>"],  # "<|end" alone is a special token too, but "<|end|>" is longer
    ["the  ", "cat"],  # "the", " ", " cat": the lookahead \s+(?!\S) leaves the last space to the word
    ["I don'", "t"],  # the contraction "'t"
    ["we'l", "l"],  # "'l" is "'", "l" until the next "l" makes it "'ll": a chunk before the last may change
    ["the ca", "t"],  # a word cut in two
])
def test_encoding_each_piece_on_its_own_would_fail(tok, pieces):
    expected = tok.encode("".join(pieces), allowed_special="all")
    assert per_piece(tok, pieces, "all") != expected  # the mutant the property test must catch ...
    assert list(tok.encode_iterable(pieces, allowed_special="all")) == expected  # ... and what it gets instead


def test_the_property_test_finds_the_per_piece_mutant(tok):
    pieces, allowed = find(
        st.tuples(split_texts(), ALLOWED),
        lambda case: per_piece(tok, *case) != tok.encode("".join(case[0]), allowed_special=case[1]),
        settings=settings(max_examples=200, database=None),
    )
    assert len(pieces) >= 2


def test_it_encodes_while_reading(tok):
    lines = [f"line {i}: the cat's 床前明月光<|endoftext|>\n" for i in range(50)]

    def read() -> Iterator[str]:  # a file that fails after 50 lines: the ids so far must already be out
        yield from lines
        raise OSError("disk error")

    ids: list[int] = []
    with pytest.raises(OSError, match="disk error"):
        for i in tok.encode_iterable(read(), allowed_special="all"):
            ids.append(i)
    assert ids == tok.encode("".join(lines), allowed_special="all")[: len(ids)]
    assert len(ids) >= len(tok.encode("".join(lines[:49]), allowed_special="all"))  # only a short tail held back


def test_a_file_read_line_by_line(tok, tmp_path):
    path = tmp_path / "poems.txt"
    poems = SPECIALS[0].join(f"《{p.title}》\n{p.author}\n{p.text}\n" for p in load_poems()[:100])
    path.write_text(poems + "\n\n  " + ENGLISH * 3 + "  \n", encoding="utf-8")
    for allowed in ("all", frozenset()):
        with open(path, encoding="utf-8") as f:
            ids = list(tok.encode_iterable(f, allowed_special=allowed))
        assert ids == tok.encode(path.read_text(encoding="utf-8"), allowed_special=allowed)
    assert ids.count(tok.special_tokens[SPECIALS[0]]) == 0 and tok.decode(ids) == path.read_text(encoding="utf-8")


def test_errors(tok):
    with pytest.raises(ValueError, match="texts must hold str, got bytes"):
        list(tok.encode_iterable(["ok", b"bytes"]))
    with pytest.raises(ValueError, match="allowed_special must be 'all' or a set of"):
        list(tok.encode_iterable(["ok"], allowed_special="none"))
