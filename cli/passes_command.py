"""`kiln passes`: every pass kiln knows, and the pipeline it runs them in.

Also the `--timing` table of `kiln compile`, which reports the same passes.
"""

from __future__ import annotations

from typing import Any

import click

from .common import debug_option


@click.command("passes")
@click.option(
    "--pipeline",
    "pipeline_name",
    default="default",
    show_default=True,
    metavar="NAME",
    help="Show this named pipeline (default, torch-mlir).",
)
@click.option(
    "--target",
    metavar="TARGET",
    help="Show the pipeline as a compile for this target runs it, with the target's own passes placed in it.",
)
@click.option("--gpu-arch", metavar="ARCH", help="With --target: the GPU architecture (cuda's own passes need sm_90a).")
@debug_option
def passes_command(pipeline_name: str, target: str | None, gpu_arch: str | None) -> None:
    """List every pass (name, the IR level it works on, where it comes from, what it does) and the
    pipeline `kiln compile` runs them in.

    \b
    "from" is kiln (a target-neutral pass, passes/), upstream (MLIR's or torch-mlir's), or the
    target room that owns it (targets/<room>/passes/), which places it in the pipeline: see it
    with --target, e.g. `kiln passes --target cuda --gpu-arch sm_90a`.
    Each stage of the pipeline is a group of passes, dumped as NN-<stage>.mlir. Change it with
    `kiln compile --pipeline 'stage(pass,pass),stage(pass)'` (the last line below is the
    pipeline in that form), --disable-pass NAME, and see a pass's effect with --print-after NAME.
    """
    from kiln.passes import PASSES, PIPELINES, parse_pipeline, pipeline_text, with_placements

    pipeline = parse_pipeline(pipeline_name)
    if target is not None:
        from kiln.compiler.options import CompileOptions
        from kiln.targets.resolve import resolve

        pipeline = with_placements(pipeline, resolve(CompileOptions(target=target, gpu_arch=gpu_arch)).passes)
    width = max(len(name) for name in PASSES)
    click.echo("Passes:")
    click.echo(f"  {'name':<{width}}  {'level':<13}  {'from':<8}  summary")
    for name, pass_ in PASSES.items():
        level = f"{pass_.level}->{pass_.lowers_to}" if pass_.lowers_to else pass_.level
        click.echo(f"  {name:<{width}}  {level:<13}  {pass_origin(PASSES.module_of(name)):<8}  {pass_.summary}")
    for_target = f" for {target}" if target is not None else ""
    click.echo(f"\nThe {pipeline_name} pipeline{for_target}, one stage per line:")
    stage_width = max(len(group.name) for group in pipeline)
    for group in pipeline:
        click.echo(f"  {group.name:<{stage_width}}  {', '.join(group.passes) or '(no passes)'}")
    click.echo(f"\nNamed pipelines: {', '.join(PIPELINES)}. As --pipeline text:")
    click.echo(f"  {pipeline_text(pipeline)}")


def pass_origin(module: str | None) -> str:
    """Where a pass comes from, by its module (None: upstream): "kiln" (passes/), or the target room
    that owns it (kiln.targets.<room>.passes.x)."""
    if module is None:
        return "upstream"
    parts = module.split(".")
    return parts[2] if parts[1] == "targets" else "kiln"


def timing_table(stages: Any) -> str:
    """Seconds, CPU seconds and peak memory per stage, and seconds per pass within a pass stage (the
    StageReports of a compile). "cpu" counts kiln and iree-compile; "peak" is kiln's own resident
    memory at its highest during the stage, "iree-compile" the child process's, in the stage that runs it.
    Under the vmfb stage: its steps, then every iree-compile run (ok or failed) with its own time, CPU
    time and peak, and what it had on (levers, transient variants); last, how many runs the compile
    took: more than one means a lever or the variants were dropped after a failure, each run a full compile."""
    runs = [run for stage in stages for run in stage.iree_runs]
    names = [len(name) + 4 for stage in stages for name in stage.pass_times] + [len(_run_name(i, run)) + 4 for i, run in enumerate(runs)]
    width = max([len(stage.name) + 2 for stage in stages] + names)
    lines = [f"  {'stage':<{width - 2}}  {'time':>9}  {'cpu':>9}  {'peak':>9}  {'iree-compile':>12}"]
    number = 0
    for stage in stages:
        usage = stage.usage
        cpu = f"{usage.cpu_seconds:8.3f}s" if usage is not None else ""
        peak = _mib(usage.peak) if usage is not None else ""
        child = _mib(usage.child_peak) if usage is not None and usage.child_peak else ""
        lines.append(f"  {stage.name:<{width - 2}}  {stage.seconds:8.3f}s  {cpu:>9}  {peak:>9}  {child:>12}")
        lines += [f"    {name:<{width - 4}}  {seconds:8.3f}s" for name, seconds in stage.pass_times.items()]
        for run in stage.iree_runs:
            name = _run_name(number, run)
            number += 1
            lines.append(
                f"    {name:<{width - 4}}  {run.seconds:8.3f}s  {run.cpu_seconds:8.3f}s  {'':>9}  {_mib(run.peak) if run.peak else '':>12}  {run.label}"
            )
    if runs:
        cpu = sum(run.cpu_seconds for run in runs)
        retries = len(runs) - 1
        again = f"{retries} retr{'y' if retries == 1 else 'ies'}: a lever or the transient variants dropped" if retries else "no retries"
        lines.append(f"iree-compile: {len(runs)} run{'s' if len(runs) > 1 else ''} ({again}), {cpu:.3f}s CPU")
    return "\n".join(["time, CPU time and peak resident memory per stage (and time per pass or step):", *lines])


def _run_name(index: int, run: Any) -> str:
    return f"iree-compile #{index + 1} {'ok' if run.ok else 'failed'}"


def _mib(nbytes: int | None) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:.0f} MiB"
