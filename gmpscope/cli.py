"""The ``gmpscope`` command: one module per subcommand under gmpscope.commands."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from gmpscope import __version__
from gmpscope.errors import EXIT_FAILURE, CLIError

#: Subcommand name -> module under gmpscope.commands (imported only when used).
SUBCOMMANDS = {
    "decode": "decode",
    "ingest": "ingest",
    "ingest-server": "ingest_server",
    "record": "record",
    "serve": "serve",
    "view": "view",
    "export": "export",
    "diagnose": "diagnose",
    "live": "live",
    "pprof": "pprof",
    "sql": "sql",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gmpscope",
        description="See what the Go runtime really does: goroutines, threads, procs, "
        "the netpoller and syscalls.",
    )
    parser.add_argument("--version", action="version", version=f"gmpscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS.values():
        mod = importlib.import_module(f"gmpscope.commands.{module}")
        mod.add_parser(sub)
    return parser


def configure_process() -> None:
    """Process-wide settings of a gmpscope process, made before any work.

    Arrow's default allocator (mimalloc) keeps what a load frees for reuse,
    which the process never needs again: with the system allocator, which
    ingest.memory trims, ingesting the 25 MB benchmark trace peaks 50 MB
    lower and decoding it 40 MB lower, at the same speed (docs/ingest.md).
    Read by Arrow when its pool is first used; an explicit setting wins.

    numpy's OpenBLAS starts a thread per core when numpy is imported, and
    they spin-wait after any BLAS call: on two cores, ~0.08 s of CPU at the
    import and ~1% of an ingest's samples under ``perf``, taken from the
    insert worker and the decoder. gmpscope does no linear algebra worth a
    thread, so OpenBLAS runs on its caller (read when numpy loads it).
    """
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    configure_process()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except CLIError as e:
        print(f"gmpscope {args.command}: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        print(f"gmpscope {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        print(f"gmpscope {args.command}: {e.strerror or e}: {e.filename or ''}".rstrip(": "),
              file=sys.stderr)
        return EXIT_FAILURE


def entry() -> NoReturn:
    """The ``gmpscope`` console script."""
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()
