"""`kiln tune`: the search, the verdict on each candidate, the cache, `kiln compile --tuned`, the split.

No assertion here is about which candidate is faster: timings on a shared machine prove nothing.
Where a test needs a known winner it passes `min_gain=-100`, under which every candidate that
compiles and matches beats the best so far, so the search keeps the last right one it tries.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch import nn
from iree.compiler.tools.binaries import find_tool

import kiln
from kiln.cli.main import kiln as kiln_cli
from kiln.compiler import CompileOptions
from kiln.compiler.model_file import ModelSource
from kiln.measure.bundle import Bundle
from kiln.measure.results import Timing
from kiln.measure.timing import Settings
from kiln.tune.cache import entry_path, key_fields, key_of
from kiln.tune.measure import Measurement
from kiln.tune.search import Limits, coordinate_descent, prepare, tune
from kiln.tune.space import SPACES, Choice, Knob

TINY = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16))
example_inputs = (torch.randn(8, 32),)
"""

# Eager takes a row's max as NaN when the row holds one, and the model zeroes those rows. IREE's
# fast min/max ops ignore NaNs, so that candidate returns the largest number of the row instead.
NAN_MASKED_MAX = """
import torch
from torch import nn


class MaskedMax(nn.Module):
    def forward(self, x):
        y = x.amax(dim=1)
        return torch.where(torch.isnan(y), torch.zeros_like(y), y)


model = MaskedMax()
x = torch.randn(4, 64)
x[0, 3] = float("nan")
example_inputs = (x,)
"""

HANDOFF = Knob("handoff", "", (Choice("linalg"), Choice("torch", options=(("handoff", "torch"),))))
DATA_TILING = Knob("data-tiling", "", (Choice("off"), Choice("on", iree_flags=("--iree-opt-data-tiling=true",))))
BOGUS = Knob("bogus", "", (Choice("off"), Choice("on", iree_flags=("--iree-no-such-flag=1",))))
QUICK = Settings(warmup=1, iterations=2, budget_s=0.1, inductor=False)
ANY_WINS = Limits(sweeps=1, min_gain=-100.0)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "tuned"


def model_file(folder: Path, text: str = TINY) -> Path:
    path = folder / "tiny.py"
    path.write_text(text)
    return path


def invoke(*args: object):
    return CliRunner().invoke(kiln_cli, [str(a) for a in args])


def test_tune_stores_the_winner_and_compile_tuned_applies_it(tmp_path, cache):
    path = model_file(tmp_path)
    lines: list[str] = []
    entry = tune(ModelSource(path), CompileOptions(), (HANDOFF, DATA_TILING, BOGUS), ANY_WINS, QUICK, None, "test", lines.append)

    assert [m.name for m in entry.candidates] == ["default", "handoff=torch", "handoff=torch, data-tiling=on", "handoff=torch, data-tiling=on, bogus=on"]
    bogus = entry.candidates[-1]
    assert bogus.error is not None and bogus.error.startswith("compile failed: ") and "iree-compile failed" in bogus.error
    assert "rejected: compile failed" in lines[3]
    assert entry.settings.choices == {"handoff": "torch", "data-tiling": "on"}
    assert entry.settings.options == {"handoff": "torch"}
    assert entry.settings.iree_flags == ("--iree-opt-data-tiling=true",)

    stored = json.loads(entry_path(entry.key).read_text())
    assert entry_path(entry.key).parent == cache
    fields = stored["key_fields"]
    assert fields["model_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert fields["example_inputs"] == {"main": "f32[8, 32]"}
    assert fields["target"] == "llvm-cpu" and fields["device"]["cpu"] == "host" and "host_cpu" in fields["device"]
    assert fields["kiln"] and fields["iree_compiler"] and stored["key"] == key_of(fields)
    assert stored["default_ms"] > 0 and stored["tuned_ms"] > 0 and stored["machine"]["cores"]

    artifact = tmp_path / "tuned.vmfb"
    result = invoke("compile", path, "-o", artifact, "--tuned", "--verify")
    assert result.exit_code == 0, result.output
    assert "tuned: handoff=torch, data-tiling=on (" in result.output
    manifest = json.loads(artifact.with_suffix(".json").read_text())
    assert manifest["target_details"]["handoff"] == "torch"
    assert manifest["target_details"]["tuned"].startswith("handoff=torch, data-tiling=on (key ")
    assert "--iree-opt-data-tiling=true" in manifest["iree_flags"] and "--iree-input-type=torch" in manifest["iree_flags"]
    x = torch.randn(8, 32)
    namespace: dict = {}
    exec(TINY, namespace)
    torch.testing.assert_close(kiln.load(artifact)(x), namespace["model"](x), rtol=1e-4, atol=1e-5)


def test_a_candidate_with_wrong_numerics_is_rejected(tmp_path):
    fast = Knob("fast-min-max", "", (Choice("off"), Choice("on", iree_flags=("--iree-llvmcpu-use-fast-min-max-ops=true",))))
    lines: list[str] = []
    entry = tune(ModelSource(model_file(tmp_path, NAN_MASKED_MAX)), CompileOptions(), (fast,), ANY_WINS, QUICK, None, "test", lines.append)

    wrong = entry.candidates[1]
    assert wrong.name == "fast-min-max=on" and wrong.numerics is not None and not wrong.numerics.ok
    assert wrong.error is not None and wrong.error.startswith("numerics: relative L2 error")
    assert "MISMATCH" in lines[1] and "rejected: numerics" in lines[1]
    assert entry.settings.choices == {}  # even when any gain would do, a wrong candidate never wins


def test_tuned_without_an_entry_says_how_to_tune(tmp_path):
    path = model_file(tmp_path)
    result = invoke("compile", path, "--tuned", "--dtype", "bf16", "-o", tmp_path / "x.vmfb")
    assert result.exit_code == 1
    assert "no tuned settings for this model, target and machine" in result.output
    assert f"kiln tune run {path} --dtype bf16 --target llvm-cpu" in result.output
    assert f"kiln tune prepare {path} --dtype bf16 --target llvm-cpu -o DIR" in result.output
    assert not (tmp_path / "x.vmfb").exists()


def test_the_key_changes_with_the_model_file_and_what_is_compiled(tmp_path):
    path = model_file(tmp_path)

    def key(ref: ModelSource, options: CompileOptions | None = None) -> str:
        return key_of(key_fields(ref.load(), ref, options or CompileOptions()))

    first = key(ModelSource(path))
    assert key(ModelSource(path)) == first
    assert key(ModelSource(path, precision="bf16")) != first
    assert key(ModelSource(path), CompileOptions(cpu="znver4")) != first
    path.write_text(TINY + "# an edit\n")
    assert key(ModelSource(path)) != first


def test_split_prepare_measure_without_the_compiler_then_accept(tmp_path, cache):
    path, folder = model_file(tmp_path), tmp_path / "tune-dir"
    plan = prepare(ModelSource(path), CompileOptions(params="external"), (HANDOFF, BOGUS), Limits(), folder, "test", print)
    assert [c.name for c in plan.entries] == ["default", "handoff=torch", "bogus=on"]
    assert plan.entries[0].parameters == "weights.irpa" and (folder / "weights.irpa").is_file()
    assert plan.entries[0].reference == "reference.pt" and (folder / "reference.pt").is_file()
    assert plan.entries[2].artifact is None and "iree-compile failed" in (plan.entries[2].error or "")

    # The GPU machine's situation: no torch-mlir, no IREE compiler importable.
    no_compiler = "import sys; sys.modules['torch_mlir'] = None; sys.modules['iree.compiler'] = None\n"
    run = "from kiln.cli.main import main; sys.argv = ['kiln', 'tune', 'measure', sys.argv[1], '--time-s', '0.1']; main()"
    result = subprocess.run([sys.executable, "-c", no_compiler + run, str(folder)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[3/3] bogus=on" in result.stdout and "compile failed" in result.stdout

    result = invoke("tune", "accept", folder, "--min-gain", "-100")
    assert result.exit_code == 0, result.output
    assert f"compile with: kiln compile {path} --target llvm-cpu --tuned" in result.output
    stored = json.loads(entry_path(Bundle.read(folder).settings['key']).read_text())
    assert stored["settings"]["choices"] in ({}, {"handoff": "torch"})
    assert [m["name"] for m in stored["candidates"]] == ["default", "handoff=torch", "bogus=on"]

    result = invoke("compile", path, "-o", tmp_path / "tuned.vmfb", "--tuned", "--verify")
    assert result.exit_code == 0, result.output


def measurement(name: str, ms: float | None) -> Measurement:
    timing = Timing(ms, ms, ms, 3) if ms is not None else None
    return Measurement(name, 1.0, timing, error=None if ms is not None else "compile failed: no")


def test_coordinate_descent_walks_from_the_best_and_stops_at_the_limit():
    a = Knob("a", "", (Choice("0"), Choice("1"), Choice("2")))
    b = Knob("b", "", (Choice("0"), Choice("1")))
    times = {"default": 10.0, "a=1": 8.0, "a=2": 9.0, "a=1, b=1": 5.0, "a=2, b=1": 4.0}

    def evaluate(assignment):
        name = ", ".join(f"{k}={v}" for k, v in assignment.items()) or "default"
        return measurement(name, times.get(name))

    best, trail = coordinate_descent((a, b), evaluate, Limits(sweeps=2), lambda line: None)
    assert [m.name for m in trail] == ["default", "a=1", "a=2", "a=1, b=1", "b=1", "a=2, b=1"]
    assert best == {"a": "2", "b": "1"}  # the second sweep moved a again, on top of b=1

    best, trail = coordinate_descent((a, b), evaluate, Limits(max_candidates=3), lambda line: None)
    assert len(trail) == 3 and best == {"a": "1"}


def test_every_flag_in_the_search_spaces_exists_in_iree_compile():
    listed = subprocess.run([find_tool("iree-compile"), "--help-list-hidden"], capture_output=True, text=True).stdout
    known = set(flag.split("=")[0] for flag in listed.split() if flag.startswith("--"))
    flags = {flag.split("=")[0] for space in SPACES.values() for knob in space for c in knob.choices for flag in c.iree_flags}
    assert flags and flags <= known, flags - known


def test_the_command_line_defaults_are_the_library_s():
    from kiln.cli.tune_command import run_command

    defaults = {param.name: param.default for param in run_command.params}
    limits = Limits()
    assert [defaults[name] for name in ("max_candidates", "budget_s", "sweeps", "min_gain")] == [
        limits.max_candidates,
        limits.budget_s,
        limits.sweeps,
        limits.min_gain,
    ]


class RmsNorm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def test_split_for_threads_gives_iree_s_own_dispatches_more_workgroups(tmp_path):
    """IREE splits a norm over 512 rows into 16 workgroups by default, one per worker of a 16-core host;
    the knob's other choice splits it for 32 threads (benchmarks/NOTES.md, "Idle workers on the Xeon")."""
    from kiln.compiler import run_pipeline, spec_from_module

    knob = next(knob for knob in SPACES["llvm-cpu"] if knob.name == "split-for-threads")

    def workgroups(choice: Choice) -> set[str]:
        dumps = tmp_path / choice.label
        options = CompileOptions(cpu="haswell", dump_dir=dumps, extra_iree_flags=choice.iree_flags)
        run_pipeline(spec_from_module(RmsNorm(), (torch.randn(512, 2048),)), options)
        hal = next(dumps.glob("*-vmfb-*-hal.mlir")).read_text()
        return set(re.findall(r"workgroups\(\[(%c\d+), %c1, %c1\]\)", hal))

    assert [workgroups(choice) for choice in knob.choices] == [{"%c16"}, {"%c32"}]
