"""The README's pictures still show the pages as they are: each page of
tools/readme_pictures.py, opened on a server with the samples loaded as
``make run`` loads them, has the structure (headings and tabs, in order)
recorded when its picture was made, and the README shows every picture. When
a page changes shape, run ``python -m tools.readme_pictures`` again."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page

from tests.support.browser import shot, wait_for_dash
from tools import readme_pictures as pictures

README = pictures.REPO / "README.md"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    with pictures.serve(tmp_path_factory.mktemp("pictures")) as url:
        yield url, pictures.trace_ids(url)


def test_the_readme_shows_every_picture() -> None:
    text = README.read_text()
    for p in pictures.PAGES:
        assert (pictures.OUT / f"{p.name}.png").is_file(), p.name
        assert f"docs/pictures/{p.name}.png" in text, f"README.md does not show {p.name}"


@pytest.mark.parametrize("picture", pictures.PAGES, ids=lambda p: p.name)
def test_each_page_has_the_structure_its_picture_shows(
        page: Page, served: tuple[str, dict[str, int]], picture: pictures.PictureOf) -> None:
    url, ids = served
    recorded = json.loads(pictures.STRUCTURE.read_text())[picture.name]
    page.goto(pictures.page_url(url, picture, ids))
    wait_for_dash(page)
    shot(page, f"readme-{picture.name}", full_page=False)
    assert pictures.structure(page) == recorded, (
        f"the {picture.name} page no longer has the structure of docs/pictures/"
        f"{picture.name}.png: run `python -m tools.readme_pictures`")
