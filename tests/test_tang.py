"""The 全唐诗 corpus (``load_tang``, ``sounds``) and the shipped poet's plumbing (``poet_full``): the corpus is
what tools/make_tang.py describes (counts, forms, a decontaminated validation split); rows of one form need
no padding; batches come from the generator alone; the int8 export loads back within its rounding and is
refused when its vocabulary or hash is wrong."""
from __future__ import annotations

import hashlib
import io
import lzma
import os
import re
import subprocess
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
import torch

from transformer_course import poet_full
from transformer_course.poems import _HAN, load_poems, load_tang, sounds

TEXT_SHA256 = "f6785f10e8d85857"  # of the decompressed tang.tsv, as tools/make_tang.py printed it


def _clauses(text: str) -> list[str]:
    return re.findall(f"[{_HAN}]+", text)


def test_the_corpus_is_the_one_the_tool_describes():
    raw = lzma.decompress((resources.files("transformer_course") / "data" / "tang.tsv.xz").read_bytes())
    assert hashlib.sha256(raw).hexdigest().startswith(TEXT_SHA256)
    poems, val = load_tang(), load_tang("val")
    assert (len(poems), len(val), len(load_tang("train"))) == (36198, 1980, 34218)
    assert Counter(p.form for p in poems) == {"五绝": 3733, "七绝": 10286, "五律": 14284, "七律": 7895}
    assert len({p.text for p in poems}) == len(poems)  # no duplicates
    for p in poems:
        n_clauses, n_chars = {"五绝": (4, 5), "七绝": (4, 7), "五律": (8, 5), "七律": (8, 7)}[p.form]
        clauses = _clauses(p.text)
        assert len(clauses) == n_clauses and {len(c) for c in clauses} == {n_chars}, p
        assert all(len(_clauses(line)) == 2 for line in p.lines)
    assert [p.form for p in load_tang(form="五绝")] == ["五绝"] * 3733
    with pytest.raises(ValueError, match="form"):
        load_tang(form="五言")


def test_no_training_poem_is_a_variant_of_a_validation_poem():
    """Variants share clauses: no training poem shares two clauses with a validation poem of 全唐诗 or of
    唐诗三百首 (chapter 14 quotes 静夜思 and 登鹳雀楼 as never seen; 全唐诗 has them as variants)."""
    train_clauses = Counter()
    for p in load_tang("train"):
        for c in set(_clauses(p.text)):
            train_clauses[c] += 1
    by_clause: dict[str, set[int]] = {}
    for i, p in enumerate(load_tang("train")):
        for c in _clauses(p.text):
            by_clause.setdefault(c, set()).add(i)
    for q in [p.text for p in load_tang("val")] + [p.text for p in load_poems("val")]:
        hits = Counter(i for c in set(_clauses(q)) for i in by_clause.get(c, ()))
        assert not hits or max(hits.values()) < 2, q
    val_texts = "\n".join(p.text for p in load_tang("val"))
    assert "床前看月光" in val_texts and "白日依山尽" in val_texts


def test_sounds_give_tones_and_rhyme_classes():
    s = sounds()
    assert {s.rhyme[c] for c in "光霜乡"} == {"唐"} and s.rhyme["流"] == s.rhyme["楼"] == "尤"
    assert s.tone["光"] == s.tone["流"] == "平" and s.tone["月"] == s.tone["国"] == "仄" and s.tone["看"] == "两"
    assert set(s.tone.values()) == {"平", "仄", "两"} and len(set(s.rhyme.values())) == 14


@pytest.mark.skipif(not os.environ.get("TC_CHINESE_POETRY"), reason="set TC_CHINESE_POETRY=chinese-poetry-2.0.1.tgz")
def test_the_tool_rebuilds_the_shipped_files_byte_for_byte(tmp_path):
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, str(root / "tools" / "make_tang.py"), os.environ["TC_CHINESE_POETRY"],
                    "--out", str(tmp_path)], check=True, capture_output=True)
    for name in ("tang.tsv.xz", "tang_sounds.tsv"):
        assert (tmp_path / name).read_bytes() == (resources.files("transformer_course") / "data" / name).read_bytes()


def test_rows_of_one_form_have_one_length_and_batches_come_from_the_generator():
    vocab = poet_full.poet_vocab()
    rows = poet_full.form_rows(load_tang("val"), vocab)
    lengths = {form: r.shape[1] for form, r in rows.items()}
    assert lengths == {"五绝": 27, "七绝": 35, "五律": 53, "七律": 69}  # form token + text + <|endoftext|>
    assert max(lengths.values()) - 1 == poet_full.MAX_LEN
    assert (rows["七律"][:, 0] == vocab.stoi["<|七律|>"]).all() and (rows["七律"][:, -1] == vocab.eot).all()
    assert vocab.decode(rows["五绝"][0, 1:-1].tolist()) == load_tang("val", form="五绝")[0].text

    def draws(seed, n=400):
        get_batch = poet_full.form_batches(rows, 1024, generator=torch.Generator().manual_seed(seed))
        return [get_batch() for _ in range(n)]

    a, b = draws(3), draws(3)
    assert all(torch.equal(x1, x2) and torch.equal(y1, y2) for (x1, y1), (x2, y2) in zip(a, b))
    assert any(not torch.equal(x1, x2) for (x1, _), (x2, _) in zip(a, draws(4)))
    starts = torch.cat([x[:, 0] for x, _ in a])
    plain = (starts == vocab.eot).float().mean().item()
    assert 0.07 < plain < 0.13  # one row in ten starts without its form
    for x, y in a:
        assert x.shape[0] * x.shape[1] <= 1024 and torch.equal(x[:, 1:], y[:, :-1])
        assert (y != -100).all()  # nothing to pad, nothing unscored
    shares = Counter(x.shape[1] for x, _ in a)
    assert shares[52] > shares[26]  # forms drawn by tokens: many 五律, few 五绝


def test_the_int8_export_loads_back_within_its_rounding(tmp_path):
    vocab = poet_full.poet_vocab()
    torch.manual_seed(0)
    model = poet_full.DecoderOnly(poet_full.TransformerConfig(vocab_size=len(vocab), d_model=24, n_heads=3,
                                                              n_layers=1, d_ff=40, max_len=poet_full.MAX_LEN))
    path = tmp_path / "p.pt"
    digest = poet_full.export(model, vocab, path)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded, loaded_vocab = poet_full.load_shipped(path)
    assert loaded_vocab.itos == vocab.itos and not loaded.training
    for (name, w), w2 in zip(model.state_dict().items(), loaded.state_dict().values()):
        bound = w.abs().amax(dim=-1, keepdim=True) / 127 / 2 + 1e-7 if w.dim() == 2 else 0
        assert ((w - w2).abs() <= bound).all(), name
    saved = torch.load(path, weights_only=True)
    saved["vocab"] = saved["vocab"][:-1] + ["龘"]
    torch.save(saved, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="vocabulary"):
        poet_full.load_shipped(tmp_path / "bad.pt")


@pytest.fixture(scope="module")
def tiny_poet(tmp_path_factory):
    """A tiny random poet with the shipped poet's vocabulary, exported like the shipped one."""
    vocab = poet_full.poet_vocab()
    torch.manual_seed(3)
    model = poet_full.DecoderOnly(poet_full.TransformerConfig(vocab_size=len(vocab), d_model=16, n_heads=2,
                                                              n_layers=1, d_ff=24, max_len=poet_full.MAX_LEN))
    path = tmp_path_factory.mktemp("poet") / "tiny.pt"
    poet_full.export(model.eval(), vocab, path, {"recipe": "test"})
    return path


def test_write_keeps_forms_acrostics_and_rhymes_with_and_without_the_cache(tiny_poet):
    from transformer_course.poetics import clauses, regular_form, rhymes

    model, vocab = poet_full.load_shipped(tiny_poet)
    assert poet_full.shipped_run(tiny_poet) == {"recipe": "test"}
    for form, head in (("五绝", "春夏秋冬"), ("七律", "山水")):
        poems = [poet_full.write(model, vocab, form, n=6, acrostic=head, rules=True, use_cache=c,
                                 generator=torch.Generator().manual_seed(5)) for c in (True, False)]
        assert poems[0] == poems[1]
        for p in poems[0]:
            assert regular_form(p) == form and rhymes(p) is True
            assert "".join(c[0] for c in clauses(p)).startswith(head)
    loose = poet_full.write(model, vocab, "五绝", n=6, generator=torch.Generator().manual_seed(5))
    assert not all(regular_form(p) == "五绝" for p in loose)  # a random model does not keep the form alone
    with pytest.raises(ValueError, match="form"):
        poet_full.write(model, vocab, None, acrostic="春")


def test_the_command_line_writes_acrostics_and_evaluates(tiny_poet, capsys):
    from transformer_course import poet
    from transformer_course.poetics import clauses, regular_form

    assert poet.main(["--checkpoint", str(tiny_poet), "--acrostic", "春夏秋冬", "--form", "五绝", "--rules",
                      "-n", "2", "--seed", "1"]) == 0
    poems = capsys.readouterr().out.strip().split("\n\n")
    assert len(poems) == 2 and all(regular_form(p) == "五绝" for p in poems)
    assert all([c[0] for c in clauses(p)] == list("春夏秋冬") for p in poems)
    assert poet.main(["--checkpoint", str(tiny_poet), "--evaluate"]) == 0
    out = capsys.readouterr().out
    for row in ("real (held out)", "poet + rules", "content loss"):
        assert row in out
    with pytest.raises(SystemExit):
        poet.main(["--checkpoint", str(tiny_poet), "--acrostic", "春夏秋冬春夏秋冬春", "--form", "五绝"])
    assert "at most 4" in capsys.readouterr().err


def test_the_shipped_poet_is_the_recorded_file():
    data = (resources.files("transformer_course") / "data" / "poet.pt").read_bytes()
    assert hashlib.sha256(data).hexdigest() == poet_full.SHIPPED_SHA256
    assert len(data) < 5 * 2**20  # the tied output layer is stored once, as the embedding
    assert "lm_head.weight" not in torch.load(io.BytesIO(data), weights_only=True)["state"]
    model, vocab = poet_full.load_shipped()
    assert vocab.itos == poet_full.poet_vocab().itos and not model.training
    run = poet_full.shipped_run()
    assert run["recipe"] == "full" and run["steps"] == len(run["history"]["loss"])
    assert run["history"]["val_step"][-1] == run["steps"]
