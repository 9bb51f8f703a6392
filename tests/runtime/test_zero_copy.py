"""Zero-copy calls, checked where the artifacts run: the runtime's call path on the CPU and on a CUDA GPU.

Each check loads small artifacts and calls them as users do, with torch tensors on the artifact's
device, and asserts what kiln.runtime promises: no copies where memory allows, results equal to
eager PyTorch's, on the right device, never aliasing the inputs, outliving the module; strided,
misaligned and wrong-device inputs copied (counted) or refused with a KilnError; calls from
several threads correct; on CUDA, ordered after the work torch queued.

On the CPU (CI) the checks run on llvm-cpu artifacts compiled here, once as the CPU calls them (IREE
allocates the results, exported by DLPack) and once through the out variants, as the CUDA runtime
calls them (torch allocates the results, IREE writes into them); then what only the CPU has (numpy,
the executor choice, the staged route of the other GPUs). The `gpu`-marked tests run the same checks
on CUDA, and skip where IREE sees no CUDA device.

A GPU machine without the compiler runs them from artifacts compiled here, carried there:

    # here: the check models for cuda and for the device machine's CPU
    python tests/runtime/test_zero_copy.py -o .device-carry/zero-copy --gpu-arch sm_80 --cpu sapphirerapids
    # there, from the repository root, with kiln.runtime importable (benchmarks/README.md says how;
    # -P keeps the checkout's bare kiln/ folder from shadowing the installed package);
    # --confcutdir leaves out tests/conftest.py, which imports the compiler
    KILN_ZERO_COPY_ARTIFACTS=.device-carry/zero-copy python3 -P -m pytest tests/runtime/test_zero_copy.py \
        --confcutdir tests/runtime -p no:cacheprovider --timeout 120 -v

There the tests that compile (they call kiln.compile) skip; the checks run on the carried artifacts,
for cuda and for the machine's CPU. (`--timeout` is pytest-timeout's: a hang fails its test.)
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import iree.runtime as rt
import numpy as np
import pytest
import torch
from torch import nn
from visible_devices import gpu

import kiln
from kiln.errors import KilnError
from kiln.runtime import boundary as boundary_module
from kiln.runtime import executors
from kiln.runtime.boundary import HostBoundary, KilnCopyWarning, StagedBoundary
from kiln.runtime.manifest import Manifest
from kiln.runtime.plans import evaluate
from kiln.targets import TARGETS as TARGET_ROOMS

CPU = torch.device("cpu")
CARRIED = "KILN_ZERO_COPY_ARTIFACTS"  # a folder the __main__ below wrote: <folder>/cuda, <folder>/cpu
TARGETS = {"cuda": "cuda", "llvm-cpu": "cpu"}  # kiln target -> its folder of artifacts (and torch device kind)


compiler = pytest.mark.skipif(
    importlib.util.find_spec("torch_mlir") is None, reason="compiles: the compiler (torch-mlir) is not installed here"
)


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
# The artifacts: compiled here, or carried from where the compiler is


def compile_models(folder: Path, options: Any) -> None:
    """Every check model compiled with `options` (a CompileOptions) into `folder` as <name>.vmfb."""
    from kiln.compiler import run_pipeline, spec_from_module

    folder.mkdir(parents=True, exist_ok=True)
    for name, model in MODELS.items():
        print(f"compile {name} for {options.target} ...", file=sys.stderr)
        dynamic = model.dynamic_shapes() if model.dynamic_shapes else None
        compiled = run_pipeline(spec_from_module(model.module(), model.inputs(), dynamic), options).compiled
        compiled.save(folder / f"{name}.vmfb")


def _artifacts(target: str, factory: pytest.TempPathFactory, **options: Any) -> Path:
    """The check models for `target`: carried (KILN_ZERO_COPY_ARTIFACTS), or compiled here."""
    if os.environ.get(CARRIED):
        return Path(os.environ[CARRIED]) / TARGETS[target]
    from kiln.compiler import CompileOptions

    folder = factory.mktemp(f"zero-copy-{TARGETS[target]}")
    compile_models(folder, CompileOptions(target=target, **options))
    return folder


# ---------------------------------------------------------------------------------------------------
# The checks on the CPU, and on CUDA where a device is visible


@pytest.fixture(scope="module")
def cpu_artifacts(tmp_path_factory):
    return _artifacts("llvm-cpu", tmp_path_factory)


@pytest.mark.parametrize("check", [name for name in CHECKS if name not in ("stream order", "without out variant")])
def test_check_on_cpu(cpu_artifacts, check):
    CHECKS[check](loader(cpu_artifacts), CPU)


@pytest.fixture(scope="module")
def cpu_out_artifacts(tmp_path_factory):
    """The check models for llvm-cpu with out variants, which only CUDA artifacts get otherwise."""
    if os.environ.get(CARRIED):
        pytest.skip("carried artifacts: the CUDA checks take this route on the device")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(TARGET_ROOMS, "llvm-cpu", replace(TARGET_ROOMS["llvm-cpu"], out_variants=True))
        return _artifacts("llvm-cpu", tmp_path_factory)


@pytest.mark.parametrize(
    "check", ["zero copy", "dtypes", "aliasing", "lifetimes", "result reuse", "concurrent", "dynamic", "zero size"]
)
def test_check_on_cpu_through_out_variants(cpu_out_artifacts, check, monkeypatch):
    """The CUDA route on the CPU: results allocated by torch, written by IREE through `main$out`."""
    monkeypatch.setattr(HostBoundary, "storage_results", True)
    load = loader(cpu_out_artifacts)
    module = load("affine")
    assert module.functions["main"]._out_function is not None  # the route under test is taken
    CHECKS[check](load, CPU)


@pytest.fixture(scope="module")
def cuda_artifacts(tmp_path_factory):
    return _artifacts("cuda", tmp_path_factory)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("check", list(CHECKS))
def test_check_on_cuda(cuda_artifacts, check):
    CHECKS[check](loader(cuda_artifacts, "cuda:0"), torch.device("cuda", 0))


# ---------------------------------------------------------------------------------------------------
# Out variants: what kiln hands IREE at both hand-offs, called directly


@pytest.fixture
def cpu_out_variants(monkeypatch):
    """llvm-cpu compiles out variants, as cuda does, for the tests below."""
    monkeypatch.setitem(TARGET_ROOMS, "llvm-cpu", replace(TARGET_ROOMS["llvm-cpu"], out_variants=True))


def test_only_cuda_artifacts_get_out_variants():
    """Each variant compiles the whole body again; only the CUDA runtime calls them."""
    assert [name for name, room in TARGET_ROOMS.items() if room.out_variants] == ["cuda"]
    assert HostBoundary.storage_results is False


@compiler
@pytest.mark.parametrize("handoff", ["linalg", "torch"])
def test_out_variant_writes_into_caller_storage_at_both_handoffs(handoff, cpu_out_variants):
    """`main$out(x, out0, out1, out2)` fills the caller's tensors, also where `main` returns x itself."""
    compiled = kiln.compile(Passthrough(), (torch.randn(16, 32),), handoff=handoff)
    (function,) = compiled.manifest.functions
    assert function.out_variant == "main$out"
    device = rt.get_device("local-task")
    instance = rt.VmInstance()
    vm_module = rt.VmModule.copy_buffer(instance, compiled.vmfb)
    context = rt.VmContext(instance, modules=[rt.create_hal_module(instance, device), vm_module])
    x = torch.randn(16, 32)
    storage = [torch.full((16, 32), 7.0), torch.full((15, 32), 7.0), torch.full((16, 32), 7.0)]
    arguments = rt.VmVariantList(4)
    for tensor in (x, *storage):
        arguments.push_ref(device.from_dlpack_capsule(torch.utils.dlpack.to_dlpack(tensor)))
    context.invoke(vm_module.lookup_function("main$out"), arguments, rt.VmVariantList(3))
    for got, want in zip(storage, (x, x[1:], x + 1), strict=True):
        assert torch.equal(got, want)


@compiler
def test_artifacts_without_out_variants_use_the_plain_call(monkeypatch, cpu_out_variants):
    """A manifest without out variants (older artifacts) loads, and calls go through `main`."""
    compiled = kiln.compile(AddOne(), (torch.zeros(4),))
    data = compiled.manifest.to_json().replace('"out_variant": "main$out"', '"out_variant": null')
    manifest = Manifest.from_json(data)
    assert manifest.functions[0].out_variant is None
    monkeypatch.setattr(HostBoundary, "storage_results", True)
    module = kiln.runtime.LoadedModule(compiled.vmfb, manifest)
    assert module.functions["main"]._out_function is None
    assert torch.equal(module(torch.ones(4)), torch.full((4,), 2.0))


# ---------------------------------------------------------------------------------------------------
# CPU only: numpy, the executor choice, the staged route


@pytest.fixture(scope="module")
def affine(cpu_artifacts):
    return loader(cpu_artifacts)


def test_numpy_arrays_enter_as_they_are_where_memory_allows(affine):
    module = affine("affine")
    x, y = (torch.randn(64, 256) for _ in range(2))
    expected = _eager("affine", x, y)[0]
    aligned = x.numpy(), y.numpy()  # torch's allocations start on 64 bytes
    torch.testing.assert_close(module(*aligned), expected)
    assert module.copies == {}
    frozen = y.numpy().copy()
    frozen.flags.writeable = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(module(x.numpy(), frozen), expected)
    assert module.copies == {"read-only numpy array": 1}
    assert [w.category for w in caught] == [KilnCopyWarning]
    assert caught[0].filename == __file__  # the warning points at the caller's line


def test_numpy_results_and_bf16_arrays(affine):
    module = affine("dtypes")
    inputs = _dtype_inputs()
    arrays = [x.view(torch.int16).numpy().view(np.dtype("bfloat16")) if x.dtype == torch.bfloat16 else x.numpy() for x in inputs]
    results = module(*arrays, as_numpy=True)
    for got, want in zip(results, _eager("dtypes", *inputs), strict=True):
        assert isinstance(got, np.ndarray) and got.dtype.name == str(want.dtype).removeprefix("torch.")
        as_torch = torch.from_numpy(got.view(np.int16)).view(torch.bfloat16) if want.dtype == torch.bfloat16 else torch.from_numpy(got)
        assert torch.equal(as_torch, want)


def test_cpu_calls_choose_one_thread_for_tiny_work_and_keep_results(affine):
    module = affine("add_one")
    x = torch.zeros(1024, 1024)
    for _ in range(executors.CALLS_TO_CHOOSE + 1):
        assert torch.equal(module(x), torch.ones(1024, 1024))
    assert set(module.executor.chosen().values()) <= {"local-task", "local-sync"} and module.executor.chosen()


def test_cpu_trials_alternate_between_the_two_drivers(affine, monkeypatch):
    """One untimed call on local-task, then local-task and local-sync in turn, so that whatever slows
    the first calls (cold memory, a busy machine) falls on both; then the choice is made."""
    order = []
    timed_invoke = executors.Context.timed_invoke

    def recorded(self, *args):
        order.append(self.name)
        return timed_invoke(self, *args)

    monkeypatch.setattr(executors.Context, "timed_invoke", recorded)
    monkeypatch.setattr(executors, "HOPELESS", float("inf"))  # no early choice either way
    module = affine("affine")
    x, y = (torch.randn(64, 256) for _ in range(2))
    for _ in range(executors.CALLS_TO_CHOOSE + 2):
        module(x, y)
    assert order == ["local-task"] + ["local-task", "local-sync"] * executors.TRIALS
    assert len(module.executor.chosen()) == 1


@compiler
def test_an_artifact_with_state_keeps_one_context(tmp_path):
    """A buffer forward mutates is a global of the VM context: a second context (local-sync) would
    count from the start again, so a stateful artifact runs every call in one."""
    from kiln.conformance.modules import Counter

    compiled = kiln.compile(Counter(), (torch.ones(3, 5),), target="llvm-cpu")
    module = kiln.load(compiled.save(tmp_path / "counter.vmfb"))
    assert type(module.executor) is executors.Executor
    for count in range(1, executors.CALLS_TO_CHOOSE + 4):
        assert torch.equal(module(torch.ones(3, 5)), torch.full((3, 5), float(count)))


def test_slow_enough_calls_stay_on_the_thread_pool(affine, monkeypatch):
    monkeypatch.setattr(executors, "THREADED_ENOUGH_NS", 0)
    module = affine("affine")
    x, y = (torch.randn(64, 256) for _ in range(2))
    for _ in range(executors.CALLS_TO_CHOOSE):
        torch.testing.assert_close(module(x, y), _eager("affine", x, y)[0])
    assert list(module.executor.chosen().values()) == ["local-task"]
    assert module.executor._sync is None  # never made


def test_a_chosen_context_serves_calls_one_at_a_time(affine, monkeypatch):
    """Two threads in one VM context at once would break IREE's rule: the context's lock holds them apart."""
    module = affine("affine")
    context = module.executor.context
    inside, most = [0], [0]
    real_invoke = context._vm.invoke

    class Counting:
        def invoke(self, *args):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            real_invoke(*args)
            inside[0] -= 1

    monkeypatch.setattr(context, "_vm", Counting())
    monkeypatch.setattr(executors, "THREADED_ENOUGH_NS", 0)  # every call on this context
    check_concurrent(lambda name: module, CPU)
    assert most[0] == 1


def test_the_staged_route_of_other_gpus_on_the_cpu(affine, monkeypatch):
    """Vulkan and ROCm go through host memory: the same route, tried on the CPU device."""
    monkeypatch.setattr(
        "kiln.runtime.module.boundary_for", lambda device, kind, index: StagedBoundary(device)
    )
    check_dtypes(affine, CPU)
    check_aliasing(affine, CPU)


def test_meta_and_non_tensor_inputs_are_named(affine):
    module = affine("affine")
    with pytest.raises(KilnError, match=r"input 'y' must be a torch.Tensor or numpy array, got list"):
        module(torch.randn(64, 256), [[1.0]])
    with pytest.raises(KilnError, match=r"input 'x' is on meta; the artifact runs on cpu"):
        module(torch.empty(64, 256, device="meta"), torch.randn(64, 256))


@pytest.mark.parametrize(
    ("expression", "sizes", "value"),
    [
        ("s0", {"s0": 5}, 5),
        ("2*s77", {"s77": 3}, 6),
        ("s0 + s1 - 1", {"s0": 4, "s1": 2}, 5),
        ("(s0 - 1)//2 + 1", {"s0": 9}, 5),
        ("Max(1, s0 - 4)", {"s0": 2}, 1),
        ("CeilDiv(s0, 4)", {"s0": 9}, 3),
        ("s0/2", {"s0": 4}, None),  # true division: not integer arithmetic
        ("s9", {"s0": 4}, None),  # no input set it
        ("exp(s0)", {"s0": 1}, None),
    ],
)
def test_result_sizes_from_the_manifests_expressions(expression, sizes, value):
    assert evaluate(expression, sizes) == value


def test_copies_warn_once_per_reason_and_count_every_one():
    copies = boundary_module.Copies()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            copies.count("not contiguous", "input 'x'")
        copies.count("read-only numpy array", "input 'y'")
    assert copies.counts == {"not contiguous": 3, "read-only numpy array": 1} and copies.total == 4
    assert len(caught) == 2


class ScatterInto(torch.nn.Module):
    """IREE computes the scatter into its destination; here that is the argument `x` itself."""

    def forward(self, x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        return x.scatter_add(0, index, src)


class SortThenScale(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sort(x, dim=0).values * y


@compiler
@pytest.mark.parametrize("handoff", ["linalg", "torch"])
def test_inputs_iree_would_write_into_are_copied_and_the_callers_stay_unchanged(handoff):
    x, index, src = torch.randn(4, 4), torch.randint(0, 4, (3, 4)), torch.randn(3, 4)
    scatter = kiln.compile(ScatterInto(), (x, index, src), handoff=handoff)
    assert 0 in scatter.manifest.functions[0].overwritten
    before = x.clone()
    torch.testing.assert_close(scatter(x, index, src), before.scatter_add(0, index, src))
    torch.testing.assert_close(scatter(x, index, src), before.scatter_add(0, index, src))  # twice: x as it was
    assert torch.equal(x, before)
    module = scatter.load()
    assert module.copies.get("the artifact writes into it", 0) >= 2
    a, y = torch.randn(8, 4), torch.randn(8, 4)
    sort = kiln.compile(SortThenScale(), (a, y), handoff=handoff)
    kept = a.clone()
    torch.testing.assert_close(sort(a, y), torch.sort(kept, dim=0).values * y)
    assert torch.equal(a, kept)


@compiler
def test_inputs_only_read_are_not_listed_as_overwritten():
    compiled = kiln.compile(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    assert compiled.manifest.functions[0].overwritten == ()


# ---------------------------------------------------------------------------------------------------
# For a machine without the compiler: the artifacts, compiled here


def main() -> None:
    parser = argparse.ArgumentParser(description="Compile the zero-copy check models for cuda and llvm-cpu, to carry.")
    parser.add_argument("-o", "--out", type=Path, required=True, help="The folder to write (cuda/ and cpu/ in it).")
    parser.add_argument("--gpu-arch", default="sm_80", help="cuda's architecture [default: sm_80].")
    parser.add_argument("--cpu", default="host", help="llvm-cpu: the device machine's CPU, e.g. sapphirerapids [default: host].")
    arguments = parser.parse_args()
    from kiln.compiler import CompileOptions

    compile_models(arguments.out / TARGETS["cuda"], CompileOptions(target="cuda", gpu_arch=arguments.gpu_arch))
    compile_models(arguments.out / TARGETS["llvm-cpu"], CompileOptions(target="llvm-cpu", cpu=arguments.cpu))
    print(f"wrote {arguments.out}/; there: {CARRIED}={arguments.out} python3 -P -m pytest tests/runtime/test_zero_copy.py --confcutdir tests/runtime")


if __name__ == "__main__":
    main()
