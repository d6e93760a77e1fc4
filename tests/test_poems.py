"""The shipped poem corpus: counts, clean text, regular forms, a stable split, and the tool that makes it."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from transformer_course.data import Poem, load_poems, poem_form

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = resources.files("transformer_course") / "data" / "poems.txt"
# tang300 has 313 entries. song100 has 95 by fortune's index, but one of its separators is "%    ",
# which fortune misses: 96 entries; 5 of them hold two parts (其一, 其二) and become two poems each.
N_TANG, N_SONG = 313, 96 + 5
FORMS = {"tang": {"五言": 157, "七言": 137, None: 19}, "song": {"五言": 5, "七言": 85, None: 11}}
N_VAL = {"tang": 29, "song": 7}  # 36 of 414 poems (8.7%)


def _load_tool():
    spec = importlib.util.spec_from_file_location("make_poems", ROOT / "tools" / "make_poems.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_counts_and_clean_text():
    poems = load_poems()
    assert Counter(p.collection for p in poems) == {"tang": N_TANG, "song": N_SONG}
    raw = SHIPPED.read_text(encoding="utf-8")
    assert 100_000 <= len(raw.encode("utf-8")) <= 130_000
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", raw)  # no ESC, no control character but "\n"
    assert all(line == line.strip() and line for p in poems for line in p.lines)
    for p in poems:  # titles, authors, prefaces and texts: Chinese only
        assert not re.search(r"[A-Za-z]", "".join([p.title, p.author, *p.preface, *p.lines])), p.title
    with_preface = [p.title for p in poems if p.preface]
    assert len(with_preface) == 6 and all(title.endswith("并序") for title in with_preface)
    jingyesi = next(p for p in poems if p.title == "夜思")
    assert jingyesi.text == "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。" and jingyesi.author == "李白"


def test_poem_form_on_hand_made_poems():
    def poem(*lines: str) -> Poem:
        return Poem("题", "某", "tang", lines)

    assert poem_form(poem("床前明月光，疑是地上霜。", "举头望明月，低头思故乡。")) == "五言"
    assert poem_form(poem("朝辞白帝彩云间，千里江陵一日还。")) == "七言"
    assert poem_form(poem("床前明月光，疑是地上霜。", "朝辞白帝彩云间，千里江陵一日还。")) is None  # mixed
    assert poem_form(poem("床前明月光；疑是地上霜。")) is None  # ； is not one of ，。？！
    assert poem_form(poem("床前明月光，疑是地上霜")) is None  # the last clause has no stop
    assert poem_form(poem("长相思，在长安。")) is None and poem_form(poem()) is None


def test_regular_forms_have_the_clause_lengths_and_the_counts_found():
    for collection, expected in FORMS.items():
        poems = load_poems(collection=collection)
        assert Counter(poem_form(p) for p in poems) == expected
        for p in poems:
            n = {"五言": 5, "七言": 7}.get(poem_form(p))
            if n is not None:  # counted independently of poem_form's pattern
                for line in p.lines:
                    assert line[-1] in "，。？！" and {len(c) for c in re.split("[，。？！]", line[:-1])} == {n}


def test_split_is_a_stable_hash_of_title_and_author():
    train, val, all_ = load_poems("train"), load_poems("val"), load_poems()
    assert load_poems("val") == val and len(train) + len(val) == len(all_)
    assert sorted(train + val, key=all_.index) == all_  # disjoint and covering (titles repeat: by position)
    assert Counter(p.collection for p in val) == N_VAL and {p.collection for p in train} == {"tang", "song"}
    digest = {p: int(hashlib.sha256(f"{p.title}\n{p.author}".encode()).hexdigest(), 16) for p in all_}
    assert [p for p in all_ if digest[p] % 10 == 0] == val
    assert load_poems("val", "song") == [p for p in val if p.collection == "song"]


@pytest.mark.parametrize("kwargs", [{"split": "test"}, {"collection": "宋"}, {"split": None}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=r"(split|collection) must be one of \["):
        load_poems(**kwargs)


SAMPLE_TANG = (
    "\x1b[32m《自河南经乱,关内阻饥・其一》\x1b[m\n\x1b[33m作者：白居易\x1b[m\n"
    "时难年荒世业空，弟兄羁旅各西东。  \n%\n"
    "\x1b[32m《长安遇冯著》\x1b[m\n\x1b[33m作者：韦应物\x1b[m\n冥冥花正开、扬扬燕新乳。\n%\n"
    "\x1b[32m《燕歌行・并序》\x1b[m\n\x1b[33m作者：高适\x1b[m\n开元二十六年，客有从元戎出塞而还者。\n  \n"
    "汉家烟尘在东北，汉将辞家破残贼。\n%\n"
)
SAMPLE_SONG = (
    "\x1b[32m题目:《自责》二首\x1b[m\n\x1b[33m作者:朱淑真（《宋诗纪事》：“号幽栖居士。”）\x1b[m\n\n"
    "            其一\n\n女子弄文诚可罪，那堪咏月更吟风。\n\n\n            其二\n\n"
    "闷无消遣只看诗，不见诗中话别离。\n%    \n"
    "\x1b[32m题目:《二砺》（选一）\x1b[m\n\x1b[33m作者:郑思肖（１２４１－１３１８）\x1b[m\n"
    "愁里高歌梁公吟，犹如金玉戛商音。\n\n"
)


def test_the_tool_cleans_a_sample():
    tool = _load_tool()
    changes = Counter()
    poems = tool.clean(SAMPLE_TANG, "tang", changes) + tool.clean(SAMPLE_SONG, "song", changes)
    assert poems == [
        ("自河南经乱，关内阻饥·其一", "白居易", "tang", "时难年荒世业空，弟兄羁旅各西东。"),
        ("长安遇冯著", "韦应物", "tang", "冥冥花正开，扬扬燕新乳。"),
        ("燕歌行·并序", "高适", "tang", "序：开元二十六年，客有从元戎出塞而还者。", "汉家烟尘在东北，汉将辞家破残贼。"),
        ("自责·其一", "朱淑真", "song", "女子弄文诚可罪，那堪咏月更吟风。"),
        ("自责·其二", "朱淑真", "song", "闷无消遣只看诗，不见诗中话别离。"),
        ("二砺（选一）", "郑思肖", "song", "愁里高歌梁公吟，犹如金玉戛商音。"),
    ]
    assert changes["colour escape codes removed"] == 20
    assert changes["entries split at 其N headings (song)"] == 1
    text = tool.format_poems(poems, changes, "2.98")
    assert "\x1b" not in text and text.endswith("《二砺（选一）》\n郑思肖\nsong\n愁里高歌梁公吟，犹如金玉戛商音。\n")
    assert "#   '、' -> '，' between clauses of a verse line: 1\n" in text


def _fortunes_zh_root(tmp_path: Path) -> Path | None:
    """An extracted fortunes-zh (TC_FORTUNES_ZH: a .deb or a folder; else /tmp/fz/x), or None."""
    source = Path(os.environ.get("TC_FORTUNES_ZH", "/tmp/fz/x"))
    if source.is_dir():
        return source
    if source.suffix == ".deb" and source.is_file() and shutil.which("dpkg"):
        subprocess.run(["dpkg", "-x", str(source), str(tmp_path)], check=True)
        return tmp_path
    return None


def test_the_tool_reproduces_the_shipped_file(tmp_path):
    root = _fortunes_zh_root(tmp_path)
    if root is None:
        pytest.skip("fortunes-zh 2.98 not found: set TC_FORTUNES_ZH to its .deb (apt-get download "
                    "fortunes-zh) or to the folder dpkg -x extracted it to")
    assert _load_tool().make_poems(root) == SHIPPED.read_text(encoding="utf-8")
