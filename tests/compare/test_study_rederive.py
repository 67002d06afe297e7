"""The committed toy-cot-explore reports re-derive from their committed cells through the library:
cells.tar.gz (and companion/cells.tar.gz) restored into a temporary study directory, the preset's
`report` stage (ict.compare.study: the sections its `study.report` declares) writes the same
files. The pilot, the secondary endpoints and the companion's summary match byte for byte; the
comparison reports (report.md / report.json, the companion's too) match in every section except
the two the archives cannot feed (samples.jsonl is not archived: the ICT vs 20-Entropy overlap and
where the picks fall) and the run directories' paths in the settings."""

import json
import re
import tarfile
from pathlib import Path

import pytest

from ict.compare.presets import get_preset
from ict.compare.study import run_stage

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "reports" / "toy-cot-explore"
BYTE_EQUAL = ("secondary.md", "secondary.json", "pilot/pilot.md", "pilot/pilot.json",
              "pilot/pilot.html", "companion/companion.md")  # fmt: skip
FROM_SAMPLES = ("## Which tokens are selected: ICT vs 20-Entropy", "## Where the picks fall")
JSON_FROM_SAMPLES = ("overlap", "positions")


def sections_of(markdown: str) -> dict[str, str]:
    """{"## heading": its text} of a report (the text before the first heading under "")."""
    parts = re.split(r"^(## .*)$", markdown, flags=re.M)
    out = {"": parts[0]}
    out.update(zip(parts[1::2], parts[2::2], strict=True))
    out["## Settings"] = re.sub(r"Run directories .*", "", out.get("## Settings", ""))
    return out


def comparable(markdown: str) -> dict[str, str]:
    return {k: v for k, v in sections_of(markdown).items() if k not in FROM_SAMPLES}


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="the committed toy-cot-explore reports predate issue 46's verdict code (blocked t with "
    "Welch df, bootstrap stratified by warm start) and carry hand-added scope and errata "
    "(secondary.md, report.md): they re-derive once regenerated with the new code, which is the "
    "next step of issue 49's re-derivation (the closing note of 2026-12-04 says so)",
)
def test_the_committed_report_re_derives_from_its_cells(tmp_path):
    out, dest = tmp_path / "out", tmp_path / "dest"
    (out / "companion").mkdir(parents=True)
    with tarfile.open(COMMITTED / "cells.tar.gz") as tar:
        tar.extractall(out, filter="data")
    with tarfile.open(COMMITTED / "companion" / "cells.tar.gz") as tar:
        tar.extractall(out / "companion", filter="data")
    written = run_stage(get_preset("toy-cot-explore"), "report", out, dest=dest,
                        log=lambda line: None)  # fmt: skip
    assert [p.relative_to(dest).as_posix() for p in written] == [
        "pilot/pilot.md", "secondary.md", "report.md", "plots/frontier.png",
        "companion/companion.md",
    ]  # fmt: skip
    for name in BYTE_EQUAL:
        assert (dest / name).read_bytes() == (COMMITTED / name).read_bytes(), name
    for name in ("report", "companion/report"):
        made = json.loads((dest / f"{name}.json").read_text())
        kept = json.loads((COMMITTED / f"{name}.json").read_text())
        assert made["verdicts"] == kept["verdicts"] and made["metrics"] == kept["metrics"]
        for key in set(kept) - set(JSON_FROM_SAMPLES):
            assert made[key] == kept[key], (name, key)
        assert all(made.get(key) is None for key in JSON_FROM_SAMPLES)
        made_md = comparable((dest / f"{name}.md").read_text())
        kept_md = comparable((COMMITTED / f"{name}.md").read_text())
        assert list(made_md) == list(kept_md)
        for heading in kept_md:
            assert made_md[heading] == kept_md[heading], (name, heading)
