"""Tiny Sphinx extension: derive the Colab addresses from the one repository address in _config.yml.

Adds the MyST substitution ``colab`` (e.g. ``https://colab.research.google.com/github/OWNER/REPO/blob/main``),
so that a page can link to a notebook on Colab with
``{{ '[在 Colab 打开](' ~ colab ~ '/exercises/03_self_attention.ipynb)' }}``.
"""
from __future__ import annotations

from sphinx.application import Sphinx
from sphinx.config import Config


def colab_base(repo_url: str, branch: str) -> str:
    """``https://github.com/OWNER/REPO`` → the Colab address of that repository's ``branch``."""
    path = repo_url.rstrip("/").removesuffix(".git").split("github.com/", 1)[-1]
    return f"https://colab.research.google.com/github/{path}/blob/{branch}"


def _add_substitutions(app: Sphinx, config: Config) -> None:
    options = config.html_theme_options or {}
    repo, branch = options.get("repository_url", ""), options.get("repository_branch", "main")
    config.myst_substitutions = {**config.myst_substitutions, "colab": colab_base(repo, branch)}


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _add_substitutions, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
