"""Options and output helpers shared by the kiln commands."""

from __future__ import annotations

from typing import Any

import click


def debug_option(function: Any) -> Any:
    """`--debug` on any command: show full tracebacks instead of one-line errors."""

    def remember(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            ctx.find_root().meta["kiln.debug"] = True

    return click.option(
        "--debug",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=remember,
        help="Show the full traceback on errors.",
    )(function)


def progress(line: str) -> None:
    click.echo(line, err=True)
