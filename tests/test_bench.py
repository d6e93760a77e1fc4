"""A tiny smoke run of the benchmark command, so that it cannot rot."""
import json
import subprocess
import sys

from conftest import ROOT


def test_bench_quick_run_writes_results(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--out", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=300)
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    both = {"ours cached", "transformers cached", "matmul floor"}
    for key, measured in (("decode", both | {"ours uncached", "transformers uncached"}), ("decode_narrow", both)):
        assert results[key]["same_tokens"] is True  # ours and transformers agree token for token
        assert set(results[key]["tokens_per_s"]) == measured
    assert results["bandwidth"]["bound_tokens_per_s"] > 0
    report = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert report.count("| ours cached |") == 2 and "beyond the floor" in report
