"""CLI subcommands; see overlap/cli.py for the contract each module follows."""
