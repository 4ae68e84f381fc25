"""The decoder and collectors are pure: no web framework or database imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("flask", "dash", "sqlalchemy", "plotly", "werkzeug", "app", "ingest")


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_collectors_source_imports_nothing_impure() -> None:
    files = sorted((ROOT / "collectors").rglob("*.py"))
    assert files, "collectors/ has no Python modules"
    offenders = {
        str(f.relative_to(ROOT)): sorted(_imported_roots(f) & set(FORBIDDEN)) for f in files
    }
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"impure imports in collectors/: {offenders}"


def test_importing_every_collector_module_loads_no_framework() -> None:
    modules = sorted(
        ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for f in (ROOT / "collectors").rglob("*.py")
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "", f"framework modules loaded: {out.stdout.strip()}"
