"""A tiny smoke run of the benchmark command, so that it cannot rot (on a GPU too, where there is one)."""
import json
import subprocess
import sys

import pytest
import torch

import bench
from conftest import ROOT


def test_section_table_covers_exactly_the_only_choices():
    """``--only NAME`` must name a section of the table, and every section must be choosable."""
    only = next(action for action in bench.parser()._actions if action.dest == "only")
    names = [section.name for section in bench.SECTIONS]
    assert len(names) == len(set(names)) and set(names) == set(only.choices)
    assert all(other in names for section in bench.SECTIONS for other in section.also_for)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device here"))])
def test_bench_quick_run_writes_results(tmp_path, device):
    subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--device", device,
                    "--out", str(tmp_path)], check=True, capture_output=True, text=True, timeout=300)
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["machine"]["device"].startswith(device)
    both = {"ours cached", "transformers cached", "matmul floor"}
    for key, measured in (("decode", both | {"ours uncached", "transformers uncached"}), ("decode_narrow", both)):
        assert results[key]["same_tokens"] is True  # ours and transformers agree token for token
        assert set(results[key]["tokens_per_s"]) == measured
    assert results["bandwidth"]["bound_tokens_per_s"] > 0
    train = results["train"]  # the same model in both implementations: the same loss before any step
    assert train["same_loss_at_start"] is True and set(train["steps_per_s"]) == {"ours", "transformers"}
    assert all(r["didactic"]["peak_mib"] >= 0 and "tiled" in r for r in results["attention"].values())
    gqa = results["gqa"]["cache_bytes"]  # the cache each token reads shrinks with the K/V heads
    assert gqa["n_kv_heads=4"] == 2 * gqa["n_kv_heads=2"] == 4 * gqa["n_kv_heads=1"]
    report = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert report.count("| ours cached |") == 2 and "beyond the floor" in report
    assert "Ours / transformers:" in report and "## Grouped-query attention" in report


def test_bench_compare_quick_run_against_this_commit(tmp_path):
    """The before/after decode comparison: the package at a commit (here HEAD, present in any clone) imported
    beside this one, both decoding the same tokens as transformers."""
    out = tmp_path / "compare.json"
    subprocess.run([sys.executable, str(ROOT / "tools" / "bench_compare.py"), "HEAD", "--quick", "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300, cwd=ROOT)
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["gpt2"]["same_tokens"] is True and results["narrow"]["same_tokens"] is True
    assert set(results["gpt2"]["ratio_to_transformers"]) == {"before cached", "before uncached", "now cached",
                                                              "now uncached"}
