"""`kiln opt`: run kiln passes on an .mlir file, as the pipeline would, and print the result.

For lit tests (tests/passes/), for bug reports (a failing stage's error gives the command), and
for trying a new pass on a saved dump.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from kiln.errors import KilnError

from .common import debug_option

SPLIT = re.compile(r"^// -----\s*$", re.MULTILINE)


@click.command("opt")
@click.argument("mlir_file", type=click.Path(path_type=Path))
@click.option(
    "-p",
    "--pass",
    "pass_lists",
    multiple=True,
    required=True,
    metavar="NAME[,NAME...]",
    help="Pass(es) to run, in order (repeatable); `kiln passes` lists them.",
)
@click.option("--split-input-file", is_flag=True, help="Treat each `// -----` separated part as its own module.")
@click.option("--dump-dir", type=click.Path(path_type=Path), help="Where passes write side files (fusion report).")
@debug_option
def opt_command(mlir_file: Path, pass_lists: tuple[str, ...], split_input_file: bool, dump_dir: Path | None) -> None:
    """Run passes on MLIR_FILE (torch or linalg IR) and print the module they leave.

    \b
    Examples:
      kiln opt model.stages/02-prims.mlir --pass fold-sin-cos
      kiln opt model.stages/04-linalg.mlir --pass fuse-elementwise --dump-dir /tmp/report
    """
    from kiln.passes import PASSES, PassGroup, check_pipeline
    from kiln.passes.pass_api import PassFailure, parse_module, run_pass

    if not mlir_file.is_file():
        raise KilnError(f"file not found: {mlir_file}", stage="opt")
    names = tuple(name.strip() for names in pass_lists for name in names.split(",") if name.strip())
    check_pipeline((PassGroup("opt", names),), level=None)  # unknown names fail here, listing close ones
    text = mlir_file.read_text()
    parts = SPLIT.split(text) if split_input_file else [text]
    if dump_dir is not None:
        dump_dir.mkdir(parents=True, exist_ok=True)
    failed = False
    for index, part in enumerate(parts):
        if index > 0:
            click.echo("// -----")
        side_files = dump_dir / f"{mlir_file.stem}.{index}" if dump_dir is not None else None
        try:
            module = parse_module(part)
            for name in names:
                run_pass(module, PASSES[name], side_files)
        except PassFailure as failure:
            failed = True
            for diagnostic in failure.diagnostics:
                click.echo(f"error: [{failure.pass_name}] {diagnostic.location}: {diagnostic.message}", err=True)
            continue
        click.echo(str(module).rstrip("\n"))  # click.echo flushes: output and errors stay in order
    if failed:
        raise SystemExit(1)
