"""kiln.cli: the `kiln` command, a thin shell over the library: each command parses flags and prints.

Import rule: any kiln package, but only inside command bodies for the heavy ones, so that
`kiln --help` imports neither torch nor MLIR nor IREE (tests/test_cli.py checks it). Options that
several commands share are declared once, in options.py.
"""
