"""`kiln tune`: search compile settings for one model on one machine; `kiln compile --tuned` uses the winner."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .common import debug_option
from .options import TARGET_NAMES, TimingChoice, model_options, target_options, timing_options

if TYPE_CHECKING:
    from kiln.compiler import CompileOptions, ModelSource


@click.group("tune")
def tune_command() -> None:
    """Find the fastest settings that still match eager PyTorch, for one model, target and machine.

    The search space is a list of knobs per target (`kiln tune space`): kiln's hand-off point and
    pass pipeline, IREE's optimization level and a few of its codegen flags. Every candidate is
    compiled, checked against eager PyTorch on the example inputs (the check of `kiln bench`: the
    relative L2 error within the dtype's tolerance; a candidate that fails to compile or to match
    is rejected, with the reason shown) and timed like `kiln bench` times kiln (inputs on the
    device, warm-up calls, median of the timed ones). The winner is stored in a cache,
    ~/.cache/kiln/tuned/ ($KILN_CACHE_DIR/tuned/ when set), under a key made of the model file's
    content, the model and inputs picked, the input shapes and dtypes, the dynamic dimensions, the
    precision, the target, the CPU or GPU architecture, and the kiln and IREE versions.
    `kiln compile ... --tuned` applies it, and its manifest says so.

    \b
    Where the target's device is here:
      kiln tune run model.py --target llvm-cpu
      kiln compile model.py --target llvm-cpu --tuned

    \b
    Where it is on another machine (kiln's usual GPU workflow: compile on a CPU host, run on the
    GPU host, which has only torch, iree-base-runtime and kiln):
      kiln tune prepare model.py --target cuda -o DIR   # here: the candidates, inputs, eager outputs
      kiln tune measure DIR                             # there: check and time each: DIR/measured.json
      kiln tune accept DIR                              # here: store the winner
      kiln compile model.py --target cuda --tuned
    """


def _search_options(function: Any) -> Any:
    """The model and target, as `kiln compile` takes them, and the limits of the search."""
    options = (
        model_options(),
        target_options,
        click.option("--knob", "knobs", multiple=True, metavar="NAME", help="Search only these knobs (repeatable; `kiln tune space` lists them) [default: all of the target's]."),
        click.option("--max-candidates", type=int, default=20, show_default=True, help="Compile at most this many candidates, kiln's default included."),
        click.option("--budget-s", type=float, default=1200.0, show_default=True, help="Start no candidate after this many seconds."),
    )
    for option in reversed(options):
        function = option(function)
    return function


def _min_gain_option(function: Any) -> Any:
    return click.option(
        "--min-gain",
        type=float,
        default=0.03,
        show_default=True,
        help="A candidate wins only when faster than the best so far (or kiln's default) by this fraction.",
    )(function)


@tune_command.command("run")
@_search_options
@click.option("--sweeps", type=int, default=2, show_default=True, help="Passes of coordinate descent over the knobs.")
@_min_gain_option
@timing_options(warmup=3, iterations=30, time_s=2.0, inductor=False)
@debug_option
def run_command(
    source: ModelSource,
    options: CompileOptions,
    knobs: tuple[str, ...],
    max_candidates: int,
    budget_s: float,
    sweeps: int,
    min_gain: float,
    timing: TimingChoice,
) -> None:
    """Tune MODEL_FILE here: compile, check and time candidates on this machine, store the winner.

    Coordinate descent from kiln's default: each knob's other choices are tried in turn on top of
    the best so far, and one faster by more than --min-gain becomes the best; a second sweep
    retries the knobs on top of what moved. At the end the winner and the default are timed again,
    alternately over five rounds, and the winner is kept only if the median of its per-round time
    over the default's still beats --min-gain. One line per candidate: the knobs it moves, its
    compile time, its median time, its numerics, and the verdict.

    \b
    Examples:
      kiln tune run examples/mlp.py
      kiln tune run model.py --dtype bf16 --knob handoff --knob ukernels
      kiln tune run benchmarks/models/mlp.py --max-candidates 8 --threads 2
    """
    import torch

    from kiln.measure.timing import use_threads
    from kiln.tune.cache import command_for, entry_path
    from kiln.tune.search import Limits, tune
    from kiln.tune.space import space_for

    use_threads(timing.threads or torch.get_num_threads())  # before any artifact is loaded
    _say_note(options)
    limits = Limits(max_candidates, budget_s, sweeps, min_gain)
    space = space_for(options.target, knobs)
    entry = tune(source, options, space, limits, timing.settings, timing.device, _command(), click.echo)
    click.echo(f"tuned: {entry.summary()}")
    click.echo(f"stored {entry_path(entry.key)}; compile with: {command_for(['kiln', 'compile'], source, options)} --tuned")


@tune_command.command("prepare")
@_search_options
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="The tuning folder to write (new or empty).")
@debug_option
def prepare_command(
    source: ModelSource,
    options: CompileOptions,
    knobs: tuple[str, ...],
    max_candidates: int,
    budget_s: float,
    output: Path,
) -> None:
    """Compile MODEL_FILE's candidates into a folder, to be measured on another machine.

    The candidates are kiln's default and every single-knob variant of it (a search that walks
    needs each step's times before the next, which a split cannot have). The folder holds one
    artifact per distinct candidate (a variant byte-identical to an earlier one is measured once),
    the example inputs and eager PyTorch's outputs for them (computed here, on the CPU), external
    weights once (--params external), and bundle.json, the plan. Carry the folder to the machine
    with the device, run `kiln tune measure` there, bring back measured.json (or the folder), and
    run `kiln tune accept` here.

    \b
    Example:
      kiln tune prepare benchmarks/models/mlp.py --target cuda --gpu-arch sm_80 -o tune-mlp
    """
    from kiln.tune.search import Limits, prepare
    from kiln.tune.space import space_for

    _say_note(options)
    limits = Limits(max_candidates=max_candidates, budget_s=budget_s)
    plan = prepare(source, options, space_for(options.target, knobs), limits, output, _command(), click.echo)
    size = sum(path.stat().st_size for path in output.iterdir()) / 2**20
    weights = " (weights.irpa among them)" if plan.entries[0].parameters else ""
    click.echo(f"wrote {output}/: {len(plan.entries)} candidates, {size:.1f} MiB{weights}")
    click.echo(f"next, where the device is: kiln tune measure {shlex.quote(str(output))}")


@tune_command.command("measure")
@click.argument("folder", type=click.Path(path_type=Path, exists=True, file_okay=False))
@timing_options(warmup=3, iterations=30, time_s=2.0, inductor=False)
@debug_option
def measure_command(folder: Path, timing: TimingChoice) -> None:
    """Check and time every candidate of a prepared FOLDER on this machine; write FOLDER/measured.json.

    Needs only torch, iree-base-runtime and kiln (not torch-mlir, not iree-compile): this is the
    half that runs on the GPU machine.

    \b
    Example:
      kiln tune measure tune-mlp --device cuda
    """
    import torch

    from kiln.measure.bundle import Bundle
    from kiln.measure.timing import environment, torch_device_for, use_threads
    from kiln.tune.measure import MEASURED, measure_plan

    use_threads(timing.threads or torch.get_num_threads())
    machine = environment(torch_device_for(Bundle.read(folder).driver, timing.device))[0]
    measure_plan(folder, timing.settings, timing.device, machine, click.echo)
    click.echo(f"wrote {folder / MEASURED}; next, where it was prepared: kiln tune accept {shlex.quote(str(folder))}")


@tune_command.command("accept")
@click.argument("folder", type=click.Path(path_type=Path, exists=True, file_okay=False))
@_min_gain_option
@debug_option
def accept_command(folder: Path, min_gain: float) -> None:
    """Store the winner of a measured FOLDER in the tuning cache, for `kiln compile --tuned`.

    The winner is the fastest candidate that matched eager PyTorch, if it beats kiln's default by
    more than --min-gain; else kiln's default (stored too, so --tuned knows the default is best).

    \b
    Example:
      kiln tune accept tune-mlp
    """
    from kiln.measure.bundle import Bundle
    from kiln.tune.cache import entry_path
    from kiln.tune.search import accept

    entry = accept(folder, min_gain, click.echo)
    click.echo(f"tuned: {entry.summary()}")
    click.echo(f"stored {entry_path(entry.key)}; compile with: {Bundle.read(folder).settings['compile_with']}")


@tune_command.command("space")
@click.option("--target", type=click.Choice(TARGET_NAMES), default="llvm-cpu", show_default=True)
def space_command(target: str) -> None:
    """List the knobs `kiln tune` searches for a target, and what each choice changes."""
    from kiln.tune.space import space_for

    for knob in space_for(target):
        click.echo(f"{knob.name}: {knob.summary}")
        for index, choice in enumerate(knob.choices):
            changes = [f"--{name.replace('_', '-')} {value}" for name, value in choice.options] + list(choice.iree_flags)
            what = "kiln's default" if index == 0 else " ".join(changes)
            click.echo(f"  {choice.label:<10} {what}")


def _say_note(options: CompileOptions) -> None:
    """What a GPU target is compiled for, when that is not simply what was asked (an unknown --gpu-arch fails here)."""
    from kiln.targets.resolve import resolve

    note = resolve(options).note
    if note:
        click.echo(f"note: {note}", err=True)


def _command() -> str:
    return shlex.join(["kiln", *sys.argv[1:]])
