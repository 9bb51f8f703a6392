"""kiln.cli: the `kiln` command, a thin shell over kiln.compiler and kiln.runtime."""
