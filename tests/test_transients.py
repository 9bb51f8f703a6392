"""Transient variants (kiln.compiler.transients, kiln.runtime.transients): a CPU call keeps its
intermediate tensors in storage the runtime maps once, and its results never live there."""

from __future__ import annotations

import threading

import iree.runtime as rt
import numpy as np
import pytest
import torch
from torch import nn

import kiln
from kiln.compiler.transients import largest_intermediate
from kiln.runtime.manifest import Manifest, ManifestError, check_manifest_json
from kiln.targets.llvm_cpu.target import TRANSIENT_VARIANTS_FROM

BATCH = 8192  # hidden activations of 8 MiB: above the size from which llvm-cpu adds the variant


class TwoLayers(nn.Module):
    """Linear, GELU, Linear: the hidden activations are an intermediate no fusion removes."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.up, self.down = nn.Linear(64, 256), nn.Linear(256, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.gelu(self.up(x)))


@pytest.fixture(scope="module")
def compiled():
    return kiln.compile(TwoLayers(), (torch.randn(BATCH, 64),))


def _size(compiled) -> int:
    vm_module = rt.VmModule.copy_buffer(rt.VmInstance(), compiled.vmfb)
    return int(vm_module.lookup_function("main$transients").reflection["iree.abi.transients.size.constant"])


def test_cpu_artifact_has_a_transient_variant(compiled):
    (function,) = compiled.manifest.functions
    assert function.transients_variant == "main$transients"
    assert _size(compiled) >= BATCH * 256 * 4  # at least the hidden activations


def test_calls_use_the_storage_and_results_outlive_the_next_call(compiled):
    model = TwoLayers().eval()
    module = kiln.runtime.LoadedModule(compiled.vmfb, compiled.manifest)
    first, second = torch.randn(BATCH, 64), torch.randn(BATCH, 64)
    y1 = module(first)
    y2 = module(second)  # same storage: a result living there would now hold the second call's values
    with torch.no_grad():
        torch.testing.assert_close(y1, model(first), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(y2, model(second), rtol=1e-5, atol=1e-5)
    contexts = [module.executor.context, module.executor._sync]
    assert max(context.storage.size for context in contexts if context is not None) == _size(compiled)


def test_threads_calling_at_once_get_their_own_results(compiled):
    model = TwoLayers().eval()
    module = kiln.runtime.LoadedModule(compiled.vmfb, compiled.manifest)
    inputs = [torch.randn(BATCH, 64) for _ in range(8)]
    outputs: list[torch.Tensor | None] = [None] * len(inputs)

    def call(index: int) -> None:
        for _ in range(10):
            outputs[index] = module(inputs[index])

    threads = [threading.Thread(target=call, args=(index,)) for index in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with torch.no_grad():
        for x, y in zip(inputs, outputs, strict=True):
            torch.testing.assert_close(y, model(x), rtol=1e-5, atol=1e-5)


def test_the_plain_function_still_takes_inputs_alone(compiled):
    """Tools (iree-run-module, iree-benchmark-module) call `main` without storage."""
    device = rt.get_device("local-task")
    instance = rt.VmInstance()
    vm_module = rt.VmModule.copy_buffer(instance, compiled.vmfb)
    context = rt.VmContext(instance, modules=[rt.create_hal_module(instance, device), vm_module])
    x = torch.randn(BATCH, 64)
    arguments = rt.VmVariantList(1)
    arguments.push_ref(device.from_dlpack_capsule(torch.utils.dlpack.to_dlpack(x)))
    results = rt.VmVariantList(1)
    context.invoke(vm_module.lookup_function("main"), arguments, results)
    y = torch.from_numpy(results.get_as_object(0, rt.HalBufferView).map().asarray((BATCH, 64), np.dtype("float32")).copy())
    with torch.no_grad():
        torch.testing.assert_close(y, TwoLayers().eval()(x), rtol=1e-5, atol=1e-5)


def test_small_intermediates_get_no_variant():
    """Below TRANSIENT_VARIANTS_FROM the variant costs a second compile of the body and saves nothing."""
    compiled = kiln.compile(TwoLayers(), (torch.randn(32, 64),))
    assert compiled.manifest.functions[0].transients_variant is None
    assert 32 * 256 * 4 < TRANSIENT_VARIANTS_FROM <= BATCH * 256 * 4


def test_largest_intermediate_counts_what_ops_make_not_constants():
    from torch_mlir import ir

    from kiln.compiler.functions import functions_by_name

    text = """
    func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xbf16> {
      %w = arith.constant dense<1.0> : tensor<1024x1024xf32>
      %e = tensor.empty() : tensor<4x8x16xf32>
      %b = tensor.empty() : tensor<4x8xbf16>
      return %b : tensor<4x8xbf16>
    }"""
    with ir.Context():
        module = ir.Module.parse(text)
        assert largest_intermediate(functions_by_name(module)["main"]) == 4 * 8 * 16 * 4


def test_dynamic_shapes_get_no_variant():
    batch = torch.export.Dim("batch", min=2, max=64)
    compiled = kiln.compile(TwoLayers(), (torch.randn(8, 64),), dynamic_shapes=({0: batch},))
    assert compiled.manifest.functions[0].transients_variant is None
    x = torch.randn(5, 64)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), TwoLayers().eval()(x), rtol=1e-5, atol=1e-5)


def test_manifest_names_the_variant_it_has(compiled):
    import json

    data = json.loads(compiled.manifest.to_json())
    data["functions"][0]["transients_variant"] = "other$transients"
    with pytest.raises(ManifestError, match=r"functions\[0\]\.transients_variant: 'other\$transients' is not 'main\$transients'"):
        check_manifest_json(data)
    data["functions"][0]["transients_variant"] = None
    module = kiln.runtime.LoadedModule(compiled.vmfb, Manifest.from_json(json.dumps(data)))
    assert module.functions["main"]._transients_function is None
    x = torch.randn(BATCH, 64)
    with torch.no_grad():
        torch.testing.assert_close(module(x), TwoLayers().eval()(x), rtol=1e-5, atol=1e-5)


def test_a_compile_the_variants_break_goes_on_without_them(monkeypatch):
    """Like a lever, the variants are left out where iree-compile fails with them: the artifact is
    the plain one, and a note says why."""
    from kiln.compiler import CompileOptions, run_pipeline, spec_from_module
    from kiln.compiler.stages import vmfb
    from kiln.errors import KilnError

    build = vmfb._build

    def failing_with_the_variants(program, context):
        if "$transients" in str(program):
            raise KilnError("iree-compile failed: (a failure the variants cause)", stage="vmfb")
        return build(program, context)

    monkeypatch.setattr(vmfb, "_build", failing_with_the_variants)
    notes: list[str] = []
    x = torch.randn(BATCH, 64)
    compiled = run_pipeline(spec_from_module(TwoLayers(), (x,)), CompileOptions(), say=notes.append).compiled
    assert compiled.manifest.functions[0].transients_variant is None
    assert [line for line in notes if "transient" in line] == [
        "note: iree-compile failed with kiln's transient variants (iree-compile failed: (a failure the variants cause)); "
        "compiled without them"
    ]
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), TwoLayers().eval()(x), rtol=1e-5, atol=1e-5)
