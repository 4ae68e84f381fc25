"""The house: imports only point down.

Every ``.py`` file under collectors/, ingest/, app/ and gmpscope/ is parsed
with :mod:`ast`; every import counts (module level and inside functions,
relative ones resolved). The checks:

(a) direction between the packages, lowest first: collectors < ingest < app <
    gmpscope. The decoder and collectors import no web framework or database
    (flask, dash, sqlalchemy, plotly, werkzeug); ingest imports neither Dash nor
    Plotly;
(b) inside ingest, the sub-packages in order, lowest first: the top-level
    modules (config, codes, columns, extensions, timings, memory, forking, npy) < store <
    derive < load < views < diagnose < live < api. A module imports its own
    sub-package and lower ones only;
(c) no import cycle between modules of the tree (imports under
    ``if TYPE_CHECKING:`` do not run, so they are left out of this check, not
    out of the others);
(d) no module over :data:`MAX_LINES` lines (tests/ and bench/ are reported as a
    warning).

``importlib.import_module("...")`` with a string is not an import statement and
is not seen here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The packages, lowest first: each may import only itself and the ones before it.
PACKAGES = ("collectors", "ingest", "app", "gmpscope")
#: Third-party packages a package must not import (by top-level name or its prefix).
FORBIDDEN_EXTERNAL = {
    "collectors": ("flask", "dash", "sqlalchemy", "plotly", "werkzeug"),
    "ingest": ("dash", "plotly"),
}
#: ingest's sub-packages, lowest first; the top-level modules (ingest/*.py) are below all.
INGEST_LAYERS = ("store", "derive", "load", "views", "diagnose", "live", "api")
INGEST_TOP = ("config", "codes", "columns", "extensions", "timings", "memory", "forking", "npy")
MAX_LINES = 600
#: Also measured, but only reported: test and benchmark code.
REPORTED_ONLY = ("tests", "bench")


@dataclass(frozen=True)
class Edge:
    """One import: ``importer`` (a module of the tree) imports ``target``."""

    importer: str
    path: str
    line: int
    #: The dotted name imported, as written (relative ones resolved).
    target: str
    #: The module of the tree it names, or None for a third-party/stdlib module.
    internal: str | None
    type_checking: bool

    def where(self) -> str:
        return f"{self.path}:{self.line}"


# --------------------------------------------------------------------------
# reading the tree


def module_name(rel: Path) -> str:
    parts = rel.with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def tree_sources(root: Path = ROOT, packages: Iterable[str] = PACKAGES
                 ) -> dict[str, tuple[str, str]]:
    """Module name -> (path relative to ``root``, source) for every .py file."""
    out: dict[str, tuple[str, str]] = {}
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            rel = f.relative_to(root)
            if any(p == "__pycache__" or p.startswith(".") for p in rel.parts):
                continue
            out[module_name(rel)] = (str(rel), f.read_text(encoding="utf-8"))
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, guarded: bool = False) -> Iterable[tuple[ast.AST, bool]]:
    """Every node under ``node`` with whether it sits under ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            yield child, guarded
            for n in child.body:
                yield n, True
                yield from _walk(n, True)
            for n in child.orelse:
                yield n, guarded
                yield from _walk(n, guarded)
            continue
        yield child, guarded
        yield from _walk(child, guarded)


def _resolve(name: str, modules: Mapping[str, object]) -> str | None:
    """The module of the tree that ``name`` names: itself or its longest prefix."""
    if name.split(".")[0] not in {m.split(".")[0] for m in modules}:
        return None
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in modules:
            return cand
        parts.pop()
    return None


def imports_of(module: str, path: str, source: str,
               modules: Mapping[str, object]) -> list[Edge]:
    """The imports of one module (relative imports resolved against its package)."""
    tree = ast.parse(source, filename=path)
    is_pkg = path.endswith("__init__.py")
    package = module.split(".") if is_pkg else module.split(".")[:-1]
    edges: list[Edge] = []

    def add(target: str, line: int, guarded: bool) -> None:
        internal = _resolve(target, modules)
        if internal != module:
            edges.append(Edge(module, path, line, target, internal, guarded))

    for node, guarded in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, guarded)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                keep = len(package) - (node.level - 1)
                base = package[:keep] if keep >= 0 else []
                base_name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                base_name = node.module or ""
            for alias in node.names:
                # ``from pkg import mod`` imports the module pkg.mod when there is one.
                sub = f"{base_name}.{alias.name}" if alias.name != "*" else base_name
                add(sub if _resolve(sub, modules) == sub else base_name, node.lineno, guarded)
    return edges


def all_edges(sources: Mapping[str, tuple[str, str]]) -> list[Edge]:
    """Every import of the tree, once per (module, line, imported module)."""
    return list(dict.fromkeys(e for mod, (path, src) in sources.items()
                              for e in imports_of(mod, path, src, sources)))


# --------------------------------------------------------------------------
# the checks


def ingest_layer(module: str) -> int | None:
    """The rank of an ingest module (0: the top-level modules), None for an unknown
    sub-package."""
    parts = module.split(".")
    if parts[0] != "ingest":
        raise ValueError(module)
    if len(parts) == 1:
        return 0
    if len(parts) == 2 and parts[1] in INGEST_TOP:
        return 0
    if parts[1] in INGEST_LAYERS:
        return 1 + INGEST_LAYERS.index(parts[1])
    return None


def _layer_name(rank: int) -> str:
    return "the top-level modules" if rank == 0 else f"ingest.{INGEST_LAYERS[rank - 1]}"


def direction_violations(edges: Iterable[Edge]) -> list[str]:
    """(a) and (b): imports running back up, as 'file:line -> module (why)'."""
    out: list[str] = []
    for e in edges:
        src_pkg = e.importer.split(".")[0]
        if src_pkg not in PACKAGES:
            continue
        if e.internal is not None:
            dst_pkg = e.internal.split(".")[0]
            if dst_pkg in PACKAGES and PACKAGES.index(dst_pkg) > PACKAGES.index(src_pkg):
                out.append(f"{e.where()} -> {e.target} ({src_pkg} must not import {dst_pkg})")
                continue
            if src_pkg == dst_pkg == "ingest":
                lo, hi = ingest_layer(e.importer), ingest_layer(e.internal)
                if lo is None or hi is None:
                    unknown = e.importer if lo is None else e.internal
                    out.append(f"{e.where()} -> {e.target} ({unknown} is in no ingest layer: "
                               f"add its sub-package to INGEST_LAYERS)")
                elif hi > lo:
                    out.append(f"{e.where()} -> {e.target} ({_layer_name(lo)} must not "
                               f"import {_layer_name(hi)}: ingest layers, lowest first: "
                               f"top-level < {' < '.join(INGEST_LAYERS)})")
        else:
            root = e.target.split(".")[0]
            banned = FORBIDDEN_EXTERNAL.get(src_pkg, ())
            if any(root == b or root.startswith(b + "_") for b in banned):
                out.append(f"{e.where()} -> {e.target} ({src_pkg} must not import {root})")
    return out


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp: list[str] = []
                    while True:
                        n = stack.pop()
                        on_stack.discard(n)
                        comp.append(n)
                        if n == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def cycle_violations(edges: Iterable[Edge]) -> list[str]:
    """(c): each import cycle with the imports that make it."""
    runtime = [e for e in edges if e.internal is not None and not e.type_checking]
    graph: dict[str, set[str]] = {}
    for e in runtime:
        assert e.internal is not None
        graph.setdefault(e.importer, set()).add(e.internal)
    out: list[str] = []
    for comp in strongly_connected(graph):
        members = set(comp)
        inside = dict.fromkeys(f"{e.where()} -> {e.internal}" for e in sorted(
            runtime, key=lambda e: (e.path, e.line)) if e.importer in members
            and e.internal in members)
        out.append(f"cycle {' <-> '.join(comp)}:\n      " + "\n      ".join(inside))
    return out


def long_modules(root: Path, dirs: Iterable[str], limit: int = MAX_LINES) -> list[str]:
    """(d): 'path: N lines' for every .py file over ``limit`` lines."""
    out = []
    for d in dirs:
        for f in sorted((root / d).rglob("*.py")):
            rel = f.relative_to(root)
            if any(p == "__pycache__" or p.startswith(".") for p in rel.parts):
                continue
            n = len(f.read_text(encoding="utf-8").splitlines())
            if n > limit:
                out.append(f"{rel}: {n} lines (limit {limit})")
    return out


# --------------------------------------------------------------------------
# the tests


def _edges() -> list[Edge]:
    sources = tree_sources()
    assert len(sources) > 100, f"only {len(sources)} modules found under {PACKAGES}"
    edges = all_edges(sources)
    internal = [e for e in edges if e.internal is not None]
    assert len(internal) > 300, f"only {len(internal)} import edges inside the tree"
    return edges


def _fail(title: str, found: list[str]) -> None:
    assert not found, f"{title} ({len(found)}):\n  " + "\n  ".join(found)


def test_imports_point_down() -> None:
    _fail("imports running back up (file:line -> imported module)",
          direction_violations(_edges()))


def test_no_import_cycles() -> None:
    _fail("import cycles (file:line -> imported module)", cycle_violations(_edges()))


def test_modules_are_short() -> None:
    _fail(f"modules over {MAX_LINES} lines", long_modules(ROOT, PACKAGES))
    reported = long_modules(ROOT, REPORTED_ONLY)
    if reported:
        warnings.warn(f"test/bench files over {MAX_LINES} lines: {'; '.join(reported)}",
                      stacklevel=1)


def test_importing_every_collector_module_loads_no_framework() -> None:
    """What the source check promises, at run time: the collectors pull in nothing
    of ingest, the app or a web framework or database, even indirectly."""
    forbidden = (*FORBIDDEN_EXTERNAL["collectors"], "app", "ingest", "gmpscope")
    modules = sorted(m for m in tree_sources(packages=("collectors",)))
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {forbidden!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "", f"framework modules loaded: {out.stdout.strip()}"


# --------------------------------------------------------------------------
# the checker itself: it must see what it is meant to see


def _synthetic(files: Mapping[str, str]) -> list[Edge]:
    sources = {module_name(Path(p)): (p, src) for p, src in files.items()}
    return all_edges(sources)


def test_checker_flags_synthetic_violations() -> None:
    edges = _synthetic({
        "collectors/__init__.py": "",
        "collectors/dec.py": "def f():\n    import flask\n    from ingest.store import db\n",
        "ingest/__init__.py": "",
        "ingest/config.py": "from ingest.store.db import x\n",
        "ingest/store/__init__.py": "",
        "ingest/store/db.py": "from ..views import q\n",
        "ingest/views/__init__.py": "from . import q\n",
        "ingest/views/q.py": "from ingest.store import db\nimport plotly.graph_objects\n",
        "ingest/api/__init__.py": "",
        "ingest/api/x.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                            "    from app import page\n"),
        "ingest/weird/__init__.py": "from ingest import config\n",
        "app/__init__.py": "",
        "app/page.py": "from ingest.api import x\nfrom gmpscope import cli\n",
        "gmpscope/__init__.py": "",
        "gmpscope/cli.py": "from app import page\n",
    })
    found = direction_violations(edges)
    expect = [
        "collectors/dec.py:2 -> flask (collectors must not import flask)",
        "collectors/dec.py:3 -> ingest.store.db (collectors must not import ingest)",
        "ingest/config.py:1 -> ingest.store.db (the top-level modules must not import "
        "ingest.store",
        "ingest/store/db.py:1 -> ingest.views.q (ingest.store must not import ingest.views",
        "ingest/views/q.py:2 -> plotly.graph_objects (ingest must not import plotly)",
        "ingest/api/x.py:3 -> app.page (ingest must not import app)",
        "ingest/weird/__init__.py:1 -> ingest.config (ingest.weird is in no ingest layer",
        "app/page.py:2 -> gmpscope.cli (app must not import gmpscope)",
    ]
    for want in expect:
        assert any(f.startswith(want) for f in found), (want, found)
    assert len(found) == len(expect), found
    # The relative import resolves; the store <-> views and app <-> gmpscope
    # cycles are found, the TYPE_CHECKING import (ingest.api.x -> app.page,
    # app.page -> ingest.api.x) makes none.
    cycles = cycle_violations(edges)
    assert [c.split(":")[0] for c in cycles] == [
        "cycle app.page <-> gmpscope.cli", "cycle ingest.store.db <-> ingest.views.q"], cycles
    assert "ingest/store/db.py:1 -> ingest.views.q" in cycles[1]
    assert "ingest/views/q.py:1 -> ingest.store.db" in cycles[1]


def test_checker_on_the_real_tree_sees_known_imports() -> None:
    edges = _edges()
    seen = {(e.importer, e.internal) for e in edges}
    # a module-level import, a relative one would resolve the same way
    assert ("app.server", "ingest.api.blueprint") in seen
    assert ("gmpscope.commands.ingest_server", "ingest.api.server") in seen  # in a function


def test_long_module_check(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "pkg" / "ok.py").write_text("x = 1\n" * MAX_LINES)
    assert long_modules(tmp_path, ["pkg"]) == [f"pkg/big.py: {MAX_LINES + 1} lines "
                                               f"(limit {MAX_LINES})"]
