"""What tests read out of a generated HTML document: its tables (by caption), its section ids, and every
place it could load something from elsewhere (the document must open offline)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

# elements that fetch a resource by themselves
FETCHING_TAGS = {"script", "link", "img", "iframe", "object", "embed", "video", "audio", "source", "base", "frame"}
URL_ATTRS = {"src", "href", "xlink:href", "srcset", "action", "data", "poster", "background", "formaction"}


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.loads: list[str] = []
        self.section_ids: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._caption: str | None = None
        self._in_caption = False
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._rows: list[list[str]] = []
        self._style = False
        self.css = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in FETCHING_TAGS:
            self.loads.append(f"<{tag}>")
        for k, v in attrs:
            if k in URL_ATTRS and v is not None and not v.startswith("#"):
                self.loads.append(f"{tag} {k}={v}")
            if k == "style" and v and re.search(r"url\(|@import", v):
                self.loads.append(f"{tag} style={v}")
        if tag == "section":
            self.section_ids += [v for k, v in attrs if k == "id" and v]
        elif tag == "table":
            self._caption, self._rows = None, []
        elif tag == "caption":
            self._in_caption, self._caption = True, ""
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "style":
            self._style = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "caption":
            self._in_caption = False
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self._rows.append(self._row)
            self._row = None
        elif tag == "table" and self._caption is not None:
            self.tables[self._caption] = self._rows
        elif tag == "style":
            self._style = False

    def handle_data(self, data: str) -> None:
        if self._in_caption and self._caption is not None:
            self._caption += data
        if self._cell is not None:
            self._cell.append(data)
        if self._style:
            self.css += data


def parse(html: str) -> _Parser:
    p = _Parser()
    p.feed(html)
    return p


def external_loads(html: str) -> list[str]:
    """Everything in the document that would make a browser fetch something: fetching elements, URL
    attributes other than in-page anchors, CSS url() and @import."""
    p = parse(html)
    out = list(p.loads)
    if re.search(r"url\(|@import", p.css):
        out.append("CSS url() or @import")
    return out
