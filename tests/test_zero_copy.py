"""Zero-copy calls on the CPU: the checks of benchmarks/zero_copy_check.py, and what only the CPU has.

The shared checks (aliasing, lifetimes, strided, misaligned and wrong-device inputs, 8 threads,
dynamic sizes, dtypes) run here on llvm-cpu artifacts, once as the CPU calls them (IREE allocates
the results, exported by DLPack) and once through the out variants, as the CUDA runtime calls
them (torch allocates the results, IREE writes into them). The same checks run on a GPU from
artifacts compiled here (`zero_copy_check.py run`); the gpu-marked test runs them where one is
visible.
"""

from __future__ import annotations

import sys
import warnings

import iree.runtime as rt
import numpy as np
import pytest
import torch
from conftest import ROOT, gpu

import kiln
from kiln.compiler import CompileOptions
from kiln.errors import KilnError
from kiln.runtime import boundary as boundary_module
from kiln.runtime import executors
from kiln.runtime.boundary import HostBoundary, KilnCopyWarning, StagedBoundary
from kiln.runtime.manifest import Manifest
from kiln.runtime.plans import evaluate

sys.path.insert(0, str(ROOT / "benchmarks"))
import zero_copy_check as checks  # benchmarks/ holds scripts, not a package

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def cpu_artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zero-copy-cpu")
    checks.compile_models(folder, CompileOptions(target="llvm-cpu"))
    return folder


@pytest.mark.parametrize("check", [name for name in checks.CHECKS if name not in ("stream order", "without out variant")])
def test_check_on_cpu(cpu_artifacts, check):
    checks.CHECKS[check](checks.loader(cpu_artifacts), CPU)


@pytest.mark.parametrize(
    "check", ["zero copy", "dtypes", "aliasing", "lifetimes", "result reuse", "concurrent", "dynamic", "zero size"]
)
def test_check_on_cpu_through_out_variants(cpu_artifacts, check, monkeypatch):
    """The CUDA route on the CPU: results allocated by torch, written by IREE through `main$out`."""
    monkeypatch.setattr(HostBoundary, "storage_results", True)
    load = checks.loader(cpu_artifacts)
    module = load("affine")
    assert module.functions["main"]._out_function is not None  # the route under test is taken
    checks.CHECKS[check](load, CPU)


@pytest.fixture(scope="module")
def cuda_artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zero-copy-cuda")
    checks.compile_models(folder, CompileOptions(target="cuda"))
    return folder


@gpu
@pytest.mark.parametrize("check", list(checks.CHECKS))
def test_check_on_cuda(cuda_artifacts, check):
    checks.CHECKS[check](checks.loader(cuda_artifacts, "cuda:0"), torch.device("cuda", 0))


# ---------------------------------------------------------------------------------------------------
# Out variants: what kiln hands IREE at both hand-offs, called directly


@pytest.mark.parametrize("handoff", ["linalg", "torch"])
def test_out_variant_writes_into_caller_storage_at_both_handoffs(handoff):
    """`main$out(x, out0, out1, out2)` fills the caller's tensors, also where `main` returns x itself."""
    compiled = kiln.compile(checks.Passthrough(), (torch.randn(16, 32),), handoff=handoff)
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


def test_artifacts_without_out_variants_use_the_plain_call(monkeypatch):
    """A manifest without out variants (older artifacts) loads, and calls go through `main`."""
    compiled = kiln.compile(checks.AddOne(), (torch.zeros(4),))
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
    return checks.loader(cpu_artifacts)


def test_numpy_arrays_enter_as_they_are_where_memory_allows(affine):
    module = affine("affine")
    x, y = (torch.randn(64, 256) for _ in range(2))
    expected = checks._eager("affine", x, y)[0]
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
    inputs = checks._dtype_inputs()
    arrays = [x.view(torch.int16).numpy().view(np.dtype("bfloat16")) if x.dtype == torch.bfloat16 else x.numpy() for x in inputs]
    results = module(*arrays, as_numpy=True)
    for got, want in zip(results, checks._eager("dtypes", *inputs), strict=True):
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
        torch.testing.assert_close(module(x, y), checks._eager("affine", x, y)[0])
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
    checks.check_concurrent(lambda name: module, CPU)
    assert most[0] == 1


def test_the_staged_route_of_other_gpus_on_the_cpu(affine, monkeypatch):
    """Vulkan and ROCm go through host memory: the same route, tried on the CPU device."""
    monkeypatch.setattr(
        "kiln.runtime.module.boundary_for", lambda device, kind, index: StagedBoundary(device)
    )
    checks.check_dtypes(affine, CPU)
    checks.check_aliasing(affine, CPU)


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


def test_inputs_only_read_are_not_listed_as_overwritten():
    compiled = kiln.compile(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    assert compiled.manifest.functions[0].overwritten == ()
