"""GPU targets: cross-compiled here (no GPU needed), the architecture choice, and the errors.

Tests marked `gpu` / `vulkan` run an artifact and compare it with eager PyTorch; they skip where
IREE sees no such device. benchmarks/gpu_check.py does the same on a GPU machine without the compiler.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from testkit import EXAMPLES, as_tuple, device_visible, eager, example_spec, gpu, vulkan

import kiln
from kiln.cli.main import kiln as kiln_cli
from kiln.cli.options import TARGET_NAMES as CLI_TARGETS
from kiln.compiler import Compiled, CompileOptions, run_pipeline
from kiln.errors import KilnError
from kiln.targets import GPU_TARGETS, TARGETS
from kiln.targets import gpu as gpu_archs
from kiln.targets.resolve import resolve


def choose_arch(target: str, requested: str | None) -> gpu_archs.ArchChoice:
    archs = TARGETS[target].archs
    assert archs is not None
    return gpu_archs.choose_arch(target, archs, requested)


EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.py") if p.stem != "demo")
TOLERANCES = {torch.bfloat16: 4e-2, torch.float16: 1e-2}  # f32: 1e-4

VULKAN_BF16 = (
    "IREE 3.13 cannot compile bf16 for SPIR-V ('arith.constant' op failed to verify; vector.bitcast to bf16)"
)




@functools.cache
def compiled(name: str, target: str, gpu_arch: str | None) -> Compiled:
    """One compile per (example, target, arch) per session: the cross-compile tests and the GPU tests share it."""
    return run_pipeline(example_spec(name), CompileOptions(target=target, gpu_arch=gpu_arch)).compiled


# -- the registry and the CLI ----------------------------------------------------------------------


def test_cli_target_choices_are_the_registry():
    assert CLI_TARGETS == tuple(TARGETS)
    assert GPU_TARGETS == ("cuda", "vulkan-spirv", "rocm")


def test_rocm_says_it_is_compile_only():
    assert "compile-only here" in TARGETS["rocm"].summary


# -- cross-compiling every example -----------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_every_example_cross_compiles_for_cuda(name):
    manifest = compiled(name, "cuda", "sm_80").manifest
    assert (manifest.target, manifest.driver) == ("cuda", "cuda")
    details = dict(manifest.target_details)
    kept = "--iree-opt-strip-assertions=false" in manifest.iree_flags  # only where kiln's checks are asserts
    assert details.pop("levers") == ("no-const-eval, assertions" if kept else "no-const-eval")
    assert details == {
        "gpu_arch": "sm_80",
        "gpu_arch_requested": "sm_80",
        "gpu_arch_source": "gpu_arch",
        "gpu_arch_note": "",
        "handoff": "torch",  # cuda's default: IREE's torch input pipeline lowers from the torch dialect
        "matmul_precision": "highest",  # PyTorch's defaults: f32 matmuls at f32, convolutions TF32
        "conv_precision": "high",
        "kernels": "off",  # kiln's kernels are sm_90a code
    }
    assert manifest.iree_flags[:5] == (
        "--iree-hal-target-device=cuda",
        "--iree-cuda-target=sm_80",
        "--iree-global-opt-propagate-transposes=false",  # IREE's cuda code for the contractions it makes is wrong
        "--iree-input-type=torch",
        "--iree-opt-level=O3",
    )


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(raises=KilnError, strict=True, reason=VULKAN_BF16))
        if name == "mlp_bf16"
        else name
        for name in EXAMPLE_NAMES
    ],
)
def test_every_example_cross_compiles_for_vulkan(name):
    manifest = compiled(name, "vulkan-spirv", "ampere").manifest
    assert (manifest.target, manifest.driver) == ("vulkan-spirv", "vulkan")
    assert manifest.target_details["gpu_arch"] == "ampere"
    assert manifest.iree_flags[:2] == ("--iree-hal-target-device=vulkan", "--iree-vulkan-target=ampere")


@pytest.mark.parametrize("name", ["mlp", "mlp_bf16"])
def test_rocm_cross_compiles(name):
    manifest = compiled(name, "rocm", "gfx942").manifest
    assert (manifest.target, manifest.driver) == ("rocm", "hip")
    assert manifest.iree_flags[:2] == ("--iree-hal-target-device=hip", "--iree-rocm-target=gfx942")


# -- the architecture choice -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "requested", "arch"),
    [
        ("cuda", "sm_86", "sm_86"),
        ("cuda", "SM_89", "sm_89"),
        ("cuda", "ampere", "ampere"),
        ("cuda", "sm_120", "sm_120"),
        ("vulkan-spirv", "ampere", "ampere"),
        ("vulkan-spirv", "rdna3", "rdna3"),
        ("rocm", "gfx90a", "gfx90a"),
    ],
)
def test_a_known_arch_is_used_as_given(target, requested, arch):
    assert choose_arch(target, requested) == gpu_archs.ArchChoice(requested, arch, "gpu_arch", None)


@pytest.mark.parametrize("requested", ["sm_90", "sm_90a", "SM_90A", "hopper", "h100", "h200", "gh200"])
def test_hopper_is_sm_90a_described_in_full(requested):
    """IREE 3.13's flag has no sm_90 (and "hopper", "h100" crash it): Hopper is compiled for through a
    module attribute that describes sm_90a in full, with no --iree-cuda-target flag and no note."""
    assert choose_arch("cuda", requested) == gpu_archs.ArchChoice(requested, "sm_90a", "gpu_arch", None)
    resolved = resolve(CompileOptions(target="cuda", gpu_arch=requested))
    assert resolved.iree_flags[0] == "--iree-hal-target-device=cuda"
    assert not any(flag.startswith("--iree-cuda-target") for flag in resolved.iree_flags)
    assert resolved.device_targets is not None and 'arch = "sm_90a"' in resolved.device_targets
    assert "chip = <wgp_count = 132>" in resolved.device_targets
    assert resolved.details["gpu_arch"] == "sm_90a" and "132 SMs" in resolved.details["gpu_target"]
    assert resolved.module_attributes["kiln.gpu_arch"] == "sm_90a"


def test_only_cuda_describes_hopper():
    """vulkan-spirv keeps its ampere stand-in for sm_90; an sm_80 compile gets no attribute."""
    assert choose_arch("vulkan-spirv", "sm_90").arch == "ampere"
    assert resolve(CompileOptions(target="cuda", gpu_arch="sm_80")).device_targets is None


@pytest.mark.parametrize(
    ("target", "requested", "arch"),
    [
        ("cuda", "sm_100", "sm_80"),  # sm_90a code does not run on Blackwell: the sm_80 stand-in
        ("cuda", "b200", "sm_80"),
        ("cuda", "sm_120a", "sm_120"),
        ("vulkan-spirv", "sm_90", "ampere"),  # crashes iree-compile if passed through
        ("vulkan-spirv", "h200", "ampere"),
    ],
)
def test_a_newer_nvidia_arch_maps_to_one_iree_knows_with_a_note(target, requested, arch):
    choice = choose_arch(target, requested)
    assert (choice.requested, choice.arch, choice.source) == (requested, arch, "gpu_arch")
    if arch != requested.removesuffix("a"):
        assert (
            choice.note
            == f"{target}: IREE 3.13 has no target for {requested}; compiling for {arch}, {TARGETS[target].archs.newer_why}"
        )


@pytest.mark.parametrize(
    ("target", "requested"),
    [
        ("cuda", "sm_50"),
        ("cuda", "blackwel"),
        ("cuda", ""),
        ("vulkan-spirv", "sm_80x"),
        ("rocm", "sm_90"),
        ("rocm", "gfx1030"),
    ],
)
def test_an_unknown_arch_lists_the_known_ones(target, requested):
    known = ", ".join(TARGETS[target].archs.known)
    with pytest.raises(
        KilnError, match=f"unknown --gpu-arch '{requested}' for target {target}; known: {known}"
    ):
        choose_arch(target, requested)


def test_gpu_arch_on_a_cpu_target_is_an_error():
    with pytest.raises(KilnError, match=r"--gpu-arch is for GPU targets .*; llvm-cpu takes --cpu"):
        run_pipeline(example_spec("mlp"), CompileOptions(gpu_arch="sm_80"))


def _with_local_gpu(monkeypatch, target: str, local: str | None) -> None:
    archs = dataclasses.replace(TARGETS[target].archs, detect=lambda: local)
    monkeypatch.setitem(TARGETS, target, dataclasses.replace(TARGETS[target], archs=archs))


@pytest.mark.parametrize(
    ("target", "local", "arch", "source", "note"),
    [
        (
            "cuda",
            None,
            "sm_80",
            "default",
            "cuda: no local GPU found; compiling for sm_80, the default (choose with --gpu-arch)",
        ),
        ("cuda", "sm_86", "sm_86", "local GPU", "cuda: the local GPU is sm_86; compiling for sm_86"),
        ("cuda", "sm_90", "sm_90a", "local GPU", "cuda: the local GPU is sm_90; compiling for sm_90a"),
        (
            "cuda",
            "sm_100",
            "sm_80",
            "local GPU",
            "cuda: the local GPU is sm_100; IREE 3.13 has no target for sm_100; compiling for sm_80",
        ),
        (
            "cuda",
            "sm_50",
            "sm_80",
            "default",
            "cuda: the local GPU is sm_50, which IREE 3.13 cannot compile for",
        ),
        ("vulkan-spirv", None, "ampere", "default", "vulkan-spirv: no local GPU found; compiling for ampere"),
        (
            "vulkan-spirv",
            "sm_90",
            "ampere",
            "local GPU",
            "vulkan-spirv: the local GPU is sm_90; IREE 3.13 has no target for sm_90",
        ),
        ("rocm", None, "gfx942", "default", "rocm: no local GPU found; compiling for gfx942"),
    ],
)
def test_without_gpu_arch_the_local_gpu_decides_else_the_default(
    monkeypatch, target, local, arch, source, note
):
    _with_local_gpu(monkeypatch, target, local)
    choice = choose_arch(target, None)
    assert (choice.arch, choice.source) == (arch, source)
    assert choice.note is not None and choice.note.startswith(note)


@pytest.mark.parametrize(
    ("stdout", "returncode", "arch"),
    [("9.0\n9.0\n", 0, "sm_90"), ("8.6\n", 0, "sm_86"), ("", 9, None), ("No devices were found\n", 6, None)],
)
def test_nvidia_smi_gives_the_local_arch(monkeypatch, stdout, returncode, arch):
    monkeypatch.setattr(
        gpu_archs.subprocess,
        "run",
        lambda command, **_: subprocess.CompletedProcess(command, returncode, stdout, ""),
    )
    gpu_archs.local_nvidia_arch.cache_clear()
    try:
        assert gpu_archs.local_nvidia_arch() == arch
    finally:
        gpu_archs.local_nvidia_arch.cache_clear()


def test_no_nvidia_smi_means_no_local_gpu(monkeypatch):
    def missing(command, **_):
        raise FileNotFoundError(command[0])

    monkeypatch.setattr(gpu_archs.subprocess, "run", missing)
    gpu_archs.local_nvidia_arch.cache_clear()
    try:
        assert gpu_archs.local_nvidia_arch() is None
    finally:
        gpu_archs.local_nvidia_arch.cache_clear()


def test_every_known_arch_compiles_and_sm_90_still_does_not(tmp_path):
    """The known lists are what the installed iree-compile accepts; when sm_90 starts working, drop the mapping."""
    from iree.compiler.tools.binaries import find_tool

    source = tmp_path / "add.mlir"
    source.write_text(
        "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %r = arith.addf %a, %a : tensor<4xf32>\n"
        "  return %r : tensor<4xf32>\n"
        "}\n"
    )
    tool = find_tool("iree-compile")

    def compiles(target: str, arch: str) -> bool:
        archs = TARGETS[target].archs
        command = [
            tool,
            str(source),
            f"--iree-hal-target-device={archs.device}",
            f"{archs.flag}={arch}",
            "-o",
            "/dev/null",
        ]
        return subprocess.run(command, capture_output=True).returncode == 0

    cases = [(target, arch) for target in GPU_TARGETS for arch in TARGETS[target].archs.known]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(cases, pool.map(lambda case: compiles(*case), cases), strict=True))
    assert [case for case, ok in results.items() if not ok] == []
    assert not compiles("cuda", "sm_90")


# -- the CLI ---------------------------------------------------------------------------------------


def compile_cli(tmp_path: Path, model: Path, *extra: str):
    output = tmp_path / "out.vmfb"
    result = CliRunner().invoke(kiln_cli, ["compile", str(model), "-o", str(output), "-q", *extra])
    return result, output


def test_cli_unknown_gpu_arch_is_one_error_listing_the_known_ones(tmp_path):
    # raises_on_import.py would fail to load: the architecture is checked before the model is touched.
    result, output = compile_cli(
        tmp_path,
        Path(__file__).parent / "models" / "raises_on_import.py",
        "--target",
        "cuda",
        "--gpu-arch",
        "sm_50",
    )
    assert result.exit_code == 1
    assert result.output.startswith(
        "error: [target] unknown --gpu-arch 'sm_50' for target cuda; known: sm_60, sm_61, "
    )
    assert "; sm_90, hopper, h100, h200, gh200 get sm_90a; other NVIDIA GPUs it lacks (sm_100, b200, ...) get sm_80" in result.output
    assert "Traceback" not in result.output and not output.exists()


def test_cli_newer_arch_compiles_with_one_note(tmp_path):
    result, output = compile_cli(tmp_path, EXAMPLES / "mlp.py", "--target", "cuda", "--gpu-arch", "sm_100")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: cuda: IREE 3.13 has no target for sm_100; compiling for sm_80, whose PTX the CUDA driver JIT-compiles for the newer GPU"
    ]
    details = json.loads(output.with_suffix(".json").read_text())["target_details"]
    assert details["gpu_arch"] == "sm_80" and details["gpu_arch_requested"] == "sm_100"
    assert details["gpu_arch_note"] == notes[0].removeprefix("note: ")


def test_cli_gpu_arch_on_llvm_cpu_is_an_error(tmp_path):
    result, output = compile_cli(tmp_path, EXAMPLES / "mlp.py", "--gpu-arch", "sm_80")
    assert result.exit_code == 1
    assert (
        "error: [target] --gpu-arch is for GPU targets (cuda, vulkan-spirv, rocm); llvm-cpu takes --cpu"
        in result.output
    )
    assert not output.exists()


# -- the runtime, without the GPU ------------------------------------------------------------------


@pytest.mark.skipif(device_visible("cuda"), reason="a CUDA device is visible")
def test_loading_a_cuda_artifact_without_a_gpu_says_so(tmp_path):
    path = compiled("mlp", "cuda", "sm_80").save(tmp_path / "mlp.vmfb")
    with pytest.raises(
        KilnError, match=r"mlp.vmfb: this artifact targets cuda; no CUDA device is visible"
    ) as error:
        kiln.load(path)
    assert (
        error.value.hint == "copy the .vmfb and its .json to a machine with a CUDA device and load it there"
    )


@pytest.mark.skipif(device_visible("vulkan"), reason="a Vulkan device is visible")
def test_loading_a_vulkan_artifact_without_a_gpu_says_so(tmp_path):
    path = compiled("mlp", "vulkan-spirv", "ampere").save(tmp_path / "mlp.vmfb")
    with pytest.raises(KilnError, match=r"this artifact targets vulkan; no Vulkan device is visible"):
        kiln.load(path, device="vulkan")


def test_a_gpu_artifact_cannot_run_on_the_cpu(tmp_path):
    path = compiled("mlp", "cuda", "sm_80").save(tmp_path / "mlp.vmfb")
    with pytest.raises(KilnError, match="this artifact targets cuda; it cannot run on device 'cpu'"):
        kiln.load(path, device="cpu")


# -- on a real GPU (skipped here) ------------------------------------------------------------------


def _matches_eager_on(device: str, name: str, target: str, tmp_path: Path) -> None:
    spec = example_spec(name)
    artifact = compiled(name, target, None)  # the local GPU's architecture
    torch_device = "cuda" if torch.cuda.is_available() else "cpu"  # CUDA tensors where torch can make them
    inputs = tuple(x.to(torch_device) for x in spec.example_inputs)
    module = kiln.load(artifact.save(tmp_path / f"{name}.vmfb"), device=device)
    spec.module.to(torch_device)  # the spec is this test's own: moving its module in place is fine
    expected = eager(spec, *inputs)
    actual = as_tuple(module(*inputs))
    for want, got in zip(expected, actual, strict=True):
        assert got.device == want.device  # CUDA tensors in, CUDA tensors out
        tolerance = TOLERANCES.get(want.dtype, 1e-4)
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_cuda_artifact_matches_eager_on_the_gpu(name, tmp_path):
    _matches_eager_on("cuda", name, "cuda", tmp_path)


@pytest.mark.gpu
@vulkan
@pytest.mark.parametrize("name", [name for name in EXAMPLE_NAMES if name != "mlp_bf16"])  # VULKAN_BF16
def test_vulkan_artifact_matches_eager_on_the_gpu(name, tmp_path):
    _matches_eager_on("vulkan", name, "vulkan-spirv", tmp_path)
