"""Check every relative link in the pages and in README.md, and every anchor, as GitHub resolves them.

MyST already warns about a link to a missing page or heading, but it also accepts docutils' own section
ids (``#backwave-bench`` for a heading ``backwave_bench``), which GitHub does not have; and README.md is not a
page of the site (its links are relative to the repository root, so that it reads on GitHub and on PyPI).
Once every page has been read, this checks each relative link in both: the file it names must exist, an
anchor into a page must be one of the GitHub-style heading slugs MyST gave that page
(``myst_heading_slug_func``), and an anchor into README.md one of its own. Each miss is a warning, so an error
in a strict build. Links with a scheme are not checked: there is no network in CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.token import Token
from myst_parser.slugs import github_slugify, unique_slug
from sphinx.util import logging

logger = logging.getLogger(__name__)

_MARKDOWN = MarkdownIt("commonmark").enable("table")


def _links(tokens: list[Token]) -> Iterator[tuple[str, int]]:
    """(href, line of its block) of every link in the inline tokens."""
    for token in tokens:
        line = token.map[0] + 1 if token.map else 0
        for child in token.children or []:
            if child.type == "link_open":
                yield str(child.attrGet("href") or ""), line


def _heading_slugs(tokens: list[Token]) -> set[str]:
    """GitHub's anchors for the headings, made as MyST makes them for the pages."""
    slugs: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            text = "".join(child.content for child in tokens[i + 1].children or [])
            slugs.add(unique_slug(github_slugify(text), slugs))
    return slugs


def _check_file(env: Any, path: Path, own_slugs: set[str] | None = None) -> None:
    tokens = _MARKDOWN.parse(path.read_text(encoding="utf-8"))
    if own_slugs is None:
        own_slugs = _heading_slugs(tokens)
    for href, line in _links(tokens):
        if not href or "://" in href or href.startswith("mailto:"):
            continue
        where = f"{path}:{line}"
        target_path, _, anchor = href.partition("#")
        anchor = unquote(anchor)
        if not target_path:
            if anchor not in own_slugs:
                logger.warning(
                    "no heading on this page has the anchor %r (link %r)", anchor, href, location=where
                )
            continue
        target = (path.parent / unquote(target_path)).resolve()
        if not target.exists():
            logger.warning("the link %r names no file", href, location=where)
            continue
        if not anchor:
            continue
        docname = env.path2doc(str(target))
        if docname is None or docname not in env.all_docs:
            logger.warning(
                "the link %r has an anchor into a file that is no page of the site", href, location=where
            )
        elif anchor not in env.metadata[docname].get("myst_slugs", {}):
            logger.warning(
                "%s has no heading with the anchor %r (link %r)", target_path, anchor, href, location=where
            )


def check_links(app: Any, env: Any) -> None:
    for docname in sorted(env.found_docs):
        own_slugs = set(env.metadata[docname].get("myst_slugs", {}))
        _check_file(env, Path(env.doc2path(docname)), own_slugs)
    _check_file(env, Path(app.srcdir).parent / "README.md")


def setup(app: Any) -> dict[str, Any]:
    app.connect("env-check-consistency", check_links)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
