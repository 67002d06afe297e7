"""A tiny document model rendered to Markdown and to one self-contained HTML file.

Blocks: headings, paragraphs (with `code` and **bold**), tables, images (relative links in
Markdown, base64 PNG in HTML) and preformatted text. No external assets in the HTML.

Tables fit a 1200 px window: a table wraps its cells at spaces, and one whose narrowest
rendering (`min_width_px`: every column as wide as its longest word) is wider than the page's
text column (`TABLE_PX`) is split into several, each repeating the first column
(`Document.table`); the HTML also breaks a word longer than its column.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:64em;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1,h2,h3,p,figcaption{overflow-wrap:anywhere}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em;max-width:100%} th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;overflow-wrap:anywhere}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #eee;margin:.4em 0} figure{margin:1em 0} figcaption{font-size:.85em;color:#555}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;background:#f6f6f6} pre{padding:.6em;overflow:auto;font-size:.85em}
.warn{color:#b00020;font-weight:600}
"""


def _inline_html(text: str) -> str:
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


# the page's text column (body max-width 64em at 16 px) inside a 1200 px window; a table cell's
# character (0.9em of 16 px, system-ui: about 0.55em, rounded up) and its padding and border
TABLE_PX = 1024
CHAR_PX = 8
CELL_PX = 19
LONG_WORD = 40  # characters: a longer word (a task spec, a path) is broken by the CSS instead


def _words(text: str) -> list[str]:
    return re.sub(r"\*\*|`", "", str(text)).split() or [""]


def column_px(cells: list[str]) -> int:
    """The narrowest a column renders: its longest word (cells wrap at spaces; a word longer than
    LONG_WORD characters breaks anywhere), in px."""
    return max(min(len(w), LONG_WORD) for c in cells for w in _words(c)) * CHAR_PX + CELL_PX


def min_width_px(header: list[str], rows: list[list[str]]) -> int:
    """The narrowest a table renders without breaking a word, in px."""
    return sum(column_px([h, *(r[i] for r in rows)]) for i, h in enumerate(header))


def split_columns(header: list[str], rows: list[list[str]], limit: int = TABLE_PX):
    """[(header, rows)]: the table as is when it fits `limit` px, else its columns after the first
    in consecutive groups that fit beside the first column (a column too wide by itself alone)."""
    if min_width_px(header, rows) <= limit or len(header) < 3:
        return [(header, rows)]
    widths = [column_px([h, *(r[i] for r in rows)]) for i, h in enumerate(header)]
    groups: list[list[int]] = [[]]
    used = widths[0]
    for i in range(1, len(header)):
        if groups[-1] and used + widths[i] > limit:
            groups.append([])
            used = widths[0]
        groups[-1].append(i)
        used += widths[i]
    return [
        ([header[0], *(header[i] for i in g)], [[r[0], *(r[i] for i in g)] for r in rows])
        for g in groups
    ]


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


@dataclass
class Document:
    title: str
    blocks: list[tuple] = field(default_factory=list)

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("h", level, text))

    def para(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, header: list[str], rows: list[list]) -> None:
        """One table, or several when it is wider than the page (split_columns)."""
        rows = [[str(c) for c in row] for row in rows]
        for part in split_columns([str(h) for h in header], rows):
            self.blocks.append(("table", *part))

    def image(self, path: Path, caption: str) -> None:
        self.blocks.append(("img", Path(path), caption))

    def pre(self, text: str) -> None:
        self.blocks.append(("pre", text))

    def markdown(self, base: Path) -> str:
        """Markdown; image links relative to `base` (the directory of the .md file)."""
        out = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                out += ["#" * block[1] + " " + block[2], ""]
            elif kind == "p":
                out += [block[1], ""]
            elif kind == "table":
                header, rows = block[1], block[2]
                out.append("| " + " | ".join(_md_cell(h) for h in header) + " |")
                out.append("|" + "---|" * len(header))
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
                out.append("")
            elif kind == "img":
                rel = block[1].relative_to(base) if block[1].is_relative_to(base) else block[1]
                out += [f"![{block[2]}]({rel.as_posix()})", "", f"*{block[2]}*", ""]
            elif kind == "pre":
                out += ["```", block[1].rstrip("\n"), "```", ""]
        return "\n".join(out)

    def html(self) -> str:
        """One self-contained HTML page (inline CSS, images as base64 data URIs)."""
        out = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(self.title)}</title><style>{CSS}</style></head><body>",
            f"<h1>{html.escape(self.title)}</h1>",
        ]
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                out.append(f"<h{block[1]}>{html.escape(block[2])}</h{block[1]}>")
            elif kind == "p":
                out.append(f"<p>{_inline_html(block[1])}</p>")
            elif kind == "table":
                head = "".join(f"<th>{_inline_html(h)}</th>" for h in block[1])
                body = []
                for row in block[2]:
                    cells = "".join(
                        f'<td class="num">{_inline_html(c)}</td>'
                        if re.match(r"^[+-]?\d", c)
                        else f"<td>{_inline_html(c)}</td>"
                        for c in row
                    )
                    body.append(f"<tr>{cells}</tr>")
                out.append(
                    f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
                )
            elif kind == "img":
                data = base64.b64encode(block[1].read_bytes()).decode("ascii")
                out.append(
                    f'<figure><img alt="{html.escape(block[2], quote=True)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{_inline_html(block[2])}</figcaption></figure>"
                )
            elif kind == "pre":
                out.append(f"<pre>{html.escape(block[1])}</pre>")
        out.append("</body></html>")
        return "\n".join(out)
