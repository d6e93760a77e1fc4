"""Claims that hold on any machine: ``tc.claim`` and the seed shift behind the margin study, and the
study itself (``docs/margins.json``) current for every chapter that asserts a training outcome."""
import json

import pytest
import torch

import margins
import transformer_course as tc
from conftest import ROOT

STUDY = ROOT / "docs" / "margins.json"


def test_claim_returns_the_comparison_and_logs_the_value(tmp_path, monkeypatch):
    log = tmp_path / "claims.jsonl"
    monkeypatch.setenv("TC_CLAIMS_LOG", str(log))
    assert tc.claim("accuracy", torch.tensor(0.97), ">", 0.95) is True
    assert tc.claim("loss ratio", 0.6, "<", 0.5) is False
    assert tc.claim("edge", 3, ">=", 3) and not tc.claim("edge", 3, "<", 3)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["name"] for r in lines] == ["accuracy", "loss ratio", "edge", "edge"]
    assert lines[0] == {"name": "accuracy", "value": pytest.approx(0.97), "op": ">", "bound": 0.95}
    with pytest.raises(ValueError, match="op must be one of"):
        tc.claim("x", 1.0, "==", 1.0)


def test_claim_writes_nothing_without_the_log(tmp_path, monkeypatch):
    monkeypatch.delenv("TC_CLAIMS_LOG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert tc.claim("x", 1.0, "<", 2.0) and not any(tmp_path.iterdir())


def test_seed_shift_moves_every_seed(monkeypatch):
    monkeypatch.delenv("TC_SEED_SHIFT", raising=False)
    tc.set_seed(3)
    plain = torch.rand(4)
    monkeypatch.setenv("TC_SEED_SHIFT", "0")
    tc.set_seed(3)
    assert torch.equal(torch.rand(4), plain)  # shift 0 is the chapter as written
    monkeypatch.setenv("TC_SEED_SHIFT", "2")
    tc.set_seed(3)
    shifted = torch.rand(4)
    tc.set_seed(3)
    assert not torch.equal(shifted, plain) and torch.equal(torch.rand(4), shifted)


def test_perturbation_study_is_current_and_every_claim_held_in_every_run():
    """Rerun ``python tools/margins.py book/NN_x.ipynb`` after editing a chapter's code (prints and comments
    aside): every chapter that makes a claim has at least ``MIN_RUNS`` runs over seeds and variants of the
    arithmetic, every run recorded every claim, and no claim failed in any run."""
    study = json.loads(STUDY.read_text(encoding="utf-8"))
    chapters = margins.chapters_with_claims()
    assert chapters, "no chapter uses tc.claim"
    rows = margins.summarise(study["runs"])
    for path in chapters:
        runs = [r for r in study["runs"] if r["chapter"] == path.stem]
        assert len(runs) >= margins.MIN_RUNS, f"{path.name}: {len(runs)} runs"
        kernels = {r["kernel"] for r in runs}
        assert set(margins.REQUIRED_KERNELS) <= kernels, f"{path.name}: kernel paths {sorted(kernels)}"
        assert len({r["seed"] for r in runs}) >= 5, f"{path.name}: too few seeds"
        assert all(r["code"] == margins.code_fingerprint(path) for r in runs), \
            f"{path.name} changed since its study: python tools/margins.py book/{path.name}"
        assert all(r["claims"] for r in runs), f"{path.name}: a run recorded no claim"
        claims = [r for r in rows if r["chapter"] == path.stem]
        short = [(r["claim"], r["n"]) for r in claims if r["n"] != len(runs)]
        assert not short, f"{path.name}: claims not made in every run: {short}"
    failed = [f"{r['chapter']}: {r['claim']}" for r in rows if r["failed"]]
    assert not failed
    assert (ROOT / "docs" / "margins.md").read_text(encoding="utf-8") == margins.markdown(study)


def test_study_fingerprint_ignores_prints_and_comments_only():
    base = "x = f(1)\nfor i in range(3):\n    y = g(i)\n"
    assert margins._without_prints(base) == margins._without_prints(
        "x = f(1)  # note\nprint('x', x)\nfor i in range(3):\n    y = g(i)\n    print(f'{y:.2f} s')\n")
    assert margins._without_prints(base) != margins._without_prints(base.replace("g(i)", "g(i + 1)"))
    assert margins._without_prints(base) != margins._without_prints(base + "log(y)\n")


def test_summary_states_the_worst_run_and_its_margin():
    runs = [{"chapter": "07_x", "claims": [{"name": "acc", "value": v, "op": ">", "bound": 0.9},
                                           {"name": "loss", "value": 1 - v, "op": "<", "bound": 0.5}]}
            for v in (0.97, 0.95, 0.99)]
    acc, loss = sorted(margins.summarise(runs), key=lambda r: r["claim"])
    assert (acc["n"], acc["worst"], acc["failed"]) == (3, 0.95, 0)
    assert acc["margin"] == pytest.approx(0.05) and acc["relative"] == pytest.approx(0.05 / 0.9)
    assert loss["worst"] == pytest.approx(0.05) and loss["margin"] == pytest.approx(0.45)
    assert margins.tightest([acc, loss], 1) == [acc]


def test_portability_document_keeps_other_machines_and_replaces_its_own(tmp_path, monkeypatch):
    import portability

    out = tmp_path / "portability.md"
    monkeypatch.setattr(portability, "cpu_name", lambda: "Machine A")
    first = {"native:1": (0, 10.0, {"01_x": (4.0, 0)})}
    out.write_text(portability.document(out, first), encoding="utf-8")
    monkeypatch.setattr(portability, "cpu_name", lambda: "Machine B")
    out.write_text(portability.document(out, {"default:1": (1, 20.0, {"01_x": (5.0, 2)})}), encoding="utf-8")
    monkeypatch.setattr(portability, "cpu_name", lambda: "Machine A")
    text = portability.document(out, {"avx2:1": (0, 30.0, {"01_x": (6.0, 0)})})
    assert text.count("## Machine A,") == 1 and text.count("## Machine B,") == 1
    assert "`avx2:1`" in text and "`native:1`" not in text  # A's section replaced
    assert "5.0 s ✗ 2" in text and "**FAIL** 20 s" in text  # B's kept as it was
