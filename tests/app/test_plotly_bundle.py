"""The pages load plotly.js's basic partial bundle (static/vendor/) instead of Dash's full
one: it must be the same plotly.js version as the Python package's, hold every trace
type a gmpscope figure uses, and be the one the served pages load."""

from __future__ import annotations

import re
from pathlib import Path

import plotly  # type: ignore[import-untyped]
import plotly.graph_objects as go  # type: ignore[import-untyped]
from plotly.basedatatypes import BaseTraceType  # type: ignore[import-untyped]

from tests.support.server import Served

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "static" / "vendor" / "plotly-basic.min.js"
FULL = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def header_version(path: Path) -> str:
    head = path.read_text(encoding="utf-8", errors="replace")[:400]
    m = re.search(r"plotly\.js\b.*?\bv(\d+\.\d+\.\d+)", head)
    assert m, f"no plotly.js version in the header of {path}"
    return m.group(1)


def bundle_trace_types(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', text))


def trace_classes() -> dict[str, str]:
    """plotly.graph_objects trace class name -> its trace type ("Scattergl" -> "scattergl")."""
    out = {}
    for name in dir(go):
        cls = getattr(go, name)
        if isinstance(cls, type) and issubclass(cls, BaseTraceType) and cls is not BaseTraceType:
            out[name] = cls().type
    return out


def used_trace_types() -> dict[str, set[str]]:
    """Trace type -> the app/ files that make such traces (go.X(...) or {"type": "x"})."""
    classes = trace_classes()
    types = set(classes.values())
    used: dict[str, set[str]] = {}
    for path in (REPO / "app").rglob("*.py"):
        text = path.read_text()
        found = {classes[c] for c in re.findall(r"\bgo\.([A-Z]\w*)\(", text) if c in classes}
        found |= {t for t in re.findall(r"""["']type["']\s*:\s*["'](\w+)["']""", text)
                  if t in types}
        for t in found:
            used.setdefault(t, set()).add(str(path.relative_to(REPO)))
    return used


def test_same_plotly_js_version_as_the_python_package() -> None:
    assert header_version(BUNDLE) == header_version(FULL), (
        "plotly's Python package moved to another plotly.js: refresh "
        "static/vendor/plotly-basic.min.js (static/vendor/README.md)")


def test_every_trace_type_the_app_draws_is_in_the_bundle() -> None:
    in_bundle = bundle_trace_types(BUNDLE)
    assert {"bar", "scatter"} <= in_bundle
    used = used_trace_types()
    assert {"bar", "scatter"} <= set(used), "the scan finds the figures' traces"
    missing = {t: sorted(files) for t, files in used.items() if t not in in_bundle}
    assert not missing, f"trace types missing from the basic bundle: {missing}"


def test_pages_load_the_basic_bundle_only(samples_server: Served) -> None:
    html = samples_server.get("/").text
    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert any("vendor/plotly-basic.min.js" in s for s in scripts), scripts
    assert not any("package_data/plotly" in s for s in scripts), "Dash's full bundle too"
    # Chunks only some pages need load on demand, not on every page.
    assert not any("async-mathjax" in s or "async-table" in s for s in scripts), scripts
    assert any("async-graph" in s for s in scripts)
    bundle = next(s for s in scripts if "plotly-basic" in s)
    assert samples_server.get(bundle).status_code == 200


def test_pages_load_no_polyfill_but_the_regenerator_runtime(samples_server: Served) -> None:
    """Babel's polyfill is left out (app.server.POLYFILL); the one thing of it Dash's
    bundles call, the global ``regeneratorRuntime``, is vendored and loads first."""
    html = samples_server.get("/").text
    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert not any("polyfill" in s for s in scripts), scripts
    runtime = [i for i, s in enumerate(scripts) if "vendor/regenerator-runtime.js" in s]
    renderer = [i for i, s in enumerate(scripts) if "dash_renderer" in s]
    assert runtime and renderer and runtime[0] < renderer[0], scripts
    assert samples_server.get(scripts[runtime[0]]).status_code == 200


def test_dash_bundles_still_need_the_regenerator_runtime() -> None:
    """When Dash's bundles stop calling the global ``regeneratorRuntime``, the vendored
    static/vendor/regenerator-runtime.js can go (static/vendor/README.md)."""
    import dash

    root = Path(dash.__file__).parent
    bundles = [root / "dash-renderer" / "build" / "dash_renderer.min.js",
               root / "dcc" / "dash_core_components.js", root / "dash_table" / "bundle.js"]
    assert all("regeneratorRuntime.mark(" in b.read_text(encoding="utf-8") for b in bundles)
    vendored = (REPO / "static" / "vendor" / "regenerator-runtime.js").read_text()
    assert "regeneratorRuntime = runtime" in vendored
    assert (REPO / "static" / "vendor" / "regenerator-runtime-LICENSE").is_file()
