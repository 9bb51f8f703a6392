"""`kiln run`: call an artifact from the shell with .npy inputs (or random ones)."""

from __future__ import annotations

from pathlib import Path

import click

from kiln.errors import KilnError

from .common import debug_option


@click.command("run")
@click.argument("artifact", type=click.Path(path_type=Path))
@click.option("-i", "--input", "inputs", multiple=True, type=click.Path(path_type=Path), help="An input as .npy, in order (repeatable).")
@click.option("--random", "use_random", is_flag=True, help="Make random inputs of the shapes and dtypes in the manifest.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for --random.")
@click.option("-o", "--output", "outputs", multiple=True, type=click.Path(path_type=Path), help="Where to save each output as .npy, in order (repeatable).")
@click.option("--device", help="cpu, cuda, cuda:1, vulkan [default: the artifact's own].")
@click.option("--function", "function_name", metavar="NAME", help="Which function to call [default: the first, e.g. main].")
@debug_option
def run_command(
    artifact: Path,
    inputs: tuple[Path, ...],
    use_random: bool,
    seed: int,
    outputs: tuple[Path, ...],
    device: str | None,
    function_name: str | None,
) -> None:
    """Run ARTIFACT (a .vmfb with its .json manifest) and print or save its outputs.

    Inputs come from .npy files (one --input per input of the manifest, in order: forward's tensor
    arguments, flattened; Python scalars it was compiled with are fixed in it) or --random. A bf16
    input may be given as a float32 .npy: it is rounded to bf16. bf16 outputs are saved as
    float32 .npy (numpy has no bf16), exactly. The outputs are forward's tensor results, flattened.

    \b
    Examples:
      kiln run mlp.vmfb --input x.npy --output y.npy
      kiln run mlp.vmfb --random
      kiln run autoencoder.vmfb --function decode --random
    """
    import numpy as np
    import torch

    import kiln

    module = kiln.load(artifact, device)
    function_name = function_name or module.manifest.entry
    if function_name not in module.functions:
        raise KilnError(
            f"the artifact has no function '{function_name}'; it has: {', '.join(module.functions)}", stage="run"
        )
    function = module.functions[function_name]
    specs = function.spec.inputs
    if use_random == bool(inputs):
        raise KilnError("give either --input (one per model input) or --random", stage="run")
    if use_random:
        generator = torch.Generator().manual_seed(seed)
        sizes = {symbol: max(low or 1, 1) for symbol, (low, _) in function.spec.symbols.items()}
        values = [_random_tensor(tuple(sizes.get(d, d) for d in spec.shape), spec.dtype, generator) for spec in specs]
    else:
        values = [_read_npy(path, spec.dtype) for path, spec in zip(inputs, specs, strict=False)] + [
            _read_npy(path, None) for path in inputs[len(specs) :]
        ]
    results = function.flat(*values)  # the tensors in the manifest's order, whatever forward's nesting
    if outputs and len(outputs) != len(results):
        raise KilnError(f"the artifact has {len(results)} output(s) but {len(outputs)} --output path(s) were given", stage="run")
    for index, (spec, result) in enumerate(zip(function.spec.outputs, results, strict=True)):
        if outputs:
            array = result.float().numpy() if result.dtype == torch.bfloat16 else result.numpy()
            np.save(outputs[index], array)
            click.echo(f"{spec.name}: {result.dtype} {list(result.shape)} -> {outputs[index]}")
        else:
            click.echo(f"{spec.name}: {result.dtype} {list(result.shape)}")
            click.echo(f"  {_summary(result)}")


def _summary(tensor: object) -> str:
    """A few values and the range: enough to eyeball, short enough for a terminal."""
    import torch

    assert isinstance(tensor, torch.Tensor)
    flat = tensor.flatten()
    head = ", ".join(f"{v:.4g}" if tensor.is_floating_point() else str(v) for v in flat[:6].tolist())
    more = ", ..." if flat.numel() > 6 else ""
    if tensor.is_floating_point() and flat.numel():
        values = flat.float()
        return f"[{head}{more}]  min {values.min():.4g}  max {values.max():.4g}  mean {values.mean():.4g}"
    return f"[{head}{more}]"


def _read_npy(path: Path, dtype: str | None) -> object:
    import numpy as np
    import torch

    if not path.is_file():
        raise KilnError(f"input file not found: {path}", stage="run")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise KilnError(f"{path} is not a .npy array: {exc}", stage="run") from exc
    if dtype == "bfloat16" and array.dtype == np.float32:
        return torch.from_numpy(array).to(torch.bfloat16)
    try:  # into torch's memory, which starts on 64 bytes: the runtime takes it without a copy (numpy's, 16)
        return torch.from_numpy(array).clone()
    except TypeError:
        return array  # a dtype torch lacks: the runtime's check names it


def _random_tensor(shape: tuple[int, ...], dtype: str, generator: object) -> object:
    import torch

    from kiln.runtime.tensors import TORCH_DTYPES

    torch_dtype = TORCH_DTYPES[dtype]
    if torch_dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if torch_dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(torch_dtype)
    return torch.randint(0, 10, shape, generator=generator, dtype=torch_dtype)
