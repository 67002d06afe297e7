import subprocess
import sys

MODULES = [
    "bootstrap", "distributions", "endpoints", "equivalence", "health", "hierarchical",
    "intervals", "multiplicity", "power", "problem_tests", "seed_tests", "verdict",
]  # fmt: skip


def test_evidence_imports_neither_torch_nor_scipy():
    code = (
        "import sys\n"
        + "".join(f"import ict.evidence.{m}\n" for m in MODULES)
        + "print(sorted(m for m in ('torch', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_module_is_listed():
    from pathlib import Path

    import ict.evidence

    found = {p.stem for p in Path(ict.evidence.__file__).parent.glob("*.py")} - {"__init__"}
    assert found == set(MODULES)
