"""A tiny smoke run of the benchmark command, so that it cannot rot."""
import json
import subprocess
import sys

from conftest import ROOT


def test_bench_quick_run_writes_results(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--out", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=300)
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["decode"]["same_tokens"] is True  # ours and transformers agree token for token
    assert set(results["decode"]["tokens_per_s"]) == {"ours cached", "transformers cached", "ours uncached",
                                                      "transformers uncached", "matmul floor"}
    assert results["bandwidth"]["bound_tokens_per_s"] > 0
    assert "| ours cached |" in (tmp_path / "results.md").read_text(encoding="utf-8")
