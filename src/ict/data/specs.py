"""Task spec strings: "name?key=value&key2=value2", their labels and file-name stems."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from ict.errors import DataError


def parse_value(text: str) -> Any:
    """ "2" -> 2, "0.5" -> 0.5, "true" -> True, "[1,2]" -> [1, 2], anything else stays a string."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split "name?a=1&b=x" into ("name", {"a": 1, "b": "x"})."""
    name, _, query = spec.strip().partition("?")
    if not name:
        raise DataError(f"empty task name in spec {spec!r}")
    options = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        options[key] = parse_value(value)
    if query and not options:
        raise DataError(f"cannot read the options of {spec!r}; write name?key=value&key2=value2")
    return name, options


def task_label(spec: str) -> str:
    """A short stable name for outputs and metric keys: the spec without whitespace."""
    return re.sub(r"\s+", "", spec)


def short_labels(labels) -> dict[str, str]:
    """{label: what a console or a legend calls it}: the task's name without its options
    ("rg:basic_arithmetic?template=...&operators=..." -> "rg:basic_arithmetic"), numbered when
    two labels share a name ("rg:chain_sum (1)", "rg:chain_sum (2)"). Outputs and metric keys
    keep the full label (task_label)."""
    labels = list(labels)
    names = [label.split("?", 1)[0] for label in labels]
    out, seen = {}, {}
    for label, name in zip(labels, names, strict=True):
        if names.count(name) > 1:
            seen[name] = seen.get(name, 0) + 1
            name = f"{name} ({seen[name]})"
        out[label] = name
    return out


def file_stem(label: str) -> str:
    """A file-name-safe version of a label ("rg:chain_sum?a=1" -> "rg_chain_sum_a=1")."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", label).strip("_")
