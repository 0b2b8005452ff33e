"""Build the compiled XSpace scanner (`overlap/trace/_scan.pyx`, Cython; everything else is in
pyproject.toml). `optional=True`: without a C compiler the install still succeeds and the reader
falls back to decoding with upb (correct, slower; it says so once)."""

import os
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Code placement, pinned. By default gcc starts each function at any 16-byte step and aligns a
# loop only where that skips few bytes, so adding one function to `_scan.pyx` moved the others
# within their 64-byte cache lines, and hot loops that never changed ran 1-5 ms (up to 45%)
# slower or faster (round 10 of issue 32: `text_facts` 5.6 -> 8.1 ms replayed warm, the same
# machine code). Every function starting a cache line and every loop a 32-byte block keeps
# each function's own layout whatever else the module holds, so timings of a scanner edit
# compare. Measured (round 11 of issue 32: the scanner's calls of `report --json` replayed warm,
# builds interleaved in one process): both many-ops files 2-4% less (70.2 -> 67.7 ms), decode_events
# +4-8% on TPU 1M and compact GPU 1M, -11% on GPU 1M; the pinned layout is one draw too, kept
# for being the same draw after each edit. Each flag is used only where the compiler takes it
# without a warning (gcc and clang take both; another compiler builds with its defaults).
_PLACEMENT = ("-falign-functions=64", "-falign-loops=32")


class _BuildExt(build_ext):
    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":
            flags = [f for f in _PLACEMENT if self._takes(f)]
            for ext in self.extensions:
                ext.extra_compile_args = list(ext.extra_compile_args or []) + flags
        super().build_extensions()

    def _takes(self, flag: str) -> bool:
        """Whether the compiler builds a one-line C file with `flag` and no warning."""
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "flag.c")
            with open(src, "w") as f:
                f.write("int main(void) { return 0; }\n")
            try:
                self.compiler.compile([src], output_dir=d, extra_postargs=[flag, "-Werror"])
            except Exception:  # (CompileError, or no compiler at all: build without it)
                return False
        return True


setup(ext_modules=[Extension("overlap.trace._scan", ["overlap/trace/_scan.pyx"],
                             optional=True, extra_compile_args=["-O3"])],
      cmdclass={"build_ext": _BuildExt})
