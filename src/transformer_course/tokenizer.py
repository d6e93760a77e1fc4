"""A byte-level BPE tokenizer trained from scratch (in the style of Karpathy's minbpe).

Text is UTF-8 bytes, so the 256 byte values are the first tokens and any string can be encoded:
a rare character (a CJK character never seen in training, an emoji) just costs several byte
tokens. Training repeatedly merges the most frequent adjacent pair into a new token.

Before counting, text is split into chunks (words, numbers, punctuation runs, spaces, like GPT-2)
and merges never cross a chunk boundary. Each distinct chunk is stored once with its count, and
after a merge only the chunks that contain the merged pair are updated: training on ~100 KB takes
seconds.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from ._checks import check_int

# GPT-2's split pattern, written for Python's re: [^\W\d_] is a letter (Chinese characters included),
# and (?:[^\s\w]|_) is anything that is neither a letter, a digit nor a space (punctuation, emoji).
SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""


Pair = tuple[int, int]  # two adjacent token ids


def get_stats(ids: list[int], counts: dict[Pair, int] | None = None, weight: int = 1) -> dict[Pair, int]:
    """Add ``weight`` to the count of every adjacent pair of ``ids``.

    Example:
        >>> get_stats([1, 2, 3, 1, 2])
        {(1, 2): 2, (2, 3): 1, (3, 1): 1}
    """
    counts = {} if counts is None else counts
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def merge(ids: list[int], pair: Pair, new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids`` by ``new_id`` (left to right).

    Example:
        >>> merge([1, 2, 3, 1, 2], (1, 2), 4)
        [4, 3, 4]
    """
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _byte_vocab() -> dict[int, bytes]:
    """The 256 single-byte tokens every byte-level tokenizer starts from."""
    return {i: bytes([i]) for i in range(256)}


class BPETokenizer:
    """Byte-level BPE: ``train(text, vocab_size)``, ``encode(text) -> list[int]``, ``decode(ids) -> str``.

    Example (the textbook case: ``aa`` -> Z, ``ab`` -> Y, ``ZY`` -> X, so ``aaabdaaabac`` -> ``XdXac``):
        >>> tok = BPETokenizer()
        >>> tok.train("aaabdaaabac", vocab_size=256 + 3)
        >>> tok.encode("aaabdaaabac")
        [258, 100, 258, 97, 99]
        >>> tok.vocab[258], tok.decode([258, 100])
        (b'aaab', 'aaabd')
    """

    def __init__(self) -> None:
        self.merges: dict[Pair, int] = {}  # (a, b) -> new token id, in training order
        self.vocab: dict[int, bytes] = _byte_vocab()  # token id -> its bytes

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def train(self, text: str, vocab_size: int, *, verbose: bool = False) -> None:
        """Learn ``vocab_size - 256`` merges from ``text`` (fewer if no pair is left to merge)."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        check_int("vocab_size", vocab_size, minimum=256)
        chunks = Counter(chunk.encode("utf-8") for chunk in re.findall(SPLIT_PATTERN, text))
        words = [list(chunk) for chunk in chunks]  # each distinct chunk once, as byte ids
        weights = list(chunks.values())  # how often each chunk occurs
        stats: dict[Pair, int] = {}  # pair -> count over the whole text
        where: dict[Pair, set[int]] = defaultdict(set)  # pair -> indices of words that contain it
        for i, word in enumerate(words):
            get_stats(word, stats, weights[i])
            for pair in zip(word, word[1:]):
                where[pair].add(i)

        self.merges, self.vocab = {}, _byte_vocab()
        for new_id in range(256, vocab_size):
            if not stats:
                break
            pair = max(stats, key=stats.get)  # the most frequent pair (the first one seen on a tie)
            self.merges[pair] = new_id
            self.vocab[new_id] = self.vocab[pair[0]] + self.vocab[pair[1]]
            if verbose:
                token = self.vocab[new_id].decode("utf-8", errors="replace")
                print(f"merge {new_id - 255}/{vocab_size - 256}: {pair} -> {new_id} {token!r}, {stats[pair]}x")
            for i in where.pop(pair):  # only the words that contain the pair change
                get_stats(words[i], stats, -weights[i])  # take out the word's old pairs ...
                words[i] = merge(words[i], pair, new_id)
                get_stats(words[i], stats, weights[i])  # ... and put in its new ones
                for p in zip(words[i], words[i][1:]):
                    where[p].add(i)
            stats = {p: n for p, n in stats.items() if n > 0}

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: each chunk's bytes, merged in the order the merges were learned."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        known: dict[str, list[int]] = {}  # each distinct chunk is encoded once
        ids: list[int] = []
        for chunk in re.findall(SPLIT_PATTERN, text):
            if chunk not in known:
                known[chunk] = self._encode_chunk(chunk.encode("utf-8"))
            ids.extend(known[chunk])
        return ids

    def _encode_chunk(self, data: bytes) -> list[int]:
        ids = list(data)
        while len(ids) >= 2:
            pair = min(get_stats(ids), key=lambda p: self.merges.get(p, float("inf")))  # the earliest merge
            if pair not in self.merges:
                break  # no learned merge applies any more
            ids = merge(ids, pair, self.merges[pair])
        return ids

    def decode(self, ids: list[int]) -> str:
        """The text of token ids ``ids`` (an invalid UTF-8 byte sequence, e.g. half a character, becomes "�")."""
        if not isinstance(ids, (list, tuple)) or not all(isinstance(i, int) and i in self.vocab for i in ids):
            raise ValueError(f"ids must be a list of int token ids in [0, {self.vocab_size}), got {ids!r:.80}")
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")

    def save(self, path: str | Path) -> None:
        """Write the merges to a text file: a header, then one ``a b`` line per merge, in order."""
        lines = ["bpe v1", *(f"{a} {b}" for a, b in self.merges)]
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> BPETokenizer:
        """Read a tokenizer written by ``save``."""
        header, *lines = Path(path).read_text(encoding="utf-8").splitlines()
        if header != "bpe v1":
            raise ValueError(f"path must be a file written by BPETokenizer.save (first line 'bpe v1'), got {header!r}")
        tok = cls()
        for new_id, line in enumerate(lines, start=256):
            a, b = map(int, line.split())
            tok.merges[(a, b)] = new_id
            tok.vocab[new_id] = tok.vocab[a] + tok.vocab[b]
        return tok
