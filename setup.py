"""Build of the one compiled piece: the CPU Viterbi kernel (``multigrain.components.heads._viterbi``).

Everything else is in pyproject.toml. ``optional=True``: without a C compiler the install still
succeeds and CRF decoding falls back to the (slower, equally exact) PyTorch implementation.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("multigrain.components.heads._viterbi", ["multigrain/components/heads/_viterbi.c"],
                             extra_compile_args=["-O3", "-std=c99"], optional=True)])
