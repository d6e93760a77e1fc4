"""Chapter 14's plumbing (``transformer_course.poet``) and the references of its checkers: the character
vocabulary, whole-poem batches, the format score, the checkpoint and the command line; the hand-written
attention and GPT forward of ``exercises/ch14/`` against the package's modules and Hugging Face's GPT-2."""
import pytest
import torch

import transformer_course as tc
from transformer_course import poet
from transformer_course.attention import causal_mask
from transformer_course.data import IGNORE_INDEX
from transformer_course.exercises import ch14
from transformer_course.poems import load_poems, poem_form


def test_every_poem_round_trips_through_the_vocabulary_and_specials_never_come_from_text():
    texts = [p.text for p in load_poems()]
    vocab = poet.CharVocab("".join(texts))
    assert all(vocab.decode(vocab.encode(t)) == t for t in texts)
    assert vocab.itos[:2] == [poet.EOT, poet.UNK] and len(set(vocab.itos)) == len(vocab)
    ids = vocab.encode("<|endoftext|>")
    assert len(ids) == len("<|endoftext|>") and vocab.eot not in ids  # the text is not the token
    assert vocab.encode("𠀀") == [vocab.unk]  # a character outside the vocabulary


def test_poem_rows_are_next_token_pairs_with_the_padding_unscored():
    vocab = poet.CharVocab("床前明月光，疑是地上霜。")
    inputs, targets = poet.poem_rows(["床前明月光，", "疑是地上霜。\n床前"], vocab, max_len=8)
    assert inputs.shape == targets.shape == (2, 8)
    row = [vocab.eot, *vocab.encode("床前明月光，"), vocab.eot]  # 8 tokens: 7 pairs, 1 padding
    assert inputs[0, :7].tolist() == row[:-1] and targets[0, :7].tolist() == row[1:]
    assert targets[0, 7] == IGNORE_INDEX
    assert inputs[1, 0] == vocab.eot and (targets[1] != IGNORE_INDEX).all()  # cut at max_len + 1 tokens


@pytest.mark.parametrize("line, ok", [("床前明月光，疑是地上霜。", True), ("少小离家老大回，乡音无改鬓毛衰。", True),
                                      ("床前明月光，疑是地上霜", False), ("床前明月，疑是地上霜。", False),
                                      ("床前明月光，少小离家老大回。", False), ("", False), ("，。", False)])
def test_a_regular_line_has_clauses_of_five_or_seven_characters(line, ok):
    assert poet.line_ok(line) is ok


def test_format_score_is_the_share_of_regular_lines():
    assert poet.format_score(["床前明月光，疑是地上霜。\n举头望明月，低头思故乡",
                              "白日依山尽。"]) == pytest.approx(2 / 3)
    assert poet.format_score([]) == 0.0
    regular = [p for p in load_poems("train") if poem_form(p) is not None]
    assert poet.format_score(p.text for p in regular) == 1.0  # the corpus's 五言/七言 poems


def test_checkpoint_round_trip_and_the_command_line(tmp_path, capsys):
    path = tmp_path / "poet.pt"
    assert poet.main(["--checkpoint", str(path)]) == 2  # no checkpoint yet: says how to get one
    assert "--train" in capsys.readouterr().out
    assert poet.main(["--train", "--steps", "2", "--checkpoint", str(path), "-n", "1"]) == 0
    model, vocab = poet.load_checkpoint(path)
    again, _ = poet.load_checkpoint(path)
    idx = torch.tensor([[vocab.eot, *vocab.encode("床前明月光")]])
    assert torch.equal(model(idx), again(idx))
    capsys.readouterr()
    assert poet.main(["床前明月光", "--checkpoint", str(path), "-n", "2", "--seed", "3"]) == 0
    poems = [p for p in capsys.readouterr().out.split("\n\n") if p.strip()]
    assert len(poems) == 2 and all(p.startswith("床前明月光") for p in poems)
    torch.save({"something": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="checkpoint written by save_checkpoint"):
        poet.load_checkpoint(tmp_path / "other.pt")


def test_write_poem_gives_the_same_poem_with_and_without_the_cache():
    vocab = poet.CharVocab("".join(p.text for p in load_poems("train")[:30]))
    tc.set_seed(1)
    model = tc.DecoderOnly(tc.TransformerConfig(vocab_size=len(vocab), d_model=24, n_heads=3, n_layers=2,
                                                d_ff=40, max_len=40)).eval()
    texts = [poet.write_poem(model, vocab, "春眠", generator=torch.Generator().manual_seed(7), use_cache=c)
             for c in (True, False)]
    assert texts[0] == texts[1] and texts[0].startswith("春眠") and len(texts[0]) > 2


def test_the_checkers_references_are_the_packages_attention_and_gpt():
    for case in ch14.CAUSAL_SELF_ATTENTION.cases():  # the large case too (scores in the thousands)
        x, attn = case.args
        expected = attn(x, mask=causal_mask(x.shape[1]))[0]
        torch.testing.assert_close(ch14._attention_reference(x, attn), expected, atol=1e-5, rtol=0)
    for model, idx in ch14._gpt_cases():
        with torch.no_grad():
            torch.testing.assert_close(ch14._gpt_reference(model, idx), model(idx), atol=1e-5, rtol=0)


def test_the_hand_written_gpt_matches_hugging_face_gpt2():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=37, n_embd=20, n_head=4, n_layer=3, n_inner=44, n_positions=11,
                                     activation_function="gelu", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    hf = transformers.GPT2LMHeadModel(config).eval()
    ours = tc.from_hf_gpt2(hf).eval()
    idx = torch.randint(37, (3, 11))
    with torch.no_grad():
        torch.testing.assert_close(ch14._gpt_reference(ours, idx), hf(idx).logits, atol=1e-5, rtol=0)
