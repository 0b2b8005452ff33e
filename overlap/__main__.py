"""`python -m overlap` is the same as the `overlap` console script."""

from overlap.cli.main import run

run()
