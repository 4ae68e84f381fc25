"""Build of the optional C extension (the fast new-family trace decoder).

Everything else about the package is declared in pyproject.toml. The
extension is optional at run time: without it gmpscope uses the pure-Python
decoder (also forced with GMPSCOPE_PURE=1).
"""

from glob import glob

from setuptools import Extension, setup

setup(
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
