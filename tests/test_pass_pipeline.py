"""The pass registry and pipelines as data, the pattern adapter, and the commands and flags that read them."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from testkit import EXAMPLES, ROOT

from kiln.cli.main import kiln
from kiln.compiler.options import CompileOptions
from kiln.errors import KilnError
from kiln.passes import (
    DEFAULT_PIPELINE,
    PASSES,
    TORCH_MLIR_PIPELINE,
    PassGroup,
    parse_pipeline,
    pipeline_text,
    with_placements,
    with_strict_primitives,
    without_passes,
)
from kiln.passes.pass_api import parse_module, pattern_pass, run_pass
from kiln.passes.registry import NOT_PASSES
from kiln.targets.resolve import resolve

KILN = str(Path(sys.executable).parent / "kiln")
KILN_PASSES = [name for name, p in PASSES.items() if not p.upstream]
PASS_FOLDERS = [ROOT / "passes", *sorted((ROOT / "targets").glob("*/passes"))]  # neutral, then each room's


def source_of(name: str) -> Path:
    """The file of kiln's pass `name`: passes/x.py, or targets/<room>/passes/x.py."""
    (path,) = [folder / f"{name.replace('-', '_')}.py" for folder in PASS_FOLDERS if (folder / f"{name.replace('-', '_')}.py").exists()]
    return path


def lit_test_of(source: Path) -> Path:
    """A pass's lit test: tests/passes/<name>.mlir, or targets/<room>/tests/passes/<name>.mlir beside its room."""
    name = source.stem.replace("_", "-")
    tests = ROOT / "tests" if source.parent == ROOT / "passes" else source.parent.parent / "tests"
    return tests / "passes" / f"{name}.mlir"


def cpu_pipeline() -> tuple[PassGroup, ...]:
    """The default pipeline as an llvm-cpu compile runs it, with the room's passes placed."""
    return with_placements(DEFAULT_PIPELINE, resolve(CompileOptions()).passes)


def invoke(*args: object):
    return CliRunner().invoke(kiln, [str(a) for a in args])


def test_every_module_of_the_package_is_a_pass_or_a_helper_and_every_pass_has_a_lit_test():
    modules = [path.stem for folder in PASS_FOLDERS for path in folder.glob("*.py") if path.stem not in {*NOT_PASSES, "__init__"}]
    assert sorted(module.replace("_", "-") for module in modules) == sorted(KILN_PASSES)
    lit_tests = [*(ROOT / "tests" / "passes").glob("*.mlir"), *(ROOT / "targets").glob("*/tests/passes/*.mlir")]
    assert sorted(path.stem for path in lit_tests) == sorted(KILN_PASSES)
    assert not set(KILN_PASSES) & {p.name for p in PASSES.values() if p.upstream}


@pytest.mark.parametrize("name", KILN_PASSES)
def test_each_pass_has_its_file_docstring_and_lit_test(name):
    source = source_of(name)
    module = importlib.import_module(PASSES.module_of(name))
    assert module.PASS is PASSES[name] and module.__file__ == str(source)  # passes/fold_sin_cos.py declares fold-sin-cos
    assert source.read_text().startswith(f'"""{name}: '), f"{source} must open with a docstring naming {name}"
    text = lit_test_of(source).read_text()
    assert text.startswith("// RUN: ") and name in text.splitlines()[0]
    assert "CHECK-LABEL" in text and "// -----" in text  # and a "must not fire" case after a split


PLACING = {  # options under which each room places all of its passes
    "llvm_cpu": CompileOptions(target="llvm-cpu"),
    "cuda": CompileOptions(target="cuda", gpu_arch="sm_90a"),
}


@pytest.mark.parametrize("name", KILN_PASSES)
def test_each_pass_is_in_the_default_pipeline_or_placed_by_its_room(name):
    """A neutral pass is in the default pipeline (require-primitives: in its strict form, --strict-primitives)
    or placed by the GPU rooms (slice-strided-pointwise-conv, split-spatial-sum: targets/gpu.py); a room's pass is placed in
    it by its room, and by no other."""
    room = source_of(name).parent.parent.name
    if room not in PLACING:
        gpu = with_placements(DEFAULT_PIPELINE, resolve(CompileOptions(target="vulkan-spirv", gpu_arch="ampere")).passes)
        strict = with_strict_primitives(DEFAULT_PIPELINE)
        assert any(name in group.passes for group in (*DEFAULT_PIPELINE, *strict, *gpu))
        return
    for other, options in PLACING.items():
        placed = with_placements(DEFAULT_PIPELINE, resolve(options).passes)
        assert any(name in group.passes for group in placed) == (other == room), (name, other)


def test_importing_the_passes_and_their_pipelines_imports_no_pass_and_no_torch_mlir():
    code = """
import json, sys
from kiln.passes import (
    DEFAULT_PIPELINE,
    PASSES,
    PIPELINES,
    TORCH_MLIR_PIPELINE,
    PassGroup,
    parse_pipeline,
    pipeline_text,
    with_strict_primitives,
)
pipeline_text(parse_pipeline("default")), pipeline_text(TORCH_MLIR_PIPELINE), PIPELINES["torch-mlir"]

def loaded():
    return sorted(name for name in sys.modules if name.split(".")[0] == "torch_mlir" or name.startswith("kiln.passes."))

before = loaded()
PASSES["fold-sin-cos"]
print(json.dumps([before, loaded()]))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    before, after = json.loads(result.stdout)
    assert before == ["kiln.passes.pipelines", "kiln.passes.registry"]
    assert "torch_mlir" in after and "kiln.passes.fold_sin_cos" in after and "kiln.passes.fuse_elementwise" in after


NEG_NEG = """
func.func @f(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %0 = torch.aten.neg %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  %1 = torch.aten.neg %0 : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %1 : !torch.vtensor<[2],f32>
}
"""


def test_a_pattern_that_returns_without_rewriting_does_not_match():
    def body(module) -> list[str]:
        return [op.operation.name for op in module.body.operations[0].regions[0].blocks[0].operations]

    calls: list[str] = []
    module = parse_module(NEG_NEG)
    run_pass(module, pattern_pass("look", "only looks", {"torch.aten.neg": lambda op, rewriter: calls.append(op.name)}))
    assert calls == ["torch.aten.neg"] * 2  # one visit each: had it said "matched", the driver would go round again
    assert body(module) == ["torch.aten.neg", "torch.aten.neg", "func.return"]
    run_pass(module, PASSES["fold-neg-neg"])  # one that rewrites through the Rewriter
    assert body(module) == ["func.return"]


def test_torch_mlir_pipeline_has_none_of_kilns_passes():
    assert not {name for group in TORCH_MLIR_PIPELINE for name in group.passes} & set(KILN_PASSES)


def test_pipeline_text_round_trips():
    assert parse_pipeline(pipeline_text(DEFAULT_PIPELINE)) == DEFAULT_PIPELINE
    assert parse_pipeline("default") == DEFAULT_PIPELINE
    assert parse_pipeline("torch-mlir") == TORCH_MLIR_PIPELINE
    assert parse_pipeline(" prims(torch-backend-contract) , linalg( torch-to-linalg )") == (
        PassGroup("prims", ("torch-backend-contract",)),
        PassGroup("linalg", ("torch-to-linalg",)),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("prims(fold-sin-coss)", r"unknown pass 'fold-sin-coss'; did you mean fold-sin-cos\b"),
        ("prims(torch-backend-contract", r"cannot read --pipeline at character 1"),
        ("linalg(torch-to-linalg),fused(fold-sin-cos)", r"pass 'fold-sin-cos' in stage 'fused' works on torch IR, but the IR is linalg there"),
        ("prims(fuse-elementwise)", r"works on linalg IR, but the IR is torch there"),
    ],
)
def test_bad_pipelines_are_named(text, message):
    with pytest.raises(KilnError, match=message):
        parse_pipeline(text)


def test_disabling_a_pass_removes_it_everywhere():
    pipeline = without_passes(DEFAULT_PIPELINE, ("canonicalize", "fold-sin-cos"))
    remaining = [name for group in pipeline for name in group.passes]
    assert "canonicalize" not in remaining and "fold-sin-cos" not in remaining
    assert [group.name for group in pipeline] == [group.name for group in DEFAULT_PIPELINE]
    with pytest.raises(KilnError, match="pass 'linalg-fuse-elementwise-ops' is not in the pipeline"):
        without_passes(DEFAULT_PIPELINE, ("linalg-fuse-elementwise-ops",))
    with pytest.raises(KilnError, match="unknown pass 'nope'"):
        without_passes(DEFAULT_PIPELINE, ("nope",))


def test_kiln_passes_lists_every_pass_and_the_default_pipeline():
    result = invoke("passes")
    assert result.exit_code == 0, result.output
    for name, pass_ in PASSES.items():
        (line,) = [line for line in result.output.splitlines() if line.split()[:1] == [name]]
        module = PASSES.module_of(name) or ""
        origin = "upstream" if pass_.upstream else module.split(".")[2] if ".targets." in module else "kiln"
        assert pass_.summary in line and line.split()[2] == origin
    for group in DEFAULT_PIPELINE:
        assert re.search(rf"^  {group.name}\s+{re.escape(', '.join(group.passes))}$", result.output, re.MULTILINE)
    assert pipeline_text(DEFAULT_PIPELINE) in result.output
    assert "outline-contractions" not in pipeline_text(DEFAULT_PIPELINE)


def test_kiln_passes_shows_a_targets_pipeline_with_its_passes_placed():
    result = invoke("passes", "--target", "cuda", "--gpu-arch", "sm_90a")
    assert result.exit_code == 0, result.output
    placed = with_placements(DEFAULT_PIPELINE, resolve(CompileOptions(target="cuda", gpu_arch="sm_90a")).passes)
    assert "The default pipeline for cuda" in result.output and pipeline_text(placed) in result.output
    assert "cse,heads-last-attention-inputs,outline-cache-writes,outline-contractions,outline-row-programs,pointwise-conv-to-mm)" in pipeline_text(placed)


def test_a_target_places_its_passes_once_in_a_pipeline_that_names_them_already():
    placements = resolve(CompileOptions(target="cuda", gpu_arch="sm_90a")).passes
    placed = with_placements(DEFAULT_PIPELINE, placements)
    assert with_placements(placed, placements) == placed
    assert with_placements(TORCH_MLIR_PIPELINE, placements) == TORCH_MLIR_PIPELINE  # no anchors: nothing placed


def test_help_documents_the_pass_flags():
    result = subprocess.run([KILN, "compile", "--help"], capture_output=True, text=True, timeout=30)
    for flag in ("--pipeline", "--disable-pass", "--print-after", "--print-after-all", "--timing"):
        assert flag in result.stdout
    result = subprocess.run([KILN, "--help"], capture_output=True, text=True, timeout=30)
    assert "passes" in result.stdout and "opt" in result.stdout


def test_print_after_and_timing(tmp_path):
    output = tmp_path / "sincos.vmfb"
    result = invoke(
        "compile", EXAMPLES / "sincos.py", "-o", output, "--stop-after", "simplified",
        "--print-after", "fold-sin-cos", "--print-after", "torch-backend-contract", "--timing",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    dumps = {path.name for path in (tmp_path / "sincos.stages").iterdir()}
    assert {"02-prims.after-torch-backend-contract.mlir", "03-simplified.after-fold-sin-cos.mlir"} <= dumps
    assert not any(".after-expand-pow-small" in name for name in dumps)
    timings = re.findall(r"^ {4}([\w-]+)\s+(\d+\.\d+)s$", result.output, re.MULTILINE)
    cpu_runs = [p for g in cpu_pipeline()[:2] for p in dict.fromkeys(g.passes)]
    assert [name for name, _ in timings] == cpu_runs
    assert re.search(r"^  simplified\s+\d+\.\d+s\s+\d+\.\d+s\s+\d+ MiB\s*$", result.output, re.MULTILINE)  # time, CPU, memory


def test_print_after_all_writes_one_dump_per_pass(tmp_path):
    result = invoke("compile", EXAMPLES / "sincos.py", "-o", tmp_path / "s.vmfb", "--stop-after", "fused", "--print-after-all")
    assert result.exit_code == 0, result.output
    dumps = {path.name for path in (tmp_path / "s.stages").iterdir()}
    for index, group in enumerate(cpu_pipeline(), start=2):
        for name in group.passes:
            assert f"{index:02d}-{group.name}.after-{name}.mlir" in dumps, name


def test_torch_mlir_pipeline_and_disabled_pass_change_the_stages(tmp_path):
    result = invoke("compile", EXAMPLES / "sincos.py", "-o", tmp_path / "a.vmfb", "--pipeline", "torch-mlir", "--stop-after", "linalg")
    assert result.exit_code == 0, result.output
    dumps = sorted(path.name for path in (tmp_path / "a.stages").iterdir())
    assert dumps == ["00-exported.txt", "01-aten.mlir", "02-prims.mlir", "03-linalg.mlir"]
    result = invoke(
        "compile", EXAMPLES / "sincos.py", "-o", tmp_path / "b.vmfb", "--stop-after", "simplified",
        "--disable-pass", "fold-sin-cos", "--print-after", "fold-sin-cos",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "error: [options] --print-after fold-sin-cos: no such pass in the pipeline" in result.output


def test_kiln_opt_names_unknown_passes(tmp_path):
    source = tmp_path / "empty.mlir"
    source.write_text("module {}\n")
    result = invoke("opt", source, "--pass", "fold-sin-cos,fuse-elementwize")
    assert result.exit_code == 1
    assert "unknown pass 'fuse-elementwize'; did you mean fuse-elementwise" in result.output


def test_a_compile_resolves_its_target_once(tmp_path, monkeypatch):
    """The driver checks the options before loading the model, and hands what it resolved to the
    pipeline: the target's choices are made once, not rebuilt (a regression: they were made twice)."""
    from dataclasses import replace

    from kiln.compiler import ModelSource, compile_file
    from kiln.targets import TARGETS

    calls = []
    cpu = TARGETS["llvm-cpu"]

    def choose(*args):
        calls.append(args)
        return cpu.choose(*args)

    monkeypatch.setitem(TARGETS, "llvm-cpu", replace(cpu, choose=choose))
    compile_file(ModelSource(EXAMPLES / "mlp.py"), CompileOptions(), tmp_path / "mlp.vmfb")
    assert len(calls) == 1
