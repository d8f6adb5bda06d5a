"""A small document model (sections of paragraphs, lists, tables, figures) and its two writers:
Markdown (the source a reviewer diffs) and self-contained HTML (inline CSS, figures inline as SVG,
print CSS; nothing loaded from the network). The design document (sizing.report.design_doc) builds one
`Document`; both files are functions of it, so they cannot disagree.

Owns: the blocks, HTML escaping, the stylesheet. Imports only the standard library.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from sizing.report.format import md_table


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Figure:
    """An SVG drawing (inline in the HTML) saved as `file` beside the Markdown."""

    svg: str
    file: str
    caption: str


Block = Para | Bullets | Table | Code | Figure


@dataclass
class Section:
    id: str  # the HTML anchor, stable (tests look sections up by it)
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    subtitle: str
    sections: list[Section]


# ---------------------------------------------------------------- Markdown


def _md_block(b: Block) -> str:
    if isinstance(b, Para):
        return b.text
    if isinstance(b, Bullets):
        return "\n".join(f"- {i}" for i in b.items)
    if isinstance(b, Table):
        return (f"*{b.caption}*\n\n" if b.caption else "") + md_table(b.headers, b.rows)
    if isinstance(b, Code):
        return "```\n" + b.text + "\n```"
    return f"![{b.caption}]({b.file})\n\n*{b.caption}*"


def to_markdown(doc: Document) -> str:
    parts = [f"# {doc.title}", "", doc.subtitle, ""]
    for s in doc.sections:
        parts += [f"## {s.title}", ""]
        for b in s.blocks:
            parts += [_md_block(b), ""]
    return "\n".join(parts).rstrip() + "\n"


# ---------------------------------------------------------------- HTML

CSS = """
:root { --ink: #1b1f24; --muted: #57606a; --line: #d0d7de; --bad: #a40e26; --head: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--ink);
       max-width: 1100px; margin: 2rem auto; padding: 0 1.5rem; background: #fff; }
h1 { font-size: 1.7rem; margin-bottom: .2rem; } h2 { font-size: 1.3rem; border-bottom: 2px solid var(--line);
     padding-bottom: .2rem; margin-top: 2.2rem; }
.subtitle { color: var(--muted); margin-top: 0; }
nav ol { columns: 2; font-size: .92rem; }
table { border-collapse: collapse; width: 100%; margin: .6rem 0 1rem; font-size: .88rem; }
th, td { border: 1px solid var(--line); padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: var(--head); }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: .3rem 0; }
pre { background: var(--head); border: 1px solid var(--line); padding: .6rem; white-space: pre-wrap;
      overflow-wrap: anywhere; font-size: .85rem; }
code { font-size: .9em; background: var(--head); padding: 0 .2em; }
pre code { background: none; padding: 0; }
figure { margin: 1rem 0; } figure svg { width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: .9rem; }
.infeasible { color: var(--bad); }
@media print {
  body { max-width: none; margin: 0; padding: 0; font-size: 10.5pt; }
  nav { display: none; }
  h2 { break-after: avoid; } table, figure, pre { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
  @page { size: A4; margin: 14mm 12mm; }
}
"""


def _is_num(cell: str) -> bool:
    """A figure (right-aligned): a number with at most a $, %, × or a thousands separator."""
    t = cell.replace(",", "").replace("$", "").replace("%", "").replace("×", "").replace("−", "-").strip()
    try:
        float(t)
    except ValueError:
        return False
    return True


def _html_table(b: Table) -> str:
    out = ["<table>"]
    if b.caption:
        out.append(f"<caption>{html.escape(b.caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in b.headers) + "</tr></thead><tbody>")
    for r in b.rows:
        cells = []
        for c in r:
            cls = ' class="num"' if _is_num(c) else (' class="infeasible"' if c.startswith("infeasible") else "")
            cells.append(f"<td{cls}>{html.escape(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _inline(text: str) -> str:
    """Escaped text with Markdown's `code` spans as <code> (the only inline markup the document uses)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _html_block(b: Block) -> str:
    if isinstance(b, Para):
        return f"<p>{_inline(b.text)}</p>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Table):
        return _html_table(b)
    if isinstance(b, Code):
        return f"<pre><code>{html.escape(b.text)}</code></pre>"
    svg = b.svg[b.svg.find("<svg"):]  # drop the XML prolog and DOCTYPE: inline SVG needs neither
    return f"<figure>{svg}<figcaption>{html.escape(b.caption)}</figcaption></figure>"


def to_html(doc: Document) -> str:
    toc = "".join(f'<li><a href="#{s.id}">{html.escape(s.title)}</a></li>' for s in doc.sections)
    body = "".join(f'<section id="{s.id}"><h2>{html.escape(s.title)}</h2>'
                   + "".join(_html_block(b) for b in s.blocks) + "</section>" for s in doc.sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(doc.title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{html.escape(doc.title)}</h1><p class=\"subtitle\">{html.escape(doc.subtitle)}</p>"
            f"<nav><ol>{toc}</ol></nav>{body}</body></html>\n")
