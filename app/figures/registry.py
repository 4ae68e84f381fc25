"""Every exportable diagram by name, collected from the figure modules.

Each module under ``app/figures/`` may define ``DIAGRAMS`` (name -> builder
``(DiagramSource, trace_id, options) -> go.Figure``). The registry imports them
all (the package's modules, found on disk, so a new module needs no edit here)
and answers ``build_figure(...)`` for the export CLI and API.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import plotly.graph_objects as go  # type: ignore[import-untyped]

import app.figures
from app.figures.source import DiagramSource

log = logging.getLogger("gmpscope.app.figures")

Builder = Callable[[DiagramSource, int, dict[str, str]], go.Figure]

#: Modules of the package that are not figure modules.
_NOT_FIGURES = frozenset({"registry", "source", "text"})


class UnknownDiagram(LookupError):
    """No diagram of that name; the message lists the known ones."""


@dataclass(frozen=True)
class Registry:
    """Diagram name -> builder and the module it comes from."""

    builders: dict[str, Builder]
    modules: dict[str, str]
    #: Figure modules that failed to import (module -> error), shown in errors.
    broken: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return sorted(self.builders)

    def builder(self, name: str) -> Builder:
        """The builder of ``name``; raises UnknownDiagram listing the known names."""
        try:
            return self.builders[name]
        except KeyError:
            known = ", ".join(self.names) or "none"
            msg = f"unknown diagram {name!r}; known diagrams: {known}"
            if self.broken:
                msg += " (not loaded: " + "; ".join(f"{m}: {e}" for m, e in
                                                  sorted(self.broken.items())) + ")"
            raise UnknownDiagram(msg) from None


def figure_modules() -> list[str]:
    """The figure modules of app.figures (module names, sorted)."""
    return sorted(m.name for m in pkgutil.iter_modules(app.figures.__path__)
                  if not m.ispkg and not m.name.startswith("_") and m.name not in _NOT_FIGURES)


def collect(modules: list[str] | None = None) -> Registry:
    """Import the figure modules and gather their ``DIAGRAMS``.

    A module that fails to import is logged and named in later errors rather
    than breaking every other diagram; two modules claiming one name is a bug
    and raises.
    """
    builders: dict[str, Builder] = {}
    owners: dict[str, str] = {}
    broken: dict[str, str] = {}
    for name in modules if modules is not None else figure_modules():
        try:
            mod = importlib.import_module(f"app.figures.{name}")
        except Exception as e:  # noqa: BLE001 - reported, see docstring
            log.warning("figure module app.figures.%s does not import: %s", name, e)
            broken[name] = f"{type(e).__name__}: {e}"
            continue
        diagrams = getattr(mod, "DIAGRAMS", None)
        if not isinstance(diagrams, Mapping):
            continue
        for diagram, build in diagrams.items():
            if diagram in owners and owners[diagram] != name:
                raise ValueError(f"diagram {diagram!r} is defined twice: in "
                                 f"app.figures.{owners[diagram]} and app.figures.{name}")
            builders[str(diagram)] = build
            owners[str(diagram)] = name
    return Registry(builders=builders, modules=owners, broken=broken)


def diagram_names() -> list[str]:
    """Every known diagram name, sorted."""
    return collect().names


def build_figure(source: DiagramSource, trace_id: int, diagram: str,
                 options: Mapping[str, str] | None = None) -> go.Figure:
    """Build ``diagram`` of a trace with ``options``; raises UnknownDiagram.

    Builders raise LookupError for a missing trace and ValueError for bad options.
    """
    build = collect().builder(diagram)
    return build(source, trace_id, dict(options or {}))
