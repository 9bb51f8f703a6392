"""`kiln tune`: search compile settings for one model on one machine; `kiln compile --tuned` uses the winner."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from .common import debug_option
from .compile_command import TARGETS


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


def _model_options(function: Any) -> Any:
    """The options that name the model, the target and the device, as `kiln compile` takes them."""
    options = (
        click.argument("model_file", type=click.Path(path_type=Path)),
        click.option("--target", type=click.Choice(TARGETS), default="llvm-cpu", show_default=True, help="Where the artifact runs."),
        click.option("--cpu", default="host", show_default=True, help="llvm-cpu: LLVM CPU name to compile for."),
        click.option("--gpu-arch", metavar="ARCH", help="GPU targets: the architecture [default: the local GPU's, else the target's default]."),
        click.option("--model", "model_name", metavar="NAME", help="Module (or factory) to compile [default: model / get_model]."),
        click.option("--inputs", "inputs_name", metavar="NAME", help="Example inputs [default: example_inputs / get_example_inputs]."),
        click.option("--dtype", "precision", type=click.Choice(("bf16", "f16")), help="Compile an f32 model in this precision."),
        click.option("--dynamic-dim", "dynamic_dims", multiple=True, metavar="INPUT:AXIS", help="Make an input axis dynamic (repeatable)."),
        click.option(
            "--params",
            type=click.Choice(("auto", "inline", "external")),
            default="auto",
            show_default=True,
            help="Weights, as for `kiln compile`; external ones are written once, as the tuning folder's weights.irpa.",
        ),
        click.option("--knob", "knobs", multiple=True, metavar="NAME", help="Search only these knobs (repeatable; `kiln tune space` lists them) [default: all of the target's]."),
        click.option("--max-candidates", type=int, default=20, show_default=True, help="Compile at most this many candidates, kiln's default included."),
        click.option("--budget-s", type=float, default=1200.0, show_default=True, help="Start no candidate after this many seconds."),
    )
    for option in reversed(options):
        function = option(function)
    return function


def _timing_options(function: Any) -> Any:
    options = (
        click.option("--device", help="cpu, cuda, cuda:1, vulkan [default: the artifacts' own]."),
        click.option("--warmup", type=int, default=3, show_default=True, help="Untimed calls per candidate."),
        click.option("--iterations", type=int, default=30, show_default=True, help="Timed calls per candidate, at most."),
        click.option("--time-s", type=float, default=2.0, show_default=True, help="Per candidate: fewer timed calls past this (3 at least)."),
        click.option("--threads", type=int, help="CPU threads for IREE's task pool [default: torch's default, the cores]."),
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
@_model_options
@click.option("--sweeps", type=int, default=2, show_default=True, help="Passes of coordinate descent over the knobs.")
@_min_gain_option
@_timing_options
@debug_option
def run_command(**args: Any) -> None:
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

    from kiln.compiler.tuning import Limits, tune
    from kiln.compiler.tuning_cache import command_for, entry_path
    from kiln.runtime.bench import Settings, use_threads

    use_threads(args["threads"] or torch.get_num_threads())  # before any artifact is loaded
    ref, options, space = _model(args)
    limits = Limits(args["max_candidates"], args["budget_s"], args["sweeps"], args["min_gain"])
    settings = Settings(args["warmup"], args["iterations"], args["time_s"], inductor=False)
    entry = tune(ref, options, space, limits, settings, args["device"], _command(), click.echo)
    click.echo(f"tuned: {entry.summary()}")
    click.echo(f"stored {entry_path(entry.key)}; compile with: {command_for(['kiln', 'compile'], ref, options)} --tuned")


@tune_command.command("prepare")
@_model_options
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="The tuning folder to write (new or empty).")
@debug_option
def prepare_command(output: Path, **args: Any) -> None:
    """Compile MODEL_FILE's candidates into a folder, to be measured on another machine.

    The candidates are kiln's default and every single-knob variant of it (a search that walks
    needs each step's times before the next, which a split cannot have). The folder holds one
    artifact per distinct candidate (a variant byte-identical to an earlier one is measured once),
    the example inputs and eager PyTorch's outputs for them (computed here, on the CPU), external
    weights once (--params external), and tune.json, the plan. Carry the folder to the machine
    with the device, run `kiln tune measure` there, bring back measured.json (or the folder), and
    run `kiln tune accept` here.

    \b
    Example:
      kiln tune prepare benchmarks/models/mlp.py --target cuda --gpu-arch sm_80 -o tune-mlp
    """
    from kiln.compiler.tuning import Limits, prepare

    ref, options, space = _model(args)
    limits = Limits(max_candidates=args["max_candidates"], budget_s=args["budget_s"])
    plan = prepare(ref, options, space, limits, output, _command(), click.echo)
    size = sum(path.stat().st_size for path in output.iterdir()) / 2**20
    weights = " (weights.irpa among them)" if plan.weights else ""
    click.echo(f"wrote {output}/: {len(plan.candidates)} candidates, {size:.1f} MiB{weights}")
    click.echo(f"next, where the device is: kiln tune measure {shlex.quote(str(output))}")


@tune_command.command("measure")
@click.argument("folder", type=click.Path(path_type=Path, exists=True, file_okay=False))
@_timing_options
@debug_option
def measure_command(folder: Path, device: str | None, warmup: int, iterations: int, time_s: float, threads: int | None) -> None:
    """Check and time every candidate of a prepared FOLDER on this machine; write FOLDER/measured.json.

    Needs only torch, iree-base-runtime and kiln (not torch-mlir, not iree-compile): this is the
    half that runs on the GPU machine.

    \b
    Example:
      kiln tune measure tune-mlp --device cuda
    """
    import torch

    from kiln.runtime.bench import Settings, environment, torch_device_for, use_threads
    from kiln.runtime.tuning_measure import MEASURED, Plan, measure_plan

    use_threads(threads or torch.get_num_threads())
    plan = Plan.read(folder)
    machine = environment(torch_device_for(plan.driver, device))[0]
    measure_plan(folder, Settings(warmup, iterations, time_s, inductor=False), device, machine, click.echo)
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
    from kiln.compiler.tuning import accept
    from kiln.compiler.tuning_cache import entry_path
    from kiln.runtime.tuning_measure import Plan

    entry = accept(folder, min_gain, click.echo)
    click.echo(f"tuned: {entry.summary()}")
    click.echo(f"stored {entry_path(entry.key)}; compile with: {Plan.read(folder).compile_with}")


@tune_command.command("space")
@click.option("--target", type=click.Choice(TARGETS), default="llvm-cpu", show_default=True)
def space_command(target: str) -> None:
    """List the knobs `kiln tune` searches for a target, and what each choice changes."""
    from kiln.compiler.tuning_space import space_for

    for knob in space_for(target):
        click.echo(f"{knob.name}: {knob.summary}")
        for index, choice in enumerate(knob.choices):
            changes = [f"--{name.replace('_', '-')} {value}" for name, value in choice.options] + list(choice.iree_flags)
            what = "kiln's default" if index == 0 else " ".join(changes)
            click.echo(f"  {choice.label:<10} {what}")


def _model(args: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The model reference, the base compile options and the search space from the common options."""
    from kiln.compiler import CompileOptions
    from kiln.compiler.targets import choose_arch, get_target
    from kiln.compiler.tuning_cache import ModelRef
    from kiln.compiler.tuning_space import space_for

    target, gpu_arch = args["target"], args["gpu_arch"]
    if get_target(target).archs is not None:
        note = choose_arch(target, gpu_arch).note
        if note:
            click.echo(f"note: {note}", err=True)
    ref = ModelRef(args["model_file"], args["model_name"], args["inputs_name"], args["dynamic_dims"], args["precision"])
    options = CompileOptions(target=target, cpu=args["cpu"], gpu_arch=gpu_arch, params=args["params"])
    return ref, options, space_for(target, args["knobs"])


def _command() -> str:
    return shlex.join(["kiln", *sys.argv[1:]])
