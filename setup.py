"""Builds Srift's one C extension, the exchange-stage kernel; everything else lives in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and the simulator runs its
pure-Python stage (same timeline, a few times slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("srift.sim._stage", ["srift/sim/_stage.c"], optional=True, extra_compile_args=["-O2"])
    ]
)
