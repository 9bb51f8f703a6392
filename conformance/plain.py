"""The plain stack beneath kiln, for comparison: the same case through torch-mlir and IREE alone.

What a user without kiln would write: `torch_mlir.fx.export_and_import(module, *inputs,
output_type="linalg-on-tensors")` (torch.export, torch-mlir's decompositions and frozen import, its
linalg lowering), then `iree-compile` for llvm-cpu with only the flags that pick the device, then
`iree.runtime`. Its outcome is recorded beside kiln's, so that a case kiln fails and this path
passes stands out: kiln must never be worse than the stack beneath it.

The plain path has no calling convention, so it is given the benefit of the doubt: it is called
with the leaves of forward's arguments (tensors as numpy arrays, float64 as float32 where IREE
demoted it, Python scalars as they are), its results are read where torch.export's graph signature
puts forward's outputs, and each is compared with eager's leaf after conversion to eager's dtype
(IREE's int8 read as uint8, float32 as float64). Nesting, inputs mutated in place and state kept
across calls are not asked of it; kiln's check (runner.check_calls) asks all of them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.export.graph_signature import OutputKind
from torch.utils._pytree import tree_flatten

from .runner import FAILS, PASS, Case, Outcome, compare, error_line

PLAIN_FLAGS = {
    "llvm-cpu": (
        "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=llvm-cpu",
        "--iree-llvmcpu-target-cpu=host",
    )
}


def check_plain(case: Case, target: str = "llvm-cpu", on_stage: Callable[[str], None] = lambda stage: None) -> Outcome:
    """The case through the plain stack, compared with eager PyTorch (leniently, see above)."""
    if target not in PLAIN_FLAGS:
        return Outcome(FAILS, "options", f"the plain path runs on {', '.join(PLAIN_FLAGS)} only")
    stage = "exported"
    try:
        on_stage(stage)
        module, inputs = case.module(), case.inputs()
        with torch.no_grad():
            program = torch.export.export(module, inputs)
        stage = "linalg"
        on_stage(stage)
        from torch_mlir.extras.fx_decomp_util import get_decomposition_table
        from torch_mlir.fx import export_and_import

        program = program.run_decompositions(get_decomposition_table())
        user_outputs = [index for index, spec in enumerate(program.graph_signature.output_specs) if spec.kind == OutputKind.USER_OUTPUT]
        with _diagnostics() as printed:
            try:
                linalg = export_and_import(program, output_type="linalg-on-tensors", decomposition_table={})
            except Exception as error:  # its message says only that the lowering failed; MLIR printed why
                raise PlainFailure(next((line for line in printed() if "error:" in line), str(error))) from error
        stage = "vmfb"
        on_stage(stage)
        vmfb = _iree_compile(str(linalg), PLAIN_FLAGS[target])
        stage = "runtime"
        on_stage(stage)
        function = _load(vmfb)
        eager = case.module()
        for call in range(case.calls):
            eager_inputs = case.inputs()
            with torch.no_grad():
                expected = eager(*eager_inputs)
            results = function(*_arguments(case.inputs()))
            results = results if isinstance(results, tuple) else (results,)
            want, _ = tree_flatten(expected)
            got = [_as_eager(results[index], leaf) for index, leaf in zip(user_outputs, want, strict=False)]
            if len(user_outputs) != len(want):
                return Outcome("mismatch", detail=f"{len(user_outputs)} outputs, eager has {len(want)}")
            outcome = compare(want, got, case.tolerance)
            if not outcome.ok:
                return Outcome(outcome.status, detail=f"call {call + 1}: {outcome.detail}") if case.calls > 1 else outcome
        return Outcome(PASS)
    except PlainFailure as failure:
        return Outcome(FAILS, stage, error_line(str(failure)))
    except Exception as error:
        return Outcome(FAILS, stage, f"{type(error).__name__}: {error_line(str(error))}")


class PlainFailure(Exception):
    """The plain stack failed, and this is the line that says why (MLIR's or iree-compile's error)."""


@contextlib.contextmanager
def _diagnostics() -> Iterator[Callable[[], list[str]]]:
    """What MLIR prints to the process's stderr meanwhile, as lines (torch-mlir's errors go there)."""
    with tempfile.TemporaryFile(mode="w+") as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)

        def lines() -> list[str]:
            captured.flush()
            captured.seek(0)
            return captured.read().splitlines()

        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _iree_compile(text: str, flags: tuple[str, ...]) -> bytes:
    from iree.compiler.tools.binaries import find_tool

    with tempfile.TemporaryDirectory(prefix="kiln-plain-") as folder:
        source, output = Path(folder, "input.mlir"), Path(folder, "output.vmfb")
        source.write_text(text)
        result = subprocess.run([find_tool("iree-compile"), str(source), *flags, "-o", str(output)], capture_output=True, text=True)
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if "error:" in line]
            if result.returncode < 0 or "Stack dump:" in result.stderr:
                raise PlainFailure(f"iree-compile crashed (exit code {result.returncode})" + (f" after: {errors[0]}" if errors else ""))
            raise PlainFailure(f"iree-compile failed: {errors[0] if errors else result.stderr.strip()[-200:]}")
        return output.read_bytes()


def _load(vmfb: bytes) -> Any:
    import iree.runtime as rt

    config = rt.Config("local-task")
    context = rt.SystemContext(config=config)
    context.add_vm_module(rt.VmModule.copy_buffer(context.instance, vmfb))
    return context.modules.module["main"]


def _arguments(inputs: tuple[Any, ...]) -> list[Any]:
    """forward's argument leaves as the plain function takes them: numpy arrays and Python scalars."""
    leaves, _ = tree_flatten(inputs)
    arguments = []
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            arguments.append(leaf)
        elif leaf.dtype == torch.float64:
            arguments.append(leaf.float().numpy())  # IREE demotes float64 to float32 by default
        elif leaf.dtype == torch.bfloat16:
            arguments.append(leaf.float().numpy())  # numpy has no bf16; the plain function then fails on it
        else:
            arguments.append(leaf.detach().contiguous().numpy())
    return arguments


def _as_eager(result: Any, want: Any) -> Any:
    """A plain result as eager's leaf's type: a tensor of its dtype, or a Python scalar."""
    value = result.to_host() if hasattr(result, "to_host") else result
    if not isinstance(want, torch.Tensor):
        if isinstance(value, np.ndarray):
            value = value.item()
        return type(want)(value) if isinstance(want, (int, float, bool)) and value is not None else value
    array = np.asarray(value)
    tensor = torch.from_numpy(array.copy()) if array.dtype.kind != "V" else torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    if tensor.dtype != want.dtype and tensor.element_size() == want.element_size() and not want.is_floating_point() and want.dtype != torch.bool:
        return tensor.view(want.dtype)  # IREE's signless integers: the same bits
    return tensor.to(want.dtype)
