"""Sphinx configuration: the pages under docs/ (Markdown, read by MyST) and the API reference from docstrings.

    scripts/docs            serve the site on http://127.0.0.1:8000, rebuilt on every change
    scripts/docs --build    build it once, strictly, into docs/_build/html

Why Sphinx, and what it costs: docs/contributing.md. The site's navigation is ``NAVIGATION`` below (the
pages themselves stay plain Markdown that also reads well on GitHub).
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import tomllib
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

# autodoc imports the package, and backwave_django.models needs a configured Django. No database: with
# DATABASES empty Django's dummy backend refuses every query, so the build cannot come to depend on one.
import django  # noqa: E402
from django.conf import settings  # noqa: E402

if not settings.configured:
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "backwave_django"],
        DATABASES={},
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    django.setup()

# -- the project ---------------------------------------------------------------------------------------------

project = "backwave-django"
author = "the backwave-django authors"
copyright = "the backwave-django authors"  # no year: the build must not read the clock
release = version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinxcontrib.mermaid",
    "link_check",  # docs/_ext/link_check.py: every relative link and anchor, in the pages and README.md
]

root_doc = "index"
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_ext"]
# Fences without a language are shown as plain text, as GitHub shows them.
highlight_language = "text"

# -- Markdown (MyST) -----------------------------------------------------------------------------------------

# Every heading gets GitHub's anchor, so `page.md#a-heading` resolves here as it does on GitHub, and a
# link to a missing page or anchor is a warning (an error in a strict build).
myst_heading_anchors = 6
myst_heading_slug_func = "github"
# docs/explanation/states.md's state diagram (the browser draws it; offline the source is shown).
myst_fence_as_directive = ["mermaid"]

# -- the API reference from docstrings (docs/reference/docstrings/) ------------------------------------------

autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
# Signatures come from the code: a dataclass without a docstring has one made of its signature (with the
# annotations as strings), which must not be read as the signature or shown as the docstring.
autodoc_docstring_signature = False
autodoc_typehints_format = "short"
autodoc_inherit_docstrings = False

# -- HTML ----------------------------------------------------------------------------------------------------

html_theme = "furo"
html_title = f"backwave-django {release}"
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False

# -- navigation ----------------------------------------------------------------------------------------------

# The four Diátaxis parts and their pages, in order. Sphinx builds its sidebar from toctrees; rather than
# write them into index.md (where GitHub would show them as code), they are added to it as it is read.
NAVIGATION: dict[str, list[str]] = {
    "Tutorial": ["tutorial"],
    "How-to guides": [
        "howto/django-tasks",
        "howto/migrate",
        "howto/testing",
        "howto/deploy",
        "howto/telemetry",
        "howto/operate",
        "howto/schedules",
        "howto/tags-and-signals",
        "howto/workflows",
        "howto/retention",
        "howto/admin",
        "howto/manifest",
        "howto/torture",
        "contributing",
    ],
    "Reference": [
        "reference/settings",
        "reference/api",
        "reference/models",
        "reference/commands",
        "reference/docstrings/public-api",
        "reference/docstrings/store-contract",
        "reference/docstrings/testing",
        "reference/docstrings/core",
    ],
    "Explanation": ["explanation/design", "explanation/states", "explanation/simulator", "performance"],
}


def _add_navigation(app: Any, docname: str, source: list[str]) -> None:
    if docname != root_doc:
        return
    for caption, pages in NAVIGATION.items():
        entries = "\n".join(pages)
        source[0] += f"\n\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n{entries}\n```\n"


def _class_signature(
    app: Any,
    what: str,
    name: str,
    obj: Any,
    options: Any,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str, str | None] | None:
    """No signature for an Enum's ``(*values)`` or a Protocol's ``(*args, **kwargs)``: neither is called."""
    uncalled = isinstance(obj, type) and (issubclass(obj, enum.Enum) or getattr(obj, "_is_protocol", False))
    return ("", return_annotation) if what in ("class", "exception") and uncalled else None


def _generated_docstring(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Drop the docstring ``@dataclass`` makes up for a class that has none (its signature, again)."""
    made_up = dataclasses.is_dataclass(obj) and (obj.__doc__ or "").startswith(f"{obj.__name__}(")
    if what == "class" and made_up:
        lines.clear()


def setup(app: Any) -> None:
    app.connect("source-read", _add_navigation)
    app.connect("autodoc-process-signature", _class_signature)
    app.connect("autodoc-process-docstring", _generated_docstring)
