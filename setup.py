"""Build of the optional C extension and the package list.

Everything else about the package is declared in pyproject.toml. The
extensions are optional at run time: without ``_v2fast`` gmpscope uses the
pure-Python decoder (also forced with GMPSCOPE_PURE=1), without
``ingest.store._sqlitebulk`` the loader binds SQLite rows through Python. The browser assets live in the
root folder static/ and install as the data-only package ``gmpscope_static``
(app/server.py finds them through it, in a checkout and in a wheel alike).
"""

from glob import glob

from setuptools import Extension, find_packages, setup

#: Every extension's flags (the decoder adds -fno-strict-aliasing).
C_FLAGS = ["-O2", "-std=c11", "-fvisibility=hidden", "-Wall", "-Wextra",
                 "-Wno-unused-parameter", "-Wno-missing-field-initializers"]


def _ingest_extension(package: str, name: str, **kwargs: object) -> Extension:
    """The optional extension ``ingest.<package>._<name>`` from ingest/csrc/<name>.c
    (every ingest helper shares the headers there)."""
    return Extension(f"ingest.{package}._{name}", sources=[f"ingest/csrc/{name}.c"],
                     depends=sorted(glob("ingest/csrc/*.h")), optional=True,
                     extra_compile_args=C_FLAGS, **kwargs)


setup(
    packages=[*find_packages(include=["gmpscope*", "collectors*", "ingest*", "app*"]),
              "gmpscope_static"],
    package_dir={"gmpscope_static": "static"},
    ext_modules=[
        Extension(
            "collectors.gotrace._v2fast",
            sources=sorted(glob("collectors/gotrace/csrc/*.c")),
            depends=sorted(glob("collectors/gotrace/csrc/*.h")),
            extra_compile_args=[*C_FLAGS, "-fno-strict-aliasing"],
        ),
        # Binds the loader's integer rows into SQLite without Python objects
        # (ingest/store/sqlite_fast.py). Optional: without SQLite's headers the
        # build goes on and the loader binds through Python's sqlite3.
        _ingest_extension("store", "sqlitebulk", libraries=["sqlite3"]),
        # A trace's intervals read by SQL from the column files they are kept
        # in (ingest/store/interval_files.py). Optional: without it SQLite
        # keeps the intervals as rows.
        _ingest_extension("store", "intervalfiles", libraries=["sqlite3"]),
        # The interval order by counting sort and the intervals' ends
        # (ingest/derive/intervals.py); optional: numpy's sort gives the same order.
        _ingest_extension("derive", "intervalorder"),
        # Row groups into the loader's compact columns without giving up the
        # GIL (ingest/load/transitions_builder.py); optional: numpy does the same.
        _ingest_extension("load", "columnappend"),
        # One-pass reductions of the transitions (ingest/derive/intervals.py); optional:
        # the numpy forms give the same columns without it.
        _ingest_extension("derive", "summaries"),
        # The timeline's P lane set's rows in one pass
        # (ingest/derive/lanesets.py); optional: numpy sorts them instead.
        _ingest_extension("derive", "lanesets"),
        # The overview's per-bin sums of the goroutine intervals in one pass
        # (ingest/views/overview_series.py); optional: numpy gives the same sums.
        _ingest_extension("views", "binsums"),
        # A waiting profile's waits in one pass (ingest/views/pprof.py);
        # optional: numpy's masks and searches find the same waits.
        _ingest_extension("views", "waits"),
        # The state graph's Waiting edges split by category in one pass
        # (ingest/views/states_frames.py); optional: numpy's masks alike.
        _ingest_extension("views", "waitedges"),
        # Each goroutine's time per category in one pass
        # (ingest/views/goroutines.py); optional: numpy's weighted counts alike.
        _ingest_extension("views", "lanesums"),
        # Regions paired per goroutine and name in one pass
        # (ingest/load/pairing.py); optional: numpy's sorts pair them alike.
        _ingest_extension("load", "pairing"),
    ],
)
