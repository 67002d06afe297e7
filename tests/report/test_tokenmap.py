import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from ict.errors import DataError
from ict.report.tokenmap import (
    heat,
    jaccard,
    render_html,
    render_terminal,
    response_summary,
    top_tokens,
)

from .helpers import make_sample

TOKENS = list("So 2+3 = 5.\nThe answer is 5.")


class TokenParser(HTMLParser):
    """Collect token spans (class, data-*, style, text), script/link/img sources, and inputs."""

    def __init__(self):
        super().__init__()
        self.tokens, self.inputs, self.external, self._cur = [], [], [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "span" and "tok" in a.get("class", "").split() and "data-js" in a:
            self._cur = {"class": a["class"].split(), "attrs": a, "text": ""}
        if tag == "input":
            self.inputs.append(a)
        if tag in ("script", "img", "link") and (a.get("src") or a.get("href")):
            self.external.append(a)

    def handle_data(self, data):
        if self._cur is not None:
            self._cur["text"] += data

    def handle_endtag(self, tag):
        if tag == "span" and self._cur is not None:
            self.tokens.append(self._cur)
            self._cur = None


@pytest.fixture
def records():
    rng = np.random.default_rng(0)
    return [make_sample(s, TOKENS, rng, reward=float(s % 2)) for s in range(2)]


def test_html_token_spans_match_records(records):
    parser = TokenParser()
    parser.feed(render_html(records))
    spans = parser.tokens
    assert len(spans) == sum(len(r["tokens"]) for r in records)
    flat = [(r, t) for r in records for t in range(len(r["tokens"]))]
    for span, (rec, t) in zip(spans, flat, strict=True):
        assert span["text"].rstrip("\n") == rec["tokens"][t].replace("\n", "↵")
        for m in ("entropy", "renyi2", "js"):
            assert float(span["attrs"][f"data-{m}"]) == pytest.approx(rec[m][t], abs=1e-4)
        assert ("m-ict" in span["class"]) == bool(rec["selected"]["ict"][t])
        assert ("m-ent" in span["class"]) == bool(rec["selected"]["entropy"][t])
        assert ("m-stapo" in span["class"]) == (not rec["selected"]["stapo"][t])  # silenced ones


def test_html_colour_follows_metric_and_is_self_contained(records):
    page = render_html(records, metric="entropy")
    parser = TokenParser()
    parser.feed(page)
    assert parser.external == []  # no external assets
    radios = [i for i in parser.inputs if i.get("name") == "metric"]
    assert [r["value"] for r in radios] == ["entropy", "renyi2", "js"]
    assert [r["value"] for r in radios if "checked" in r] == ["entropy"]
    assert {i["value"] for i in parser.inputs if i.get("class") == "mark"} == {
        "ict",
        "entropy",
        "stapo",
    }
    # the highest-entropy token is the darkest (lowest green channel)
    values = [float(s["attrs"]["data-entropy"]) for s in parser.tokens]
    greens = [
        int(re.search(r"rgb\((\d+),(\d+),(\d+)\)", s["attrs"]["style"]).group(2))
        for s in parser.tokens
    ]
    assert greens[int(np.argmax(values))] == min(greens)
    assert greens[int(np.argmin(values))] == max(greens)


def test_summary_fractions_and_jaccard_by_hand():
    rec = {
        "tokens": ["a", "b", "a", "c"],
        "js": [0.3, 0.1, 0.2, 0.0],
        "selected": {"ict": [1, 0, 1, 0], "entropy": [1, 1, 0, 0], "stapo": [1, 1, 1, 0]},
    }
    s = response_summary(rec)
    assert s["fraction"] == {"ict": 0.5, "entropy": 0.5, "stapo": 0.75}
    assert s["jaccard"] == {"ict|entropy": pytest.approx(1 / 3)}
    assert s["top_ict"] == [("a", 2)]
    assert top_tokens([rec, rec]) == [("a", 4, 4)]
    assert jaccard([0, 0], [0, 0]) == 1.0  # two empty selections are the same set (ict.select)


def test_terminal_plain_and_colour(records):
    plain = render_terminal(records[:1], color=False)
    assert "\x1b[" not in plain
    picked = [
        t for t, s in zip(records[0]["tokens"], records[0]["selected"]["ict"], strict=True) if s
    ]
    assert re.findall(r"«(.*?)»", plain.split("\n", 1)[1]) == picked
    coloured = render_terminal(records[:1], metric="entropy", color=True)
    assert (
        coloured.count("\x1b[48;5;") == len(records[0]["tokens"]) - 1
    )  # newline token splits, its "" piece is dropped
    assert coloured.count(";1;4m") == len(picked)


def test_bad_records_raise_data_error():
    with pytest.raises(DataError, match="'js' has 1 values for 2 tokens"):
        render_html([{"tokens": ["a", "b"], "js": [0.1]}])
    with pytest.raises(DataError, match="unknown metric"):
        render_terminal([], metric="kl")


def test_heat_endpoints():
    assert heat(0) == (255, 255, 255) and heat(1) == (240, 80, 40) and heat(2) == heat(1)


@pytest.mark.browser
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_page_renders_in_headless_chromium(records, tmp_path):
    page = tmp_path / "map.html"
    page.write_text(render_html(records), encoding="utf-8")
    shot = tmp_path / "map.png"
    flags = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    # the inline script runs and switches the colouring to entropy when asked by the URL
    dom = subprocess.run(
        [
            *flags,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page.as_uri() + "#metric=entropy",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-ready="1"' in dom.stdout
    parser = TokenParser()
    parser.feed(dom.stdout)
    assert len(parser.tokens) == sum(len(r["tokens"]) for r in records)
    values = [float(s["attrs"]["data-entropy"]) for s in parser.tokens]
    greens = [
        int(re.search(r"rgb\((\d+), ?(\d+), ?(\d+)\)", s["attrs"]["style"]).group(2))
        for s in parser.tokens
    ]
    assert greens[int(np.argmax(values))] == min(greens)
    res = subprocess.run(
        [
            *flags,
            f"--user-data-dir={tmp_path / 'profile2'}",
            "--window-size=1000,700",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and shot.read_bytes()[:4] == b"\x89PNG", res.stderr[-2000:]
    # the page is not blank: many distinct colours were painted
    from matplotlib.image import imread

    img = imread(shot)[..., :3]
    assert len(np.unique((img.reshape(-1, 3) * 255).astype(int), axis=0)) > 50
