"""The one thing pyproject.toml cannot declare without an experimental table: the
optional compiled record path of the CUPTI backend (cupti_ext/_native.c, plain C loaded
with ctypes, no Python API). Where it does not build, the numpy path gives the same
results (docs/kernel-timing.md)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pacekeeper.cupti_ext._native",
            sources=["cupti_ext/_native.c"],
            # No fused multiply-adds: the C arithmetic must round as numpy's does
            # (the compiled and numpy paths are compared for equality).
            extra_compile_args=["-O2", "-ffp-contract=off"],
            libraries=["m"],
            optional=True,
        )
    ]
)
