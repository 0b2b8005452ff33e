"""Build the compiled XSpace scanner (`overlap/trace/_scan.pyx`, Cython; everything else is in
pyproject.toml). `optional=True`: without a C compiler the install still succeeds and the reader
falls back to decoding with upb (correct, slower; it says so once)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("overlap.trace._scan", ["overlap/trace/_scan.pyx"],
                             optional=True, extra_compile_args=["-O3"])])
