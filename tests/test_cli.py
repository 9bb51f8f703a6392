"""The `kiln` command as a user meets it: compile, verify, stop early, run from the shell."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from click.testing import CliRunner
from testkit import EXAMPLES, example_spec

from kiln import load as kiln_load
from kiln.cli.main import kiln
from kiln.compiler import stage_names

MODELS = Path(__file__).parent / "models"
KILN = str(Path(sys.executable).parent / "kiln")  # the console script of this environment


def invoke(*args: str):
    return CliRunner().invoke(kiln, [str(a) for a in args])


def test_compile_verify_then_run_with_npy(tmp_path):
    artifact = tmp_path / "mlp.vmfb"
    result = invoke("compile", EXAMPLES / "mlp.py", "-o", artifact, "--verify")
    assert result.exit_code == 0, result.output
    assert "verify linear_2: max abs error" in result.output and "ok" in result.output
    assert "[5/5] vmfb done in" in result.output or "vmfb done in" in result.output
    assert f"wrote {artifact}" in result.output
    assert (tmp_path / "mlp.stages" / "00-exported.txt").is_file()

    x = np.random.default_rng(0).standard_normal((8, 64), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    result = invoke("run", artifact, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    assert result.exit_code == 0, result.output
    with torch.no_grad():
        expected = example_spec("mlp").module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-4, atol=1e-5)


def test_run_random_prints_every_output(tmp_path):
    artifact = tmp_path / "two.vmfb"
    assert invoke("compile", EXAMPLES / "embedding_two_outputs.py", "-o", artifact, "-q").exit_code == 0
    result = invoke("run", artifact, "--random")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "linear: torch.float32 [4, 12, 5]"
    assert lines[2] == "div: torch.float32 [4, 32]"


def test_bf16_output_saved_as_float32(tmp_path):
    artifact = tmp_path / "bf16.vmfb"
    assert invoke("compile", EXAMPLES / "mlp_bf16.py", "-o", artifact, "-q", "--verify").exit_code == 0
    x = np.random.default_rng(0).standard_normal((8, 64), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    result = invoke("run", artifact, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    assert result.exit_code == 0, result.output
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.float32 and y.shape == (8, 32)
    with torch.no_grad():
        expected = example_spec("mlp_bf16").module(torch.from_numpy(x).bfloat16()).float().numpy()
    np.testing.assert_allclose(y, expected, rtol=4e-2, atol=4e-2)


def test_stop_after_keeps_dumps_and_writes_no_artifact(tmp_path):
    artifact = tmp_path / "sincos.vmfb"
    result = invoke("compile", EXAMPLES / "sincos.py", "-o", artifact, "--stop-after", "linalg")
    assert result.exit_code == 0, result.output
    assert "stopped after linalg" in result.output
    dumps = sorted(p.name for p in (tmp_path / "sincos.stages").iterdir())
    assert dumps[0] == "00-exported.txt" and dumps[-1].endswith("-linalg.mlir")
    assert not any("vmfb" in name for name in dumps)
    assert not artifact.exists()


def test_named_model_and_inputs_with_custom_dump_dir(tmp_path):
    dump_dir = tmp_path / "dumps"
    result = invoke(
        "compile", MODELS / "named.py", "--model", "classifier", "--inputs", "batch",
        "-o", tmp_path / "c.vmfb", "--dump-dir", dump_dir, "--verify", "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (dump_dir / "00-exported.txt").is_file()


def test_verify_failure_exits_nonzero_and_writes_nothing(tmp_path):
    artifact = tmp_path / "mlp.vmfb"
    # A zero tolerance: the encoder's float rounding differs from eager's, so verification fails.
    result = invoke("compile", EXAMPLES / "encoder.py", "-o", artifact, "--verify", "--rtol", "0", "--atol", "0", "-q")
    assert result.exit_code == 1
    assert "MISMATCH" in result.output
    assert "error: [verify] artifact does not match eager PyTorch within tolerance; artifact not written" in result.output
    assert not artifact.exists()


def test_stop_after_takes_any_stage_of_the_pipeline_in_use(tmp_path):
    pipeline = "prims(torch-backend-contract),tidy(canonicalize),linalg(torch-to-linalg)"
    result = invoke("compile", EXAMPLES / "mlp.py", "-o", tmp_path / "m.vmfb", "--pipeline", pipeline, "--stop-after", "tidy")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m.stages" / "03-tidy.mlir").is_file() and not (tmp_path / "m.vmfb").exists()
    result = invoke("compile", EXAMPLES / "mlp.py", "-o", tmp_path / "m.vmfb", "--stop-after", "tidy")
    assert result.exit_code == 1
    assert "--stop-after: unknown stage 'tidy'; stages: exported, aten, prims, simplified, linalg, fused, vmfb" in result.output


def test_start_from_a_dump_finishes_the_compile(tmp_path):
    stopped = invoke("compile", EXAMPLES / "mlp.py", "-o", tmp_path / "mlp.vmfb", "--stop-after", "linalg", "-q")
    assert stopped.exit_code == 0, stopped.output
    dump = tmp_path / "mlp.stages" / "04-linalg.mlir"
    result = invoke("compile", "--start-from", dump, "-o", tmp_path / "mlp.vmfb", "-q")
    assert result.exit_code == 0, result.output
    module = kiln_load(tmp_path / "mlp.vmfb")
    spec = example_spec("mlp")
    assert module.manifest.functions[0].outputs[0].name == "linear_2"  # the calling convention rode in the dump
    assert module.manifest.source["path"] == str(dump)
    torch.testing.assert_close(module(*spec.example_inputs), spec.module(*spec.example_inputs), rtol=1e-4, atol=1e-5)
    assert sorted(p.name for p in (tmp_path / "mlp.stages").glob("05-fused*.mlir"))  # the stages after it ran


def test_start_from_a_dump_with_external_weights_says_why_not(tmp_path):
    # Such a dump loads its weights through torch_c, which --start-from could not even parse; and the
    # artifact it would make needs the first compile's .irpa, which no new artifact can take over.
    first = invoke("compile", EXAMPLES / "mlp.py", "-o", tmp_path / "mlp.vmfb", "--params", "external", "-q")
    assert first.exit_code == 0, first.output
    dump = tmp_path / "mlp.stages" / "03-simplified.mlir"
    result = invoke("compile", "--start-from", dump, "-o", tmp_path / "again.vmfb")
    assert result.exit_code == 1
    assert f"--start-from {dump}: its 3 weights are in the first compile's .irpa (--params external)" in result.output
    assert "compile the model file again" in result.output and not (tmp_path / "again.vmfb").exists()


def test_start_from_needs_a_stage_dump(tmp_path):
    stray = tmp_path / "model.mlir"
    stray.write_text("module {}")
    result = invoke("compile", "--start-from", stray)
    assert result.exit_code == 1
    assert "--start-from " in result.output and "not a stage dump; expected <NN>-<stage>.mlir" in result.output
    assert invoke("compile").exit_code == 2  # neither MODEL_FILE nor --start-from


def test_start_from_a_dump_without_its_weights_says_how_to_get_one(tmp_path):
    dump = tmp_path / "03-simplified.mlir"
    dump.write_text("%w = torch.vtensor.literal(dense_resource<__elided__> : tensor<1024x1024xf32>)\n")
    result = invoke("compile", "--start-from", dump)
    assert result.exit_code == 1
    assert "this dump leaves out weights (a dump holds none once one is over 512 KiB), so it cannot be compiled: __elided__" in result.output
    assert "compile the model file again" in result.output


def test_a_dump_leaves_large_weights_out_and_start_from_refuses_it(tmp_path):
    # A weight of 1 MiB: the dumps print the ops alone (MLIR's printer renders a weight as hex before
    # eliding it, 1.2 s a dump for 250 MB of weights), and --start-from says which weights are missing
    # (before, kiln's check looked for a marker MLIR no longer prints, and iree-compile failed instead).
    model = tmp_path / "wide.py"
    model.write_text(
        "import torch\ntorch.manual_seed(0)\n"
        "model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8))\n"
        "example_inputs = (torch.randn(2, 512),)\n"
    )
    stopped = invoke("compile", model, "-o", tmp_path / "wide.vmfb", "--stop-after", "simplified", "-q")
    assert stopped.exit_code == 0, stopped.output
    dump = tmp_path / "wide.stages" / "03-simplified.mlir"
    text = dump.read_text()
    assert (
        text.startswith("// This dump leaves out its weights (some are over 512 KiB)") and "{-#" not in text
    )
    assert text.count("dense_resource<") == 4 and "func.func @main" in text  # the ops, every weight named
    result = invoke("compile", "--start-from", dump, "-o", tmp_path / "again.vmfb")
    assert result.exit_code == 1
    assert (
        "this dump leaves out weights (a dump holds none once one is over 512 KiB), so it cannot be compiled: "
        in result.output
    )
    assert "torch_tensor.0.weight" in result.output and "torch_tensor.2.weight" in result.output
    assert not (tmp_path / "again.vmfb").exists()


def test_help_imports_nothing_heavy():
    """`kiln --help` and `kiln compile --help` must stay instant: no torch, MLIR, IREE or Triton import."""
    script = (
        "import sys; from click.testing import CliRunner; from kiln.cli.main import kiln; "
        "assert CliRunner().invoke(kiln, ['compile', '--help']).exit_code == 0; "
        "heavy = sorted(m for m in ('torch', 'torch_mlir', 'iree.compiler', 'triton') if m in sys.modules); print(heavy)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def test_help_is_fast_and_teaches():
    result = subprocess.run([KILN, "compile", "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    for stage in stage_names():
        assert stage in result.stdout
    assert "example_inputs" in result.stdout and "--stop-after" in result.stdout


def test_demo_script_runs(tmp_path):
    artifact = tmp_path / "mlp.vmfb"
    assert invoke("compile", EXAMPLES / "mlp.py", "-o", artifact, "-q").exit_code == 0
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py"), str(artifact)], capture_output=True, text=True, cwd=EXAMPLES.parent
    )
    assert result.returncode == 0, result.stderr
    assert "max abs error vs eager" in result.stdout
    assert float(result.stdout.split()[-1]) < 1e-4
