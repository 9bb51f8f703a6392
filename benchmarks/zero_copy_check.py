"""Zero-copy calls, checked where the artifacts run: the same checks on the CPU and on a CUDA GPU.

Each check loads small artifacts and calls them as users do, with torch tensors on the artifact's
device, and asserts what kiln.runtime promises: no copies where memory allows, results equal to
eager PyTorch's, on the right device, never aliasing the inputs, outliving the module; strided,
misaligned and wrong-device inputs copied (counted) or refused with a KilnError; calls from
several threads correct; on CUDA, ordered after the work torch queued. tests/test_zero_copy.py
runs them on the CPU; on a GPU machine (which has no compiler) they run from artifacts compiled here:

    # here: the check models for cuda and for the device's CPU
    python benchmarks/zero_copy_check.py compile -o .device-carry/zero-copy --gpu-arch sm_80 --cpu sapphirerapids
    # there, from the repository root, with kiln.runtime importable:
    python3 benchmarks/zero_copy_check.py run .device-carry/zero-copy -o $OUT/zero-copy.json

`run` runs every check in a child process of its own (a hang or a crash is then one failed row,
not the end of the run), then times the per-call overhead of the one-add model of each suite bundle
found in the carry folder (`bench-cuda/`, `bench-cpu/`: `suite.py compile` writes them), and
prints one table.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import click
import torch
from torch import nn

TARGETS = {"cuda": "cuda", "llvm-cpu": "cpu"}  # kiln target -> the folder (and torch device kind) in the carry


# ---------------------------------------------------------------------------------------------
# The models the checks call


class Affine(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * y + x)


class Passthrough(nn.Module):
    """Returns its input, a view of it, and something new: the results that could alias an input."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return x, x[1:], x + 1


class Dtypes(nn.Module):
    def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(~x if x.dtype == torch.bool else x + x for x in xs)


class Growing(nn.Module):
    """Dynamic batch; the results' sizes are expressions of it (2*batch, batch)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.cat([x, x * 2]), x.sum(1)


class AddOne(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def _dtype_inputs() -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    values = torch.randint(0, 256, (3, 5), generator=generator)
    return (
        values.float() / 7, values.half() / 7, values.bfloat16() / 7, values - 128,
        values.int() - 128, (values - 128).to(torch.int8), values.to(torch.uint8), values % 2 == 0,
    )  # fmt: skip


@dataclass(frozen=True)
class CheckModel:
    module: Callable[[], nn.Module]
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    dynamic_shapes: Any = None


def _growing_shapes() -> Any:
    from torch.export import Dim

    return ({0: Dim("batch", min=1, max=64)},)


MODELS: dict[str, CheckModel] = {
    "affine": CheckModel(Affine, lambda: (torch.randn(64, 256), torch.randn(64, 256))),
    "passthrough": CheckModel(Passthrough, lambda: (torch.randn(16, 32),)),
    "dtypes": CheckModel(Dtypes, _dtype_inputs),
    "growing": CheckModel(Growing, lambda: (torch.randn(4, 16),), _growing_shapes),
    "zero_size": CheckModel(Affine, lambda: (torch.randn(0, 8), torch.randn(0, 8))),
    "add_one": CheckModel(AddOne, lambda: (torch.zeros(1024, 1024),)),
}


# ---------------------------------------------------------------------------------------------
# The checks: each takes a loader (model name -> LoadedModule) and the artifacts' torch device


Loader = Callable[[str], Any]


def _inputs(name: str, device: torch.device) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(1)
    return tuple(x.to(device) for x in MODELS[name].inputs())


def _eager(name: str, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    result = MODELS[name].module()(*inputs)
    return result if isinstance(result, tuple) else (result,)


def _same(actual: Any, expected: tuple[torch.Tensor, ...], device: torch.device) -> None:
    actual = actual if isinstance(actual, tuple) else (actual,)
    assert len(actual) == len(expected), f"{len(actual)} results, eager gives {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert got.device == device, f"result {index} is on {got.device}, expected {device}"
        assert got.dtype == want.dtype and got.shape == want.shape, (
            f"result {index}: {got.dtype}{list(got.shape)}, eager {want.dtype}{list(want.shape)}"
        )
        tolerance = {} if want.dtype.is_floating_point else {"rtol": 0, "atol": 0}
        torch.testing.assert_close(got, want.to(device), **tolerance)


def check_zero_copy(load: Loader, device: torch.device) -> None:
    """Dense aligned inputs on the device are imported as is; results come back on it, with no copy."""
    import iree.runtime as rt

    module = load("affine")
    x, y = _inputs("affine", device)
    _same(module(x, y), _eager("affine", x, y), device)
    uploaded = module.upload(x, y)  # IREE's views of x and y: a change to x must show through
    x.mul_(3)
    view = module.call_on_device(uploaded).get_as_object(0, rt.HalBufferView)
    result = rt.DeviceArray(module.device, view, implicit_host_transfer=True).to_host()
    torch.testing.assert_close(torch.from_numpy(result), _eager("affine", x, y)[0].cpu())
    assert module.copies == {}, f"copies: {module.copies}"


def check_dtypes(load: Loader, device: torch.device) -> None:
    """Every dtype in and out as is: bf16, f16, int8, uint8 (IREE's signless bytes), bool."""
    module = load("dtypes")
    inputs = _inputs("dtypes", device)
    _same(module(*inputs), _eager("dtypes", *inputs), device)
    assert module.copies == {}, f"copies: {module.copies}"


def check_aliasing(load: Loader, device: torch.device) -> None:
    """A model that returns its input (or a view of it) still gives results of their own."""
    module = load("passthrough")
    (x,) = _inputs("passthrough", device)
    expected = tuple(t.clone() for t in _eager("passthrough", x))
    results = module(x)
    _same(results, expected, device)
    start, end = x.data_ptr(), x.data_ptr() + x.nbytes
    for index, result in enumerate(results):
        assert not start <= result.data_ptr() < end, f"result {index} aliases the input"
    x.fill_(-7)
    _same(results, expected, device)


def check_lifetimes(load: Loader, device: torch.device) -> None:
    """Results outlive the module, its device objects and the inputs, and stay writable."""
    module = load("affine")
    x, y = _inputs("affine", device)
    expected = _eager("affine", x, y)
    result = module(x, y)
    del module, x, y
    gc.collect()
    churn = [torch.full_like(result, 9.0) for _ in range(64)]  # reuse whatever memory was freed
    del churn
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
    _same(result, expected, device)
    result.add_(1)
    _same(result, tuple(t + 1 for t in expected), device)


def check_result_reuse(load: Loader, device: torch.device) -> None:
    """A dropped result's memory serves the next call where calls write into torch's tensors; a
    result still held, a view of one and a DLPack export of one are never written over, and a
    dropped result whose storage moved (resize_) is not written into its old memory."""
    from torch.utils.dlpack import from_dlpack, to_dlpack

    module = load("affine")
    x, y = _inputs("affine", device)
    expected = _eager("affine", x, y)
    pooled = module.functions["main"]._results is not None
    pointer = module(x, y).data_ptr()  # dropped at once
    again = module(x, y)
    if pooled:  # the pool's promise; IREE's allocator may reuse too
        assert again.data_ptr() == pointer, "the dropped result's memory was not reused"
    view = module(x, y)[1:]
    exported = to_dlpack(module(x, y))
    if pooled:  # a dropped result whose storage moved (IREE's results cannot be resized)
        module(x, y).resize_(4096, 256)
    for scale in (2.0, 3.0, 4.0, 5.0):  # more calls than the pool holds, with other values
        scaled = x * scale
        _same(module(scaled, y), _eager("affine", scaled, y), device)
    _same(again, expected, device)
    _same(view, tuple(t[1:] for t in expected), device)
    _same(from_dlpack(exported), expected, device)


def check_strided(load: Loader, device: torch.device) -> None:
    """A non-contiguous input is copied once, counted and warned about once; the result is right."""
    module = load("affine")
    x, y = _inputs("affine", device)
    xt = x.t().contiguous().t()  # same values, column-major
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _same(module(xt, y), _eager("affine", x, y), device)
        _same(module(xt, y), _eager("affine", x, y), device)
    assert module.copies == {"not contiguous": 2}, f"copies: {module.copies}"
    assert len([w for w in caught if "not contiguous" in str(w.message)]) == 1, [str(w.message) for w in caught]


def check_misaligned(load: Loader, device: torch.device) -> None:
    """A contiguous input that does not start on 64 bytes is copied (IREE's kernels assume 64)."""
    module = load("affine")
    x, y = _inputs("affine", device)
    flat = torch.empty(x.numel() + 1, dtype=x.dtype, device=device)
    shifted = flat[1:].view(x.shape)  # 4 bytes past an aligned start
    shifted.copy_(x)
    assert shifted.is_contiguous() and shifted.data_ptr() % 64
    _same(module(shifted, y), _eager("affine", x, y), device)
    assert module.copies == {"not 64-byte aligned": 1}, f"copies: {module.copies}"


def check_wrong_device(load: Loader, device: torch.device) -> None:
    """Tensors elsewhere are copied (counted) and results go back there; a meta tensor is refused."""
    from kiln.errors import KilnError

    module = load("affine")
    x, y = _inputs("affine", device)
    expected = _eager("affine", x, y)
    try:
        module(torch.empty(x.shape, device="meta"), y)
        raise AssertionError("a meta tensor was accepted")
    except KilnError as error:
        assert "input 'x' is on meta" in str(error), str(error)
    other = torch.device("cpu") if device.type == "cuda" else (torch.device("cuda", 0) if torch.cuda.is_available() else None)
    if other is not None:  # results come back where the inputs were
        _same(module(x.to(other), y.to(other)), tuple(t.to(other) for t in expected), other)
        assert sum(module.copies.values()) == 3, f"copies: {module.copies}"  # two inputs in, one result out
    if device.type == "cuda" and torch.cuda.device_count() > 1:
        elsewhere = torch.device("cuda", (device.index or 0) + 1)
        try:
            module(x.to(elsewhere), y.to(elsewhere))
            raise AssertionError("a tensor on another GPU was accepted")
        except KilnError as error:
            assert f"is on {elsewhere}" in str(error), str(error)


def check_wrong_dtype(load: Loader, device: torch.device) -> None:
    from kiln.errors import KilnError

    module = load("affine")
    x, y = _inputs("affine", device)
    try:
        module(x, y.double())
        raise AssertionError("a float64 input was accepted")
    except KilnError as error:
        assert "input 'y' has dtype float64; expected float32" in str(error), str(error)


def check_concurrent(load: Loader, device: torch.device) -> None:
    """8 threads call one module with inputs of their own; every result is checked."""
    module = load("affine")
    failures: list[str] = []

    def work(seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        for _ in range(25):
            x, y = (torch.randn(64, 256, generator=generator).to(device) for _ in range(2))
            try:
                _same(module(x, y), _eager("affine", x, y), device)
            except AssertionError as error:
                failures.append(f"thread {seed}: {error}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]
    assert module.copies == {}, f"copies: {module.copies}"


def check_dynamic(load: Loader, device: torch.device) -> None:
    """Dynamic batch: results sized from the manifest's expressions (2*batch), at several batches."""
    module = load("growing")
    for batch in (1, 5, 64):
        x = torch.randn(batch, 16, device=device)
        _same(module(x), _eager("growing", x), device)
    assert module.copies == {}, f"copies: {module.copies}"


def check_zero_size(load: Loader, device: torch.device) -> None:
    module = load("zero_size")
    x, y = _inputs("zero_size", device)
    _same(module(x, y), _eager("zero_size", x, y), device)


def check_requires_grad(load: Loader, device: torch.device) -> None:
    """An input that requires grad is read as is (its detached view shares the memory)."""
    module = load("affine")
    x, y = _inputs("affine", device)
    x.requires_grad_(True)
    _same(module(x, y), _eager("affine", x.detach(), y), device)
    assert module.copies == {}, f"copies: {module.copies}"


def check_stream_order(load: Loader, device: torch.device) -> None:
    """CUDA: the call sees what torch queued before it, on the default stream and on a side stream.

    torch queues a long sleep, then `x.fill_(5)`; IREE runs on its own stream, so without the
    runtime's synchronization it would read x before the fill and return 1 instead of 6.
    """
    if device.type != "cuda":
        return
    module = load("add_one")
    for stream in (torch.cuda.current_stream(device), torch.cuda.Stream(device)):
        with torch.cuda.stream(stream):
            x = torch.zeros(1024, 1024, device=device)
            torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU cycles
            x.fill_(5)
            result = module(x)
            assert torch.all(result == 6), f"read x before torch's fill: {result.flatten()[:4].tolist()}"
            followed = result * 2  # torch may use the result at once
        torch.cuda.synchronize(device)
        assert torch.all(followed == 12)


def check_without_out_variant(load: Loader, device: torch.device) -> None:
    """CUDA artifacts from before out variants: results through the host, counted, still right."""
    if device.type != "cuda":
        return
    module = load("affine:no-out-variant")
    x, y = _inputs("affine", device)
    _same(module(x, y), _eager("affine", x, y), device)
    assert module.copies == {"result through the host": 1}, f"copies: {module.copies}"


CHECKS: dict[str, Callable[[Loader, torch.device], None]] = {
    "zero copy": check_zero_copy,
    "dtypes": check_dtypes,
    "aliasing": check_aliasing,
    "lifetimes": check_lifetimes,
    "result reuse": check_result_reuse,
    "strided": check_strided,
    "misaligned": check_misaligned,
    "wrong device": check_wrong_device,
    "wrong dtype": check_wrong_dtype,
    "concurrent": check_concurrent,
    "dynamic": check_dynamic,
    "zero size": check_zero_size,
    "requires grad": check_requires_grad,
    "stream order": check_stream_order,
    "without out variant": check_without_out_variant,
}


def loader(folder: Path, device: str | None = None) -> Loader:
    """Load `<folder>/<name>.vmfb`; "name:no-out-variant" loads it with the manifest's out variants removed."""
    from kiln.runtime.manifest import Manifest, manifest_path
    from kiln.runtime.module import LoadedModule

    def load(name: str) -> Any:
        model, _, variant = name.partition(":")
        path = folder / f"{model}.vmfb"
        manifest = Manifest.from_json(manifest_path(path).read_text())
        if variant == "no-out-variant":
            manifest = replace(manifest, functions=tuple(replace(f, out_variant=None) for f in manifest.functions))
        return LoadedModule(path, manifest, device)

    return load


# ---------------------------------------------------------------------------------------------
# compile (here)


def compile_models(folder: Path, options: Any) -> None:
    """Every check model compiled with `options` (a CompileOptions) into `folder` as <name>.vmfb."""
    from kiln.compiler import run_pipeline, spec_from_module

    folder.mkdir(parents=True, exist_ok=True)
    for name, model in MODELS.items():
        print(f"compile {name} for {options.target} ...", file=sys.stderr)
        dynamic = model.dynamic_shapes() if model.dynamic_shapes else None
        compiled = run_pipeline(spec_from_module(model.module(), model.inputs(), dynamic), options).compiled
        assert compiled is not None
        compiled.save(folder / f"{name}.vmfb")


# ---------------------------------------------------------------------------------------------
# run (there)


@dataclass(frozen=True)
class Row:
    target: str
    check: str
    result: str  # "pass", "FAIL: ...", "skip: ..."
    seconds: float


def run_one(carry: Path, target: str, check: str) -> Row:
    """One check in this process."""
    folder = carry / TARGETS[target]
    device = torch.device("cuda", 0) if target == "cuda" else torch.device("cpu")
    if device.type == "cuda" and not torch.cuda.is_available():
        return Row(target, check, "skip: no CUDA device", 0.0)
    start = time.perf_counter()
    try:
        CHECKS[check](loader(folder, "cuda:0" if device.type == "cuda" else "cpu"), device)
        result = "pass"
    except Exception as exc:
        traceback.print_exc()
        result = f"FAIL: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return Row(target, check, result, time.perf_counter() - start)


def run_all(carry: Path, timeout_s: float) -> list[Row]:
    rows = []
    for target in TARGETS:
        for check in CHECKS:
            command = [sys.executable, __file__, "one", str(carry), target, check]
            start = time.perf_counter()
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                rows.append(Row(target, check, f"FAIL: no answer in {timeout_s:.0f} s (a hang)", timeout_s))
                continue
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not lines:
                why = (done.stderr.strip().splitlines() or ["no output"])[-1]
                rows.append(Row(target, check, f"FAIL: exit {done.returncode}: {why}", time.perf_counter() - start))
            else:
                rows.append(Row(**json.loads(lines[-1])))
            print(f"{target:8s} {check:20s} {rows[-1].result}", file=sys.stderr)
    return rows


def overheads(carry: Path) -> dict[str, dict[str, float]]:
    """Per-call overhead (median us) of each bundle's one-add model: kiln call, kiln, eager."""
    from kiln.measure.overhead import call_overhead
    from kiln.runtime.module import load

    found = {}
    for bundle in sorted(carry.glob("bench-*")):
        artifact = bundle / "one_add.vmfb"
        if not artifact.is_file():
            continue
        device = None if "cpu" in bundle.name else "cuda:0"
        if device and not torch.cuda.is_available():
            continue
        timings = call_overhead(load(artifact, device), device)
        found[bundle.name] = {name: round(timing.median_ms * 1e3, 2) for name, timing in timings.items()}
        print(f"{bundle.name}: {found[bundle.name]}", file=sys.stderr)
    return found


def table(rows: list[Row], overhead: dict[str, dict[str, float]]) -> str:
    lines = ["| target | check | result | s |", "|---|---|---|---|"]
    lines += [f"| {row.target} | {row.check} | {row.result} | {row.seconds:.1f} |" for row in rows]
    if overhead:
        lines += ["", "| bundle | kiln call us | kiln us | eager us |", "|---|---|---|---|"]
        lines += [f"| {name} | {t.get('kiln_call')} | {t.get('kiln')} | {t.get('eager')} |" for name, t in overhead.items()]
    return "\n".join(lines) + "\n"


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, help=__doc__)
def main() -> None:
    pass


@main.command("compile")
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True, help="The carry folder to write.")
@click.option("--gpu-arch", default="sm_80", show_default=True)
@click.option("--cpu", default="host", show_default=True, help="llvm-cpu: the device machine's CPU, e.g. sapphirerapids.")
def compile_command(out: Path, gpu_arch: str, cpu: str) -> None:
    """Compile the check models for cuda and llvm-cpu (here)."""
    from kiln.compiler import CompileOptions

    compile_models(out / TARGETS["cuda"], CompileOptions(target="cuda", gpu_arch=gpu_arch))
    compile_models(out / TARGETS["llvm-cpu"], CompileOptions(target="llvm-cpu", cpu=cpu))


@main.command("run")
@click.argument("carry", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the rows (.json) and the table (.md).")
@click.option("--timeout-s", type=float, default=120.0, show_default=True, help="Per check.")
def run_command(carry: Path, output: Path | None, timeout_s: float) -> None:
    """Run every check and time the overheads (there)."""
    rows = run_all(carry, timeout_s)
    overhead = overheads(carry)
    text = table(rows, overhead)
    click.echo(text)
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps({"checks": [asdict(r) for r in rows], "overhead_us": overhead}, indent=2))
        output.with_suffix(".md").write_text(text)
    if any(row.result.startswith("FAIL") for row in rows):
        sys.exit(1)


@main.command("one")
@click.argument("carry", type=click.Path(path_type=Path))
@click.argument("target", type=click.Choice(list(TARGETS)))
@click.argument("check", type=click.Choice(list(CHECKS)))
def one_command(carry: Path, target: str, check: str) -> None:
    """One check in this process (what `run` starts)."""
    click.echo(json.dumps(asdict(run_one(carry, target, check))))


if __name__ == "__main__":
    main()
