"""The Colab path: a chapter run as a Colab reader runs it, in an environment without the course package.

A fresh virtual environment gets only what Colab preinstalls (``COLAB_PACKAGES``: torch, numpy,
matplotlib, ipywidgets, ipykernel, tqdm, transformers), none of the book's tooling and not the
course package. A kernel started with that environment's Python runs one chapter top to bottom; its
unmodified setup cell installs the package with pip, non-editable, from ``TRANSFORMER_COURSE_URL``, set
with ``%env`` in a cell before it (as appendix B tells a reader) to ``git+file://`` of a snapshot of
this working tree (its tracked and untracked-but-not-ignored files, committed in a temporary
repository; this repository's index and HEAD are not touched). Then:

- the checked cells (``# NBVAL_CHECK_OUTPUT``) print what the chapter has stored;
- the package the kernel imported lies in the environment's site-packages, installed from the
  snapshot's commit (not editable, nothing from this checkout), with every file of
  ``src/transformer_course`` (the corpus too) and the corpus loading;
- the setup cell installed the package and nothing else: the preinstalled torch and the rest kept.

Two to three minutes on two cores (measured 111-196 s with the machine busy otherwise), more than half
of it pip installing torch and transformers into the new environment (from the local wheels and pip's
cache; no bytecode compiled). ``COURSE_SKIP_COLAB=1`` skips it.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import venv
from pathlib import Path

import pytest

import notebook_setup
from conftest import ROOT
from kernel_runner import execute_cell
from test_fresh_build import checked_outputs

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("jupyter_client")

pytestmark = pytest.mark.skipif(os.environ.get("COURSE_SKIP_COLAB") == "1",
                                reason="COURSE_SKIP_COLAB=1")

# What Colab preinstalls, as far as the course goes. torch is pinned to what the Makefile installs: on
# this project's machines pip finds a local CPU wheel of it; from PyPI alone it is the CUDA build.
# ipywidgets is Colab's own 7.7.1 (its front end does not render ipywidgets 8): the package must keep it,
# which the unchanged `pip list` after the setup cell checks.
COLAB_PACKAGES = ["torch==2.13.0", "numpy", "matplotlib", "ipywidgets==7.7.1", "ipykernel", "tqdm",
                  "transformers"]
# A short chapter that loads the packaged corpus (tc.data.load_corpus); read from the snapshot, so that
# its stored outputs and the package come from the same moment of the working tree.
CHAPTER = "book/02_tokens_embeddings.ipynb"
PACKAGE = "transformer_course"
CELL_TIMEOUT = 300

PROBE = """\
import importlib.metadata, json, sys, sysconfig
import transformer_course as tc
dist = importlib.metadata.distribution("transformer-course")
print(json.dumps({"file": tc.__file__, "purelib": sysconfig.get_paths()["purelib"],
                  "executable": sys.executable, "direct_url": dist.read_text("direct_url.json"),
                  "corpus_chars": len(tc.data.load_corpus())}))
"""


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd``; on failure raise with its output (pip's and git's output is noise otherwise)."""
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise AssertionError(f"{cmd} exited {result.returncode}:\n{result.stdout[-3000:]}"
                             f"\n{result.stderr[-3000:]}")
    return result


def snapshot(root: Path, dest: Path) -> str:
    """Commit the working tree of ``root`` (tracked and untracked-but-not-ignored files, as they are on
    disk) as the one commit of a new repository ``dest``; its id. Only reads ``root``."""
    listed = _run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                   "--exclude-standard"]).stdout.split("\0")
    for name in sorted(set(filter(None, listed))):
        source = root / name
        if source.is_file():  # a tracked file deleted in the working tree is left out, as in git add -A
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git = ["git", "-C", str(dest), "-c", "init.defaultBranch=main", "-c", "user.name=course",
           "-c", "user.email=course@localhost", "-c", "commit.gpgsign=false"]
    _run(git + ["init", "-q"])
    _run(git + ["add", "-A"])
    _run(git + ["commit", "-q", "--no-verify", "-m", "snapshot of the working tree"])
    return _run(git + ["rev-parse", "HEAD"]).stdout.strip()


def colab_like_venv(path: Path) -> Path:
    """A new virtual environment with ``COLAB_PACKAGES`` only; its Python."""
    venv.EnvBuilder(with_pip=True).create(path)
    python = path / "bin" / "python"
    # --no-compile: bytecode for all of torch and transformers is most of an install's time;
    # Python compiles what the chapter imports.
    _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile",
          *COLAB_PACKAGES])
    return python


def installed(python: Path) -> dict[str, str]:
    """Distribution name -> version, of the environment of ``python``."""
    listing = _run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"])
    return {d["name"].lower().replace("_", "-"): d["version"] for d in json.loads(listing.stdout)}


def start_kernel(python: Path, kernels: Path, cwd: Path, env: dict[str, str]):
    """A kernel run by ``python`` (a kernelspec of its own in ``kernels``); its manager and client."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = kernels / "colab"
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}",
            "--HistoryManager.hist_file=:memory:"]
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "Colab-like", "language": "python"}), encoding="utf-8")
    km = KernelManager(kernel_name="colab",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    km.start_kernel(cwd=str(cwd), env=env)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
    except RuntimeError:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc


@pytest.fixture
def scratch(tmp_path):
    """A temporary folder, removed afterwards: in memory (/dev/shm) where there is room. The environment
    is about 1 GB in some 30,000 files; on this project's disk removing it took two minutes (and pytest
    keeps the last three runs' temporary folders), in memory under a second."""
    shm = Path("/dev/shm")
    for stale in shm.glob("course-colab-*"):  # left by a run that was killed: memory until a reboot
        if time.time() - stale.stat().st_mtime > 6 * 3600:
            shutil.rmtree(stale, ignore_errors=True)
    in_memory = shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 4 * 2**30
    path = Path(tempfile.mkdtemp(prefix="course-colab-", dir=shm)) if in_memory else tmp_path
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_chapter_runs_where_only_colab_packages_are_installed(scratch):
    started = time.monotonic()
    repo, env_dir, work = scratch / "repo", scratch / "venv", scratch / "work"
    repo.mkdir()
    work.mkdir()
    commit = snapshot(ROOT, repo)
    python = colab_like_venv(env_dir)
    before = installed(python)
    assert "transformer-course" not in before
    built = time.monotonic()

    nb = nbformat.read(repo / CHAPTER, as_version=4)
    stored = checked_outputs(nbformat.read(repo / CHAPTER, as_version=4))
    assert stored and "load_corpus" in "".join(c.source for c in nb.cells)
    assert "TRANSFORMER_COURSE_URL" in nb.cells[notebook_setup.setup_cell_index(nb)].source

    env = {k: v for k, v in os.environ.items() if k not in
           ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "TRANSFORMER_COURSE_URL")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("OMP_NUM_THREADS", "1")
    # The address as appendix B tells a reader to give it, in a cell before the setup cell; with a
    # branch. git+file://localhost/..., not git+file:///...: an older pip, such as the 23.2.1 that venv
    # installs with Python 3.11.7 (its packaging 21.3), rejects the latter as an invalid URL.
    address = f"%env TRANSFORMER_COURSE_URL=git+file://localhost{repo}@main"
    km, kc = start_kernel(python, scratch / "kernels", work, env)
    try:
        execute_cell(kc, address, CELL_TIMEOUT)
        for cell in nb.cells:  # the setup cell (unmodified) first, then the chapter as it is
            if cell.cell_type == "code":
                cell.outputs = execute_cell(kc, cell.source, CELL_TIMEOUT)
        probe = "".join(o.text for o in execute_cell(kc, PROBE, CELL_TIMEOUT) if o.output_type == "stream")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    ran = time.monotonic()

    got = checked_outputs(nb)
    differ = {i: (stored[i], got[i]) for i in stored if got[i] != stored[i]}
    assert not differ, f"checked cells differ from the stored outputs: {differ}"

    # The kernel imported a regular install from the snapshot, in the environment's site-packages.
    facts = json.loads(probe)
    purelib = Path(facts["purelib"])
    package = purelib / PACKAGE
    assert Path(facts["executable"]).parent == env_dir / "bin"
    assert Path(facts["file"]) == package / "__init__.py"
    assert str(ROOT) not in facts["file"]
    origin = json.loads(facts["direct_url"])
    assert not origin.get("dir_info", {}).get("editable"), origin
    assert origin["vcs_info"]["vcs"] == "git" and origin["vcs_info"]["commit_id"] == commit, origin
    assert not list(purelib.glob("__editable__*")), "an editable install's finder is there"
    assert not [p for p in purelib.glob("*.pth") if str(ROOT) in p.read_text(encoding="utf-8")]

    # Every file of the package's source (data and exercises included) was installed, unchanged.
    source = repo / "src" / PACKAGE
    wanted = sorted(str(p.relative_to(source)) for p in source.rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts)
    missing = [name for name in wanted if not (package / name).is_file()]
    assert not missing, f"not in the installed package (pyproject.toml package-data?): {missing}"
    changed = [name for name in wanted if (package / name).read_bytes() != (source / name).read_bytes()]
    assert not changed, changed
    corpus = (source / "data" / "corpus.txt").read_text(encoding="utf-8")
    assert facts["corpus_chars"] == len(corpus) > 0

    # The setup cell installed the course package and nothing else: Colab's torch and the rest kept.
    after = installed(python)
    assert after.pop("transformer-course", None), "pip list shows no transformer-course"
    assert after == before, {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
                             if before.get(k) != after.get(k)}
    print(f"environment {built - started:.0f} s, chapter {ran - built:.0f} s, "
          f"checks {time.monotonic() - ran:.0f} s")
