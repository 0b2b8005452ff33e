"""cli: the `overlap` command, one module per subcommand: parse, call, render.

Exit codes (see `overlap.errors`): 0 ok, 1 a check failed, 2 usage, 3 bad input.
"""
