"""The `kiln` command line.

A thin shell: each command parses flags into the library's types and calls it. Heavy imports
(torch, MLIR, IREE) happen inside the command bodies so that `kiln --help` is instant.
"""

from __future__ import annotations

import errno
import sys
import traceback
import warnings
from typing import Any

import click

from kiln.errors import KilnError

from .bench_command import bench_command
from .compile_command import compile_command
from .families_command import families_command
from .generate_command import generate_command
from .ops_command import ops_command
from .opt_command import opt_command
from .passes_command import passes_command
from .run_command import run_command
from .tune_command import tune_command

# What a full disk, a file-size limit, a read-only or forbidden folder raises wherever kiln writes.
ENVIRONMENT_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}


class KilnGroup(click.Group):
    """Turns errors into one readable message and a non-zero exit; `--debug` keeps the traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KilnError as error:
            if ctx.meta.get("kiln.debug"):
                traceback.print_exc()
            click.secho(f"error: {error}", fg="red", err=True)
            sys.exit(1)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except Exception as error:  # a kiln bug: still one message unless asked for more
            if ctx.meta.get("kiln.debug"):
                raise
            if isinstance(error, OSError) and error.errno in ENVIRONMENT_ERRORS:  # not a bug: the machine
                click.secho(f"error: {error.filename or 'a file'}: {error.strerror}", fg="red", err=True)
                sys.exit(1)
            click.secho(
                f"internal error: {type(error).__name__}: {error}\n  (a kiln bug; re-run with --debug for the traceback)",
                fg="red",
                err=True,
            )
            sys.exit(2)


@click.group(cls=KilnGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="torchkiln", prog_name="kiln")
def kiln() -> None:
    """kiln: compile PyTorch models ahead of time into small, fast IREE artifacts.

    \b
    kiln compile model.py --target llvm-cpu -o model.vmfb --verify
    kiln run model.vmfb --random
    kiln compile lm.py --generate --max-seq-len 1024 -o lm.vmfb; kiln generate lm.vmfb --ids 1,2,3
    python -c "import kiln; m = kiln.load('model.vmfb'); print(m(x))"
    """


kiln.add_command(compile_command)
kiln.add_command(run_command)
kiln.add_command(generate_command)
kiln.add_command(passes_command)
kiln.add_command(opt_command)
kiln.add_command(bench_command)
kiln.add_command(tune_command)
kiln.add_command(ops_command)
kiln.add_command(families_command)


def main() -> None:
    # torch and torch-mlir emit FutureWarnings about their own internals on every export.
    warnings.filterwarnings("ignore", category=FutureWarning)
    kiln(prog_name="kiln")
