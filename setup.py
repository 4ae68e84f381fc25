"""Build of the optional C extension and the package list.

Everything else about the package is declared in pyproject.toml. The
extension is optional at run time: without it gmpscope uses the pure-Python
decoder (also forced with GMPSCOPE_PURE=1). The browser assets live in the
root folder static/ and install as the data-only package ``gmpscope_static``
(app/server.py finds them through it, in a checkout and in a wheel alike).
"""

from glob import glob

from setuptools import Extension, find_packages, setup

setup(
    packages=[*find_packages(include=["gmpscope*", "collectors*", "ingest*", "app*"]),
              "gmpscope_static"],
    package_dir={"gmpscope_static": "static"},
    ext_modules=[
        Extension(
            "collectors.gotrace._v2fast",
            sources=sorted(glob("collectors/gotrace/csrc/*.c")),
            depends=sorted(glob("collectors/gotrace/csrc/*.h")),
            extra_compile_args=["-O2", "-std=c11", "-fvisibility=hidden", "-Wall", "-Wextra",
                                "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers", "-fno-strict-aliasing"],
        )
    ],
)
