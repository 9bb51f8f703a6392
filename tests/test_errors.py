"""Bad input gets one clear message naming the problem, no traceback, and no artifact."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kiln.cli.main import kiln
from kiln.compiler.iree_backend import _failure as iree_failure

MODELS = Path(__file__).parent / "models"
KILN = str(Path(sys.executable).parent / "kiln")  # the console script of this environment


def compile_cli(tmp_path: Path, model: Path, *extra: str):
    output = tmp_path / "out.vmfb"
    result = CliRunner().invoke(kiln, ["compile", str(model), "-o", str(output), "-q", *extra])
    return result, output


@pytest.mark.parametrize(
    ("model", "extra", "message"),
    [
        (MODELS / "missing.py", (), r"model file not found: .*missing\.py"),
        (
            MODELS / "raises_on_import.py",
            (),
            r"raises_on_import\.py:4 raised RuntimeError while being imported: the weights file is missing",
        ),
        (
            MODELS / "no_model.py",
            (),
            r"defines no `model` or `get_model\(\)`; modules and factories found: decoder, encoder, get_weights",
        ),
        (MODELS / "no_model.py", ("--model", "encoder", "--inputs", "nope"), r"defines no `nope`"),
        (MODELS / "no_inputs.py", (), r"defines no `example_inputs` or `get_example_inputs\(\)`"),
        (MODELS / "bad_inputs.py", (), r"`example_inputs` must be a tuple of tensors \(or Python scalars, or tuples, lists and dicts of them\), got Tensor, set"),
        (
            MODELS / "data_dependent.py",
            (),
            r"\[exported\] .*torch.export failed at \S*data_dependent\.py:6 \(`if x\.sum\(\) > 0:.*data-dependent"
            r"(.|\n)*hint: the model branches on a tensor's value",
        ),
    ],
)
def test_model_file_errors(tmp_path, model, extra, message):
    result, output = compile_cli(tmp_path, model, *extra)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.output.startswith("error: ")
    assert re.search(message, result.output), result.output
    assert not output.exists() and not output.with_suffix(".json").exists()


def test_op_that_does_not_lower_is_named_with_stage_and_dump(tmp_path):
    result, output = compile_cli(tmp_path, MODELS / "unsupported_op.py")
    assert result.exit_code == 1, result.output
    first_line = result.output.splitlines()[0]
    assert first_line.startswith("error: [prims] op torch.aten.median at ")
    assert "unsupported_op.py:6" in first_line
    dump = tmp_path / "out.stages" / "01-aten.mlir"
    assert f"see: {dump}" in result.output
    assert "torch.aten.median" in dump.read_text()
    assert not output.exists()


def test_iree_compile_crash_becomes_an_error(tmp_path):
    # IREE 3.13 segfaults on an unknown CUDA target name; kiln must survive it and say so.
    result, output = compile_cli(
        tmp_path,
        MODELS / "named.py",
        "--model", "classifier", "--inputs", "batch",
        "--iree-flag=--iree-hal-target-device=cuda", "--iree-flag=--iree-cuda-target=hopper",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "error: [vmfb] iree-compile crashed (SIGSEGV) after: <unknown>:0: error: Unknown CUDA target 'hopper'" in result.output
    assert "reproduce with: iree-compile" in result.output and "Traceback" not in result.output
    assert not output.exists()


def test_an_iree_compile_crash_names_the_pass_it_crashed_in():
    # The innermost pass of iree-compile's backtrace, as IREE 3.13 printed it for SigLIP-base (bf16, sm_90).
    frame = " #4 0x00007fb34f18ebed mlir::iree_compiler::(anonymous namespace)::LLVMCPUAssignImportOrdinalsPass::runOnOperation() LLVMCPUAssignImportOrdinals.cpp:0:0"
    crash = subprocess.CompletedProcess(["iree-compile"], -11, "", f"Stack dump:\n{frame}\n #5 0x0 mlir::detail::OpToOpPassAdaptor::run(mlir::Pass*) Pass.cpp:0:0\n")
    assert iree_failure(crash, [], None).message == "iree-compile crashed (SIGSEGV) (in IREE's LLVMCPUAssignImportOrdinalsPass)"


def test_a_reproducer_without_its_weights_says_how_to_get_one(tmp_path):
    # A dump without its weights (here one elided by hand): iree-compile cannot take it as it is.
    dump = tmp_path / "04-vmfb.iree-input.mlir"
    dump.write_text('%w = torch.vtensor.literal(dense_resource<__elided__> : tensor<1024x1024xbf16>)\n')
    failed = subprocess.CompletedProcess(["iree-compile"], 1, "", f"{dump}:1:1: error: resource data missing\n")
    error = iree_failure(failed, ["--iree-hal-target-device=cuda"], dump)
    assert error.hint == (
        f"reproduce with: iree-compile {dump} --iree-hal-target-device=cuda -o out.vmfb "
        "(after recompiling with --params external: this dump leaves its large weights out)"
    )


def test_unknown_target_lists_known_ones(tmp_path):
    result, _ = compile_cli(tmp_path, MODELS / "named.py", "--target", "tpu")
    assert result.exit_code == 2
    assert "Invalid value for '--target': 'tpu' is not" in result.output and "llvm-cpu" in result.output


def test_unknown_target_through_the_api():
    import torch

    import kiln
    from kiln.errors import KilnError

    with pytest.raises(KilnError, match="unknown target 'tpu'; known targets: llvm-cpu"):
        kiln.compile(torch.nn.ReLU(), (torch.randn(2),), target="tpu")


def test_debug_shows_the_traceback(tmp_path):
    command = [KILN, "compile", str(MODELS / "no_inputs.py"), "-o", str(tmp_path / "x.vmfb"), "--debug"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "error: [load]" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.vmfb", "--random"], "error: [runtime] artifact not found: missing.vmfb"),
        (["ART", "--random", "--input", "x.npy"], "error: [run] give either --input (one per model input) or --random"),
        (["ART", "--input", "nope.npy"], "error: [run] input file not found: nope.npy"),
        (["ART", "--input", "wrong.npy"], "error: [runtime] input 'input' has shape [2]; expected [5, 6]"),
        (["ART", "--input", "x.npy", "--input", "x.npy"], "error: [runtime] expected 1 input(s) (input: float32[5, 6]), got 2"),
    ],
)
def test_run_errors(tmp_path, args, message, monkeypatch):
    import numpy as np

    monkeypatch.chdir(tmp_path)
    artifact = tmp_path / "named.vmfb"
    CliRunner().invoke(kiln, ["compile", str(MODELS / "named.py"), "--model", "classifier", "--inputs", "batch", "-o", str(artifact), "-q"])
    np.save(tmp_path / "x.npy", np.zeros((5, 6), np.float32))
    np.save(tmp_path / "wrong.npy", np.zeros(2, np.float32))
    result = CliRunner().invoke(kiln, ["run", *(str(artifact) if a == "ART" else a for a in args)])
    assert result.exit_code == 1
    assert message in result.output, result.output
    assert "Traceback" not in result.output


def test_a_crash_in_a_pass_names_the_op_the_stage_and_the_reproducer(tmp_path, monkeypatch):
    import torch

    from kiln.compiler import CompileOptions, run_pipeline, spec_from_module
    from kiln.errors import KilnError
    from kiln.passes import PASSES
    from kiln.passes.pass_api import pattern_pass

    def crashes(op: object, rewriter: object) -> None:
        raise ZeroDivisionError("float division by zero")

    crashing = pattern_pass("decompose-vector-norm", "crashes", {"torch.aten.linalg_vector_norm": crashes})
    monkeypatch.setitem(PASSES._passes, "decompose-vector-norm", crashing)  # type: ignore[attr-defined]

    class Norm(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.linalg.vector_norm(x, ord=3, dim=-1)

    with pytest.raises(KilnError) as raised:
        run_pipeline(spec_from_module(Norm(), (torch.randn(3, 4),)), CompileOptions(dump_dir=tmp_path))
    error = raised.value
    assert error.stage == "prims"
    assert re.match(
        r"op torch\.aten\.linalg_vector_norm at \S+test_errors\.py:\d+ failed in pass 'decompose-vector-norm': "
        r"'torch\.aten\.linalg_vector_norm' op: kiln's pass crashed on it: ZeroDivisionError: float division by zero$",
        error.message,
    ), error.message
    assert error.file == tmp_path / "01-aten.mlir" and "reproduce with: kiln opt" in (error.hint or "")


def test_a_crash_in_any_stage_is_one_kiln_error_naming_it(monkeypatch):
    import torch

    from kiln.compiler import CompileOptions, run_pipeline, spec_from_module
    from kiln.compiler.stages import aten
    from kiln.errors import KilnError

    def crashes(*args: object, **kwargs: object) -> None:
        raise AssertionError("Could not find state mapping for buffer")

    monkeypatch.setattr(aten, "import_program", crashes)
    with pytest.raises(KilnError) as raised:
        run_pipeline(spec_from_module(torch.nn.ReLU(), (torch.randn(3),)), CompileOptions())
    error = raised.value
    assert error.message == "internal error: AssertionError: Could not find state mapping for buffer"
    assert error.stage == "aten" and "a kiln bug" in (error.hint or "")
