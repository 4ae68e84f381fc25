"""``gmpscope export TRACE_OR_ID (--diagram NAME | --table NAME) --format FMT -o FILE``:
a figure as SVG/PNG/HTML (state graphs also as Mermaid/DOT text), or a table as
CSV/Parquet, without a server; ``--format perfetto`` (no diagram or table): the
whole trace as a Perfetto protobuf trace (docs/perfetto.md).

TRACE_OR_ID is a stored trace id, or the path of a raw trace or decoded Parquet
directory: found by its content hash when stored, ingested first otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from gmpscope import trace_ref
from gmpscope.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, CLIError

TABLE_FORMATS = ("csv", "parquet")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        help="write a figure (SVG, PNG, HTML, Mermaid, DOT), a table (CSV, Parquet) "
        "or the trace for Perfetto",
        description="Export one diagram of a trace as SVG, PNG or standalone HTML (state "
        "graphs also as Mermaid or Graphviz DOT text), or one of its tables as CSV or "
        "Parquet, or (--format perfetto) the whole trace as a Perfetto protobuf trace for "
        "ui.perfetto.dev. TRACE_OR_ID is a stored trace id or a trace file (ingested first "
        "when it is not stored yet). `--list` shows the diagrams and tables.",
    )
    p.add_argument("trace", nargs="?", metavar="TRACE_OR_ID",
                   help="stored trace id, or a raw trace / decoded Parquet directory")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--diagram", metavar="NAME", help="diagram to export (see --list)")
    what.add_argument("--table", metavar="NAME", help="table to export as csv or parquet")
    what.add_argument("--list", action="store_true", help="list diagrams and tables, exit")
    p.add_argument("--format", "-f", metavar="FMT",
                   help="svg, png, html, mermaid, dot (diagrams); csv, parquet (tables); "
                   "perfetto (the whole trace); default: from the -o file's extension")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="output file ('-' for stdout)")
    p.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE",
                   help="diagram option (t1, t2, mode, resource, group, width, height, "
                   "scale...) or table window (t1, t2 in trace ns); repeatable")
    p.add_argument("--db", metavar="URL", help="database URL (default: $GMPSCOPE_DB, else "
                   "sqlite:///$GMPSCOPE_DATA/gmpscope.db)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="raw traces, caches and the default database (default: $GMPSCOPE_DATA)")
    p.set_defaults(run=run)


_EXT_FORMATS = {".svg": "svg", ".png": "png", ".html": "html", ".htm": "html",
                ".mmd": "mermaid", ".mermaid": "mermaid", ".dot": "dot", ".gv": "dot",
                ".csv": "csv", ".parquet": "parquet", ".pftrace": "perfetto",
                ".perfetto-trace": "perfetto"}


def parse_options(items: list[str]) -> dict[str, str]:
    """KEY=VALUE strings to a dict; raises CLIError for a malformed one."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--option wants KEY=VALUE, not {item!r}", EXIT_BAD_INPUT)
        out[key.strip()] = value
    return out


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format).lower()
    if args.output and args.output != "-":
        fmt = _EXT_FORMATS.get(Path(args.output).suffix.lower())
        if fmt:
            return fmt
    raise CLIError("give --format (or an -o file with a known extension)", EXIT_BAD_INPUT)


def resolve_trace(engine: Any, settings: Any, ref: str) -> int:
    """A stored trace id from an id or a trace path (ingested when new)."""
    return trace_ref.resolve_trace(engine, settings, ref, "export")


def _write(output: str, write: Any) -> None:
    """Run ``write(binary_file)`` into ``output`` atomically (or to stdout for '-')."""
    if output == "-":
        write(sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    dest = Path(output)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        # mkstemp makes the file 0600; give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _list() -> int:
    from app.figures.registry import collect
    from ingest.views.tables import TABLES

    reg = collect()
    print("diagrams (svg, png, html; states also mermaid, dot):")
    for name in reg.names:
        print(f"  {name}\t(app.figures.{reg.modules[name]})")
    for mod, err in sorted(reg.broken.items()):
        print(f"  [app.figures.{mod} not loaded: {err}]")
    print("tables (csv, parquet):")
    print("  " + ", ".join(TABLES))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    if not args.trace:
        raise CLIError("give TRACE_OR_ID (a stored trace id or a trace file)", EXIT_BAD_INPUT)
    if not args.output:
        raise CLIError("give -o FILE ('-' for stdout)", EXIT_BAD_INPUT)
    fmt = _format(args)
    if fmt == "perfetto":
        if args.diagram or args.table or args.option:
            raise CLIError("--format perfetto exports the whole trace: no --diagram, "
                           "--table or --option", EXIT_BAD_INPUT)
    elif not args.diagram and not args.table:
        raise CLIError("give --diagram NAME or --table NAME (--list shows them), or "
                       "--format perfetto", EXIT_BAD_INPUT)
    options = parse_options(args.option)

    from ingest.config import Settings
    from ingest.store.db import make_engine

    settings = Settings.from_env(db_url=args.db, data_dir=args.data_dir)
    try:
        engine = make_engine(settings.db_url, busy_timeout_ms=settings.busy_timeout_ms)
    except ValueError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    try:
        trace_id = resolve_trace(engine, settings, args.trace)
        if fmt == "perfetto":
            _export_perfetto(engine, settings, trace_id, args.output)
        elif args.table:
            _export_table(engine, settings, trace_id, args.table, fmt, options, args.output)
        else:
            _export_diagram(engine, settings, trace_id, args.diagram, fmt, options,
                            args.output)
    finally:
        engine.dispose()
    return EXIT_OK


def _export_diagram(engine: Any, settings: Any, trace_id: int, diagram: str, fmt: str,
                    options: dict[str, str], output: str) -> None:
    from app.exporting import ExportError, export_diagram
    from app.figures.source import DiagramSource
    from ingest.derive.frames import FrameStore

    source = DiagramSource(engine=engine, frames=FrameStore(engine, settings.data_dir))
    try:
        out = export_diagram(source, trace_id, diagram, fmt, options)
    except LookupError as e:
        raise CLIError(_message(e), EXIT_BAD_INPUT) from None
    except ValueError as e:
        raise CLIError(str(e), EXIT_BAD_INPUT) from None
    except ExportError as e:
        code = EXIT_FAILURE if "Chromium" in str(e) else EXIT_BAD_INPUT
        raise CLIError(str(e), code) from None
    _write(output, lambda f: f.write(out.data))


def _export_table(engine: Any, settings: Any, trace_id: int, table: str, fmt: str,
                  options: dict[str, str], output: str) -> None:
    import io

    from ingest.views import tables as et

    if fmt not in TABLE_FORMATS:
        raise CLIError(f"tables export as csv or parquet, not {fmt!r}", EXIT_BAD_INPUT)
    unknown = sorted(set(options) - {"t1", "t2"})
    if unknown:
        raise CLIError(f"tables take the options t1 and t2 only, not {', '.join(unknown)}",
                       EXIT_BAD_INPUT)
    try:
        t1 = int(options["t1"]) if options.get("t1") else None
        t2 = int(options["t2"]) if options.get("t2") else None
        et.check_request(engine, trace_id, table, t1, t2)
    except LookupError as e:
        raise CLIError(_message(e), EXIT_BAD_INPUT) from None
    except ValueError as e:
        raise CLIError(f"bad table window: {e}", EXIT_BAD_INPUT) from None

    def write(f: Any) -> None:
        if fmt == "csv":
            text = io.TextIOWrapper(f, encoding="utf-8", newline="", write_through=True)
            try:
                et.write_csv(engine, trace_id, table, text, t1, t2)
                text.flush()
            finally:
                text.detach()
        else:
            et.write_parquet(engine, trace_id, table, f, t1, t2)

    if fmt == "parquet" and output == "-":
        raise CLIError("parquet cannot go to stdout: give -o FILE", EXIT_BAD_INPUT)
    _write(output, write)


def _export_perfetto(engine: Any, settings: Any, trace_id: int, output: str) -> None:
    from ingest.derive.frames import FrameStore
    from ingest.views import perfetto

    frames = FrameStore(engine, settings.data_dir).get(trace_id)

    def write(f: Any) -> None:
        for chunk in perfetto.stream(engine, frames):
            f.write(chunk)

    _write(output, write)


def _message(e: LookupError) -> str:
    # KeyError reprs its argument; the others carry a readable message.
    return str(e.args[0]) if e.args else type(e).__name__
