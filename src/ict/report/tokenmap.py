"""Token maps: which tokens each selector picks, coloured by H, H2 or JS.

Input records have the samples.jsonl format of docs/ARCHITECTURE.md:
{"step", "prompt", "response", "reward", "tokens": [str], "entropy": [float], "renyi2": [float],
 "js": [float], "selected": {"ict": [0/1], "entropy": [0/1], "stapo": [0/1], ...}}
(one entry per response token). `render_html` gives a self-contained page (inline CSS and a small
inline script to switch the colouring; no external assets); `render_terminal` gives ANSI text.
STAPO keeps almost every token, so the map marks the tokens it *silences* (valid, not kept).
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from collections.abc import Sequence

from ict.errors import DataError
from ict.select.overlap import jaccard

METRICS = {
    "entropy": "H (Shannon entropy, nats)",
    "renyi2": "H2 (Rényi-2 entropy, nats)",
    "js": "JS score (nats)",
}
# selector -> (css class, legend text); order is the legend order
MARKS = {
    "ict": ("m-ict", "picked by ICT (top JS)"),
    "entropy": ("m-ent", "picked by 20-Entropy (top H)"),
    "stapo": ("m-stapo", "silenced by STAPO (spurious)"),
}


def _mark_mask(name: str, kept: Sequence[int]) -> list[bool]:
    """Tokens to mark for a selector: kept ones, except STAPO where the silenced ones are marked."""
    return [not k for k in kept] if name == "stapo" else [bool(k) for k in kept]


def validate_record(record: dict, index: int = 0) -> None:
    """Raise DataError unless the record has tokens and equally long per-token lists."""
    if "tokens" not in record:
        raise DataError(
            f"sample {index} has no 'tokens'; samples need per-token detail (see docs/ARCHITECTURE.md)"
        )
    n = len(record["tokens"])
    for key in METRICS:
        if key in record and len(record[key]) != n:
            raise DataError(f"sample {index}: '{key}' has {len(record[key])} values for {n} tokens")
    for name, sel in record.get("selected", {}).items():
        if len(sel) != n:
            raise DataError(
                f"sample {index}: selected['{name}'] has {len(sel)} values for {n} tokens"
            )


def response_summary(record: dict, top: int = 5) -> dict:
    """Per-response summary: token count, fraction selected per selector, Jaccard between ICT and
    each other selector, and the response's ICT-picked tokens (most frequent first)."""
    n = len(record["tokens"])
    selected = record.get("selected", {})
    fractions = {
        name: (sum(1 for s in sel if s) / n if n else math.nan) for name, sel in selected.items()
    }
    overlaps = {}
    if "ict" in selected:
        for name, sel in selected.items():
            if name not in ("ict", "stapo"):
                overlaps[f"ict|{name}"] = jaccard(selected["ict"], sel)
    picked = Counter(
        t for t, s in zip(record["tokens"], selected.get("ict", [0] * n), strict=True) if s
    )
    return {
        "tokens": n,
        "fraction": fractions,
        "jaccard": overlaps,
        "top_ict": picked.most_common(top),
    }


def top_tokens(
    records: Sequence[dict], selector: str = "ict", top: int = 15
) -> list[tuple[str, int, int]]:
    """Across records: (token, times picked by `selector`, times seen), most picked first."""
    picked, seen = Counter(), Counter()
    for rec in records:
        seen.update(rec["tokens"])
        sel = rec.get("selected", {}).get(selector)
        if sel is not None:
            picked.update(t for t, s in zip(rec["tokens"], sel, strict=True) if s)
    return [(tok, count, seen[tok]) for tok, count in picked.most_common(top)]


def _scale(records: Sequence[dict], metric: str) -> tuple[float, float]:
    """Colour range of a metric: the page's 1st to 99th percentile (robust to outliers; a range
    that starts above 0 shows contrast when every token scores high, as JS often does)."""
    values = sorted(v for rec in records for v in rec.get(metric, []))
    if not values:
        return 0.0, 1.0
    lo = values[int(0.01 * (len(values) - 1))]
    hi = values[min(len(values) - 1, int(0.99 * len(values)))]
    if hi <= lo:
        lo, hi = min(0.0, lo), max(hi, lo + 1e-6) if hi > 0 else 1.0
    return lo, hi


def _unit(value: float, scale: tuple[float, float]) -> float:
    return (value - scale[0]) / (scale[1] - scale[0])


def heat(x: float) -> tuple[int, int, int]:
    """White (0) -> yellow (0.5) -> red (1) for x clipped to [0, 1]."""
    x = min(1.0, max(0.0, x))
    if x < 0.5:
        f = x / 0.5
        return 255, 255, round(255 - 155 * f)
    f = (x - 0.5) / 0.5
    return round(255 - 15 * f), round(255 - 175 * f), round(100 - 60 * f)


def _show(token: str) -> str:
    """Visible form of a token: newline -> ↵, tab -> →."""
    return token.replace("\n", "↵").replace("\t", "→")


def _key(token: str) -> str:
    """Token shown alone (tables, summaries): spaces visible as ␣."""
    return _show(token).replace(" ", "␣")


def _fmt(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222;max-width:70em}
h1{font-size:1.4em} h2{font-size:1.1em;margin:0 0 .3em}
.controls{position:sticky;top:0;background:#fafafa;border:1px solid #ddd;padding:.5em .8em;z-index:2}
.controls label{margin-right:1em}
.legend{display:flex;gap:1.2em;flex-wrap:wrap;align-items:center;margin-top:.4em;font-size:.9em}
.bar{display:inline-block;width:10em;height:.9em;border:1px solid #aaa;vertical-align:middle;
 background:linear-gradient(to right,rgb(255,255,255),rgb(255,255,100),rgb(240,80,40))}
.resp{border:1px solid #ddd;border-radius:6px;padding:.7em .9em;margin:1em 0}
.prompt{color:#555;font-size:.9em;white-space:pre-wrap;margin-bottom:.4em}
.text{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:1.15em;line-height:2.1;white-space:pre-wrap}
.tok{padding:1px 0;border-radius:2px}
.summary{font-size:.85em;color:#444;margin-top:.4em}
.m-ict.on-ict{box-shadow:inset 0 -3px 0 #1f4fd1;font-weight:600}
.m-ent.on-entropy{box-shadow:inset 0 3px 0 #1a9850}
.m-ict.m-ent.on-ict.on-entropy{box-shadow:inset 0 -3px 0 #1f4fd1,inset 0 3px 0 #1a9850}
.m-stapo.on-stapo{text-decoration:line-through 2px #7b3294}
.key{display:inline-block;padding:0 .3em;font-family:monospace;background:#f4f4f4}
table{border-collapse:collapse;font-size:.85em} td,th{border:1px solid #ddd;padding:.15em .5em;text-align:left}
"""

SCRIPT = """
const scales = JSON.parse(document.getElementById('scales').textContent);
function heat(x){x=Math.min(1,Math.max(0,x));
 if(x<0.5){const f=x/0.5;return [255,255,Math.round(255-155*f)];}
 const f=(x-0.5)/0.5;return [Math.round(255-15*f),Math.round(255-175*f),Math.round(100-60*f)];}
function colour(metric){
 document.querySelectorAll('.tok').forEach(el=>{const v=parseFloat(el.dataset[metric]);
  const s=scales[metric];const c=heat((v-s[0])/(s[1]-s[0]));el.style.backgroundColor='rgb('+c.join(',')+')';});
 document.getElementById('scale-min').textContent=scales[metric][0].toFixed(2);
 document.getElementById('scale-max').textContent=scales[metric][1].toFixed(2);
 document.getElementById('scale-name').textContent=document.querySelector('input[value='+metric+']').dataset.label;}
document.querySelectorAll('input[name=metric]').forEach(r=>r.addEventListener('change',e=>colour(e.target.value)));
document.querySelectorAll('input.mark').forEach(cb=>cb.addEventListener('change',()=>{
 document.querySelectorAll('.tok').forEach(el=>el.classList.toggle('on-'+cb.value,cb.checked));}));
const wanted=new URLSearchParams(location.hash.slice(1)).get('metric');
if(wanted&&scales[wanted]!==undefined){document.querySelector('input[value='+wanted+']').checked=true;colour(wanted);}
document.body.dataset.ready='1';
"""


def _token_span(rec: dict, t: int, metric: str, scales: dict, marks: dict[str, list[bool]]) -> str:
    token = rec["tokens"][t]
    values = {m: float(rec[m][t]) for m in METRICS if m in rec}
    classes = ["tok"]
    picked_by = []
    for name, mask in marks.items():
        if mask[t]:
            classes.append(MARKS[name][0])
            classes.append(f"on-{name}")
            picked_by.append(MARKS[name][1])
    r, g, b = heat(_unit(values.get(metric, 0.0), scales[metric]))
    data = " ".join(f'data-{m}="{v:.4f}"' for m, v in values.items())
    tip = f"{token!r} | " + " ".join(f"{m}={v:.3f}" for m, v in values.items())
    if picked_by:
        tip += " | " + "; ".join(picked_by)
    text = html.escape(_show(token))
    if token.endswith("\n"):
        text += "\n"
    return (
        f'<span class="{" ".join(classes)}" {data} style="background-color:rgb({r},{g},{b})" '
        f'title="{html.escape(tip, quote=True)}">{text}</span>'
    )


def render_html(
    records: Sequence[dict], *, title: str = "ict token map", metric: str = "js"
) -> str:
    """A self-contained HTML page with one coloured token map per record.

    Colour = `metric` (switchable in the page between H, H2 and JS); marks = ICT picks (blue
    underline), 20-Entropy picks (green overline), STAPO-silenced tokens (purple strike-through).
    Opening the page as `map.html#metric=entropy` starts it coloured by that metric."""
    if metric not in METRICS:
        raise DataError(f"unknown metric {metric!r}; choose one of {sorted(METRICS)}")
    for i, rec in enumerate(records):
        validate_record(rec, i)
    present = [m for m in METRICS if any(m in rec for rec in records)] or [metric]
    if metric not in present:
        metric = present[0]
    scales = {m: _scale(records, m) for m in present}
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        '<div class="controls"><b>Colour by:</b> ',
    ]
    for m in present:
        checked = " checked" if m == metric else ""
        out.append(
            f'<label><input type="radio" name="metric" value="{m}" data-label="{html.escape(METRICS[m])}"{checked}> {html.escape(METRICS[m])}</label>'
        )
    names = [n for n in MARKS if any(n in rec.get("selected", {}) for rec in records)]
    out.append("<br><b>Show:</b> ")
    for name in names:
        out.append(
            f'<label><input type="checkbox" class="mark" value="{name}" checked> <span class="tok {MARKS[name][0]} on-{name}">abc</span> {MARKS[name][1]}</label>'
        )
    out.append(
        f'<div class="legend"><span id="scale-min">{scales[metric][0]:.2f}</span><span class="bar"></span><span id="scale-max">{scales[metric][1]:.2f}</span>'
        f'<span>(<span id="scale-name">{html.escape(METRICS[metric])}</span>; colour spans the page\'s 1st to 99th percentile; hover a token for its values)</span></div></div>'
    )
    for i, rec in enumerate(records):
        marks = {
            n: _mark_mask(n, rec["selected"][n]) for n in names if n in rec.get("selected", {})
        }
        summary = response_summary(rec)
        spans = "".join(
            _token_span(rec, t, metric, scales, marks) for t in range(len(rec["tokens"]))
        )
        parts = [f"{summary['tokens']} tokens"]
        if rec.get("reward") is not None:
            parts.insert(0, f"reward {rec['reward']:g}")
        parts += [f"{name} {frac:.0%}" for name, frac in summary["fraction"].items()]
        parts += [
            f"Jaccard {k.replace('|', ' vs ')} {_fmt(v)}" for k, v in summary["jaccard"].items()
        ]
        if summary["top_ict"]:
            parts.append(
                "ICT picks: "
                + ", ".join(
                    f'<span class="key">{html.escape(_key(t))}</span>×{c}'
                    for t, c in summary["top_ict"]
                )
            )
        step = f"step {rec['step']} · " if "step" in rec else ""
        out.append(
            f'<div class="resp" id="r{i}"><h2>{step}response {i + 1}</h2>'
            f'<div class="prompt">{html.escape(str(rec.get("prompt", "")))}</div>'
            f'<div class="text">{spans}</div><div class="summary">{" · ".join(parts)}</div></div>'
        )
    rows = top_tokens(records, "ict")
    if rows:
        out.append(
            "<h2>Tokens ICT picks most often</h2><table><tr><th>token</th><th>picked</th><th>seen</th><th>rate</th></tr>"
        )
        for tok, c, s in rows:
            out.append(
                f'<tr><td><span class="key">{html.escape(_key(tok))}</span></td><td>{c}</td><td>{s}</td><td>{c / s:.0%}</td></tr>'
            )
        out.append("</table>")
    out.append(f'<script type="application/json" id="scales">{json.dumps(scales)}</script>')
    out.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(out)


ANSI_HEAT = [231, 230, 229, 228, 221, 214, 208, 202, 196]


def render_terminal(
    records: Sequence[dict], *, metric: str = "js", selector: str = "ict", color: bool = True
) -> str:
    """Plain-terminal token map: background = `metric` in 9 ANSI-256 shades, the tokens `selector`
    picks are underlined and bold; with color=False they are wrapped in «» and no escapes are used."""
    if metric not in METRICS:
        raise DataError(f"unknown metric {metric!r}; choose one of {sorted(METRICS)}")
    for i, rec in enumerate(records):
        validate_record(rec, i)
    scale = _scale(records, metric)
    lines = []
    if color:
        lines.append(
            f"colour: {METRICS[metric]} (light <= {scale[0]:.2f}, red >= {scale[1]:.2f}); underlined bold = picked by {selector}"
        )
    else:
        lines.append(f"«token» = picked by {selector}")
    for i, rec in enumerate(records):
        sel = rec.get("selected", {}).get(selector, [0] * len(rec["tokens"]))
        mask = _mark_mask(selector, sel)
        pieces = []
        for t, tok in enumerate(rec["tokens"]):
            shown = tok.replace("\t", "→")
            if color:
                v = _unit(float(rec[metric][t]), scale) if metric in rec else 0.0
                shade = ANSI_HEAT[
                    min(len(ANSI_HEAT) - 1, max(0, int(v * (len(ANSI_HEAT) - 1) + 0.5)))
                ]
                style = f"\x1b[48;5;{shade};38;5;16" + (";1;4" if mask[t] else "") + "m"
                segments = shown.split("\n")
                pieces.append("\n".join(f"{style}{s}\x1b[0m" if s else "" for s in segments))
            else:
                pieces.append(f"«{shown}»" if mask[t] else shown)
        summary = response_summary(rec)
        head = f"--- response {i + 1}" + (f" (step {rec['step']})" if "step" in rec else "")
        if rec.get("reward") is not None:
            head += f", reward {rec['reward']:g}"
        stats = ", ".join(f"{k} {v:.0%}" for k, v in summary["fraction"].items())
        jac = ", ".join(
            f"Jaccard {k.replace('|', ' vs ')} {_fmt(v)}" for k, v in summary["jaccard"].items()
        )
        lines += [
            head,
            "".join(pieces),
            f"    [{summary['tokens']} tokens; selected: {stats}{'; ' + jac if jac else ''}]",
        ]
    return "\n".join(lines) + "\n"
