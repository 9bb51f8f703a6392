"""`kiln bench` and the benchmark suite's logic: statistics, ratios, tables, JSON, thin artifacts.

No assertion here is about speed: timings on a shared machine prove nothing. The tests check what
was timed, how it was summarized and what was written. The suite's logic is the library's
(kiln.tune.bench compiles, kiln.measure.suite times and collects); benchmarks/suite.py, its command
line, is run as a script.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from click.testing import CliRunner
from testkit import EXAMPLES, ROOT

from kiln.cli.main import kiln
from kiln.compiler import CompileOptions
from kiln.measure import thin
from kiln.measure.bench import against_f32, check_numerics
from kiln.measure.contractions import shape_of
from kiln.measure.results import (
    SCHEMA,
    CaseResult,
    Held,
    Numerics,
    Report,
    Timing,
    case_table,
    geomean,
    merge_reports,
    report_markdown,
    suite_table,
    summarize,
    worst_per_model,
)
from kiln.measure.suite import CASE_TIMEOUT_EXIT, GENERATED, ONE_ADD, collect, compare_bundles, time_cases
from kiln.measure.timing import Settings, measure, measure_alternating
from kiln.runtime.numerics import computes_in_tf32
from kiln.targets.cuda.kernels.contraction import Conv2d, Matmul
from kiln.tune.bench import compile_suite, find_cases, model_file_namespace, thin_params

TINY_MODEL = '''
import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": 2, "large": 4}


def get_model(dtype="f32"):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).to(DTYPES[dtype])


def get_example_inputs(batch="small", dtype="f32"):
    return (torch.randn(BATCHES[batch], 32, generator=torch.Generator().manual_seed(1)).to(DTYPES[dtype]),)
'''

OK = Numerics(ok=True, rel_l2_error=1e-7, max_abs_error=1e-6, tolerance=1e-3)
MISMATCH = Numerics(ok=False, rel_l2_error=0.5, max_abs_error=2.0, tolerance=1e-3)


def timing(median_ms: float, compile_s: float | None = None) -> Timing:
    return Timing(median_ms, median_ms * 0.9, median_ms * 1.5, 10, compile_s)


def case(name: str, dtype: str, kiln_ms: float, eager_ms: float, inductor_ms: float, numerics=OK) -> CaseResult:
    times = {"kiln": timing(kiln_ms, 2.0), "eager": timing(eager_ms, 0.0), "inductor": timing(inductor_ms, 9.0)}
    return CaseResult(name, name.split("-")[0], dtype, "small", "f32[2, 32]", times, numerics)


# ---------------------------------------------------------------------------------------------------
# Statistics and measurement


def test_timing_is_median_min_max_of_the_samples():
    t = Timing.of([3_000_000, 1_000_000, 2_000_000, 10_000_000])
    assert (t.median_ms, t.min_ms, t.max_ms, t.calls) == (2.5, 1.0, 10.0, 4)
    assert Timing.of([4_000_000]).median_ms == 4.0
    with pytest.raises(ValueError):
        Timing.of([])


def test_measure_warms_up_then_times_each_call_synchronized():
    calls, syncs = [], []
    samples = measure(lambda: calls.append(1), lambda: syncs.append(1), Settings(warmup=2, iterations=5))
    assert len(samples) == 5 and len(calls) == 7 and len(syncs) == 7
    assert all(isinstance(sample, int) and sample >= 0 for sample in samples)


def test_measure_stops_at_the_budget_but_times_three_calls():
    samples = measure(lambda: None, lambda: None, Settings(warmup=1, iterations=1000, budget_s=0.0))
    assert len(samples) == 3


def test_measure_alternating_times_the_calls_in_turn():
    """kiln's two columns are timed call by call in turn, so a drift of the machine falls on both."""
    order: list[str] = []
    first, second = measure_alternating(
        [lambda: order.append("a"), lambda: order.append("b")], lambda: None, Settings(warmup=2, iterations=4)
    )
    assert len(first) == len(second) == 4
    assert order == ["a", "b"] * 6


def test_numerics_take_the_worst_output_and_a_tolerance_by_dtype():
    want = torch.randn(16, 16)
    assert check_numerics((want.clone(),), (want,)).ok
    off = check_numerics((want.clone(), want + 1.0), (want, want))
    assert not off.ok and off.rel_l2_error > 0.1 and off.max_abs_error == pytest.approx(1.0)
    assert not check_numerics((torch.zeros(4),), (torch.zeros(5),)).ok
    bf16 = want.bfloat16()
    assert check_numerics((bf16.float().bfloat16(),), (bf16,)).tolerance == 3e-2
    assert not check_numerics((torch.tensor([1, 2]),), (torch.tensor([1, 3]),)).ok  # integers: exact


def test_a_16_bit_model_far_from_its_f32_self_is_held_to_the_f32_model():
    """T5 in bf16: eager's and kiln's outputs are each ~0.27 from the f32 model's and 0.26 from each
    other, beyond bf16's 3e-2; kiln then passes if it is no further from f32 than eager (x1.25)."""
    torch.manual_seed(0)
    reference = torch.randn(64, 64)
    eager = (reference + 0.25 * torch.randn(64, 64)).bfloat16()
    kiln_like = (reference + 0.25 * torch.randn(64, 64)).bfloat16()  # as far from f32, not from eager
    failed = check_numerics((kiln_like,), (eager,))
    assert not failed.ok
    decided = against_f32(failed, (kiln_like,), (eager,), (reference,))
    assert decided.ok and decided.rel_l2_error == failed.rel_l2_error
    kiln_error, eager_error = decided.f32_rel_l2
    assert 0.2 < kiln_error < 0.3 and 0.2 < eager_error < 0.3
    worse = (reference + 0.5 * torch.randn(64, 64)).bfloat16()  # twice as far from f32 as eager
    assert not against_f32(check_numerics((worse,), (eager,)), (worse,), (eager,), (reference,)).ok
    report = Report("cuda", "h200", "2026-01-01T00:00:00Z", "x", {}, {}, {}, (case("t5-bf16-small", "bf16", 1.0, 1.0, 1.0, decided),))
    assert Report.from_json(report.to_json()) == report  # the pair survives JSON as a pair
    assert f"from f32: kiln {kiln_error:.1e}, eager {eager_error:.1e}" in report_markdown(report)


# ---------------------------------------------------------------------------------------------------
# Ratios, geomean, tables


def test_ratio_is_kiln_time_over_the_other():
    result = case("mlp-f32-small", "f32", kiln_ms=2.0, eager_ms=4.0, inductor_ms=1.0)
    assert result.ratio("eager") == 0.5 and result.ratio("inductor") == 2.0
    assert result.ratio("kiln_call") is None


def test_summary_has_geomean_per_dtype_and_the_worst_case():
    cases = [
        case("a-f32-small", "f32", 1.0, 2.0, 0.5),  # kiln/Inductor 2.0
        case("b-f32-small", "f32", 1.0, 2.0, 2.0),  # 0.5
        case("c-f32-small", "f32", 1.0, 1.0, 0.1, numerics=MISMATCH),  # left out
        CaseResult("d-f32-small", "d", "f32", "small", "", error="kiln compile failed: boom"),  # left out
        case("a-bf16-small", "bf16", 3.0, 1.0, 1.0),
    ]
    f32, bf16 = summarize(cases)
    assert f32.dtype == "f32" and f32.vs_inductor == pytest.approx(1.0) and f32.vs_eager == pytest.approx(0.5)
    assert f32.worst == ("a-f32-small", 2.0) and (f32.counted, f32.left_out) == (2, 2)
    assert bf16.vs_inductor == pytest.approx(3.0) and bf16.worst == ("a-bf16-small", 3.0)
    assert worst_per_model(cases) == {"a": ("a-bf16-small", 3.0), "b": ("b-f32-small", 0.5)}
    assert geomean([]) is None and geomean([2.0, 8.0]) == pytest.approx(4.0)


def test_suite_table_rows_summary_and_notes():
    cases = [
        case("a-f32-small", "f32", 1.0, 2.0, 0.5),
        CaseResult("d-f32-small", "d", "f32", "small", "", error="kiln compile failed: boom"),
    ]
    table = suite_table(cases)
    row = next(line for line in table.splitlines() if line.startswith("| a-f32-small"))
    assert "| 0.50x | 2.00x | 2.0 / 9.0 | ok (1.0e-07) |" in row
    assert "| f32 | 0.50x | 2.00x | 2.00x (a-f32-small) | 1 (1 left out) |" in table
    assert "- d-f32-small: kiln compile failed: boom" in table
    single = case_table(cases[0])
    assert "| Inductor | 0.5 | 0.45 | 0.75 | 10 | 9.0 | 2.00x |" in single


def test_report_json_round_trips_and_has_the_schema():
    report = Report(
        target="llvm-cpu",
        device="cpu",
        created="2026-01-01T00:00:00Z",
        command="kiln bench m.py",
        machine={"cpu": "x", "cores": 2, "threads": 2},
        versions={"torch": "2.13.0"},
        settings={"warmup": 1},
        cases=(case("a-f32-small", "f32", 1.0, 2.0, 0.5),),
    )
    data = json.loads(report.to_json())
    assert data["schema"] == SCHEMA
    assert set(data) == {
        "schema", "target", "device", "created", "command", "machine", "versions", "settings", "cases", "overhead",
    }  # fmt: skip
    assert set(data["cases"][0]["timings"]["kiln"]) == {"median_ms", "min_ms", "max_ms", "calls", "compile_s"}
    assert Report.from_json(report.to_json()) == report
    with pytest.raises(ValueError, match="schema"):
        Report.from_json(json.dumps({**data, "schema": "other/1"}))
    assert "## llvm-cpu on cpu" in report_markdown(report) and "per-call overhead" not in report_markdown(report)
    del data["overhead"]  # reports written before the overhead was measured still read
    assert Report.from_json(json.dumps(data)) == report


def test_report_says_the_per_call_overhead():
    overhead = {"kiln_call": timing(0.0091), "kiln": timing(0.0037), "eager": timing(0.0041)}
    report = Report("llvm-cpu", "cpu", "2026-01-01T00:00:00Z", "x", {}, {}, {}, (), overhead=overhead)
    assert Report.from_json(report.to_json()).overhead == overhead
    line = "- per-call overhead (one add on f32[1], median): kiln call 9.1 us, kiln 3.7 us, eager 4.1 us"
    assert line in report_markdown(report).splitlines()


def test_merged_report_is_one_run_of_its_parts():
    """Shards of one run (e.g. one a GPU of a two-GPU host) merge into one report; parts of different
    runs, or a case timed twice, do not."""

    def part(created, command, share, *names, source="abc123"):
        cases = tuple(case(name, "f32", 1.0, 2.0, 1.5) for name in names)
        machine = {"cpu": "x", "others_cpu_share": share}
        settings = {"kiln_source": source, "compile_command": f"compile {names[0]}"}
        return Report("cuda", "h200", created, command, machine, {"torch": "2.11"}, settings, cases)

    first = part("2026-01-02T00:00:00Z", "time B --only 'a*'", 0.05, "a-f32-small", "a-f32-large")
    second = part("2026-01-01T00:00:00Z", "time B --only 'b*'", 0.2, "b-f32-small")
    merged = merge_reports([first, second])
    assert [c.name for c in merged.cases] == ["a-f32-small", "a-f32-large", "b-f32-small"]
    assert merged.created == "2026-01-01T00:00:00Z" and merged.machine["others_cpu_share"] == 0.2
    assert merged.command == "time B --only 'a*' ; time B --only 'b*'"
    assert merged.settings["compile_command"] == "compile a-f32-small ; compile b-f32-small"
    assert [p["cases"] for p in merged.settings["parts"]] == [2, 1]
    assert Report.from_json(merged.to_json()) == merged
    later = part("2026-01-01T00:00:00Z", "x", 0.0, "b-f32-small", source="def456")
    with pytest.raises(ValueError, match="different kiln sources: abc123, def456"):
        merge_reports([first, later])
    # Parts timed at different revisions merge when every artifact is a bundle's, byte for byte.
    digests = {"a-f32-small": "1" * 64, "a-f32-large": "2" * 64, "b-f32-small": "3" * 64}
    held = Held("ghi789", digests)

    def recorded(report):
        return report.with_cases(replace(c, artifact=digests[c.name]) for c in report.cases)

    both = merge_reports([recorded(first), recorded(later)], held)
    assert both.settings["kiln_source"] == "ghi789" and both.settings["timed_sources"] == ["abc123", "def456"]
    assert Report.from_json(both.to_json()) == both  # the digests survive JSON
    with pytest.raises(ValueError, match=r"not the same bytes as the bundle's artifacts: b-f32-small \(no digest recorded"):
        merge_reports([recorded(first), later], held)
    changed = later.with_cases(replace(c, artifact="4" * 64) for c in later.cases)
    with pytest.raises(ValueError, match=r"b-f32-small \(444444444444, the bundle's 333333333333\)"):
        merge_reports([recorded(first), changed], held)
    # A changed artifact timed again on the bundle's bytes replaces the older timing; twice on them is an error.
    again = merge_reports([recorded(first), changed, recorded(later)], held)
    assert [c.name for c in again.cases] == ["a-f32-small", "a-f32-large", "b-f32-small"]
    assert again.cases[-1].artifact == "3" * 64 and again.settings["superseded"] == ["b-f32-small"]
    with pytest.raises(ValueError, match="more than one part: b-f32-small"):
        merge_reports([recorded(first), recorded(later), recorded(later)], held)
    with pytest.raises(ValueError, match="more than one part: a-f32-small"):
        merge_reports([first, part("2026-01-01T00:00:00Z", "x", 0.0, "a-f32-small")])
    with pytest.raises(ValueError, match="differ in device"):
        merge_reports([first, replace(second, device="h100")])


# ---------------------------------------------------------------------------------------------------
# Thin artifacts


def test_thin_artifact_rebuilds_exactly_from_the_same_weights():
    weights = {"w": torch.randn(64, 64), "small": torch.randn(4)}
    raw = weights["w"].numpy().tobytes()
    artifact = b"header" + raw + b"middle" + raw + b"footer"
    thinned, recipe = thin.thin(artifact, weights)
    assert len(thinned) < len(raw) / 4
    assert [w["name"] for w in recipe["weights"]] == ["w"] and len(recipe["weights"][0]["offsets"]) == 2
    assert thin.thicken(thinned, recipe, weights) == artifact
    with pytest.raises(ValueError, match="differs"):
        thin.thicken(thinned, recipe, {"w": weights["w"] + 1})
    transposed = b"header" + weights["w"].t().contiguous().numpy().tobytes() + b"footer"  # as IREE folds x @ W.T
    thinned, recipe = thin.thin(transposed, weights)
    assert len(thinned) < len(raw) / 4 and recipe["weights"][0]["permutation"] == [1, 0]
    assert thin.thicken(thinned, recipe, weights) == transposed


# ---------------------------------------------------------------------------------------------------
# End to end: `kiln bench` and the suite runner on tiny models


def test_kiln_bench_prints_a_table_and_writes_json(tmp_path):
    path = tmp_path / "mlp.json"
    result = CliRunner().invoke(
        kiln,
        ["bench", str(EXAMPLES / "mlp.py"), "-q", "--warmup", "1", "--iterations", "3", "--json", str(path)],
    )
    assert result.exit_code == 0, result.output
    assert "numerics ok" in result.output and "| Inductor |" in result.output
    assert "per-call overhead (one add on f32[1], median): kiln call " in result.output
    report = Report.from_json(path.read_text())
    assert set(report.overhead) == {"kiln_call", "kiln", "eager"}
    (only,) = report.cases
    assert set(only.timings) == {"kiln", "kiln_call", "eager", "inductor"}
    assert all(t.calls == 3 for t in only.timings.values())
    assert only.timings["kiln"].compile_s > 0 and only.timings["eager"].compile_s == 0
    assert only.inputs == "f32[8, 64]" and report.settings["threads"] == torch.get_num_threads()


FAST = Settings(warmup=1, iterations=2, inductor=False)


def suite_bundle(tmp_path, only, bundle_name="bundle", thin_artifacts=False, **options):
    """The tiny model file's cases matching `only`, compiled into a bundle as `suite.py compile` does."""
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    (models / "tiny.py").write_text(TINY_MODEL)
    bundle = tmp_path / bundle_name
    cases = find_cases(models, only, ROOT)
    compile_suite(cases, CompileOptions(**options), bundle, thin_artifacts, root=ROOT, command="test")
    return bundle


def test_thin_bundles_place_weights_as_a_users_compile_does_but_on_the_cpu():
    """A thin bundle's GPU weights go where `auto` puts a user's (external above 256 MiB: inline, a
    1B model's f32 weights cost the compile over 24 GB); llvm-cpu's are external (its packed inline
    weights cannot be thinned); an explicit --params is kept."""
    assert thin_params(CompileOptions(target="cuda")) == "auto"
    assert thin_params(CompileOptions(target="llvm-cpu")) == "external"
    assert thin_params(CompileOptions(target="cuda", params="inline")) == "inline"


def test_suite_compiles_times_resumes_and_collects(tmp_path):
    bundle = suite_bundle(tmp_path, ("*-small",), thin_artifacts=True)
    data = json.loads((bundle / "bundle.json").read_text())
    assert [c["name"] for c in data["entries"]] == ["tiny-f32-small", "tiny-bf16-small"]
    assert all(c["thin"] and (bundle / c["artifact"]).suffix == ".thin" for c in data["entries"])
    assert data["settings"]["overhead"] == {"artifact": ONE_ADD} and (bundle / ONE_ADD).is_file()
    assert data["command"] == "test" and data["settings"]["kiln_source"] == "unknown"
    assert all(set(c["compile_memory_mib"]) == {"kiln", "iree_compile"} for c in data["entries"])  # peak MiB of each

    def time(only, resume, output):
        return time_cases(bundle, None, FAST, 2, only, resume, None, output, root=ROOT, results=tmp_path, command="test")

    first = time(("*-f32-*",), None, tmp_path / "first.json")
    assert [c.name for c in Report.from_json(first.read_text()).cases] == ["tiny-f32-small"]

    both = time((), first, None)  # by default <results>/<target>-<device>.json
    assert both == tmp_path / "llvm-cpu-cpu.json"
    report = Report.from_json(both.read_text())
    assert [c.name for c in report.cases] == ["tiny-f32-small", "tiny-bf16-small"]
    assert report.cases[0] == Report.from_json(first.read_text()).cases[0]  # kept, not timed again
    assert report.overhead == Report.from_json(first.read_text()).overhead != {}  # kept too
    assert all(c.numerics and c.numerics.ok and set(c.timings) == {"kiln", "kiln_call", "eager"} for c in report.cases)
    assert report.cases[1].timings["kiln"].compile_s is not None
    assert "| bf16 |" in both.with_suffix(".md").read_text()
    assert "others_cpu_share" in report.machine and report.settings["threads"] >= 1

    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("# Results\n\nhand-written preface\n")
    first.unlink()
    first.with_suffix(".md").unlink()
    collect(tmp_path, results_md)
    text = results_md.read_text()
    assert text.startswith("# Results\n\nhand-written preface\n") and GENERATED in text
    assert text.count("## llvm-cpu on cpu") == 1 and not math.isnan(report.cases[0].timings["kiln"].median_ms)

    # dispatch_profile.py over the same bundle: each --only adds cases (a second one replaced the first),
    # and --also-with profiles each case again with a runtime flag added
    profiles = tmp_path / "profiles.json"
    script = [sys.executable, str(ROOT / "benchmarks" / "dispatch_profile.py"), str(bundle), "--threads", "1"]
    only = ["--only", "tiny-f32-*", "--only", "tiny-bf16-*", "--seconds", "0.05", "-o", str(profiles)]
    spin = "--task_worker_spin_us=100"
    profiled = subprocess.run([*script, *only, f"--also-with={spin}"], capture_output=True, text=True, timeout=300)
    assert profiled.returncode == 0, profiled.stderr
    assert sorted(json.loads(profiles.read_text())) == [
        "tiny-bf16-small", f"tiny-bf16-small [{spin}]", "tiny-f32-small", f"tiny-f32-small [{spin}]"
    ], profiled.stderr  # fmt: skip
    # Sites (function and grid) partition the same dispatches, and kiln's kernel sites are labelled with
    # their contractions and rate from the manifest.
    for name, case in json.loads(profiles.read_text()).items():
        assert sum(site["total_ns"] for site in case["sites"]) == sum(group["total_ns"] for group in case["dispatches"])
        assert {site["name"] for site in case["sites"]} == {group["name"] for group in case["dispatches"]}
        assert all(0 < site["busy"] <= 1.05 for site in case["sites"] if site["total_ns"] > 0)
        for kernel in json.loads((bundle / f"{name.split(' [')[0]}.json").read_text())["kernels"]:
            if kernel.get("grid"):
                assert f"1 x {kernel['contraction']}: " in profiled.stdout, profiled.stdout

    # A case stuck where Python cannot interrupt it (a load, a device call) is recorded and the run
    # stops; a stuck rebuild stands in for it here, in a process of its own (the watchdog ends it).
    model_file = tmp_path / "models" / "tiny.py"
    model_file.write_text(TINY_MODEL + "\nimport time\ntime.sleep(600)\n")
    stuck = tmp_path / "stuck.json"
    timed_out = subprocess.run(
        [sys.executable, "-c", "from pathlib import Path; from kiln.measure.suite import time_cases; from kiln.measure.timing import Settings; "
         f"time_cases(Path({str(bundle)!r}), None, Settings(1, 2, inductor=False), 2, (), None, None, "
         f"Path({str(stuck)!r}), root=Path({str(ROOT)!r}), results=Path('.'), command='test', case_timeout_s=2, say=print)"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert timed_out.returncode == CASE_TIMEOUT_EXIT, timed_out.stderr
    assert "tiny-f32-small did not finish within 2 s" in timed_out.stdout
    (stopped,) = Report.from_json(stuck.read_text()).cases  # the run stopped at its first case
    assert stopped.name == "tiny-f32-small" and stopped.timings == {}
    assert stopped.error == "did not finish within 2 s (the run stopped there; --resume carries on past it)"
    model_file.write_text(TINY_MODEL)

    data["settings"]["suite"] = "real"  # as `suite.py compile --models benchmarks/real` writes it
    (bundle / "bundle.json").write_text(json.dumps(data))
    real = time(("*-f32-*",), None, None)
    assert real == tmp_path / "real-llvm-cpu-cpu.json" and Report.from_json(real.read_text()).settings["suite"] == "real"
    assert "## real: llvm-cpu on cpu" in real.with_suffix(".md").read_text()


def test_suite_ab_times_two_bundles_in_turn(tmp_path):
    """`suite.py ab`: the cases both bundles have, each artifact checked against eager and timed, one row each."""
    bundles = tuple(
        suite_bundle(tmp_path, ("*-f32-small",), name, kernels=kernels) for name, kernels in (("before", "off"), ("after", "on"))
    )
    rows: list[str] = []
    comparison = compare_bundles(bundles, None, Settings(warmup=1, iterations=4, inductor=False), 2, (), root=ROOT, command="test", row=rows.append)
    assert "| case | before ms | after ms | after / before | numerics (rel L2) |" in rows
    (row,) = [line for line in rows if line.startswith("| tiny-f32-small |")]
    assert row.count("ok ") == 2, row
    (case,) = comparison["cases"]
    assert case["case"] == "tiny-f32-small" and [t["calls"] for t in case["timings"]] == [4, 4]
    assert all(n["ok"] for n in case["numerics"])
    assert float(row.split("|")[4].strip().rstrip("x")) == pytest.approx(case["timings"][1]["median_ms"] / case["timings"][0]["median_ms"], rel=0.01)


def test_suite_script_runs_the_library(tmp_path):
    """benchmarks/suite.py, the command line over the library: `run` compiles and times here, `collect`
    tabulates, `ab` wants two bundles; a model file that is no suite file is an error that names it."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny.py").write_text(TINY_MODEL)
    script = str(ROOT / "benchmarks" / "suite.py")

    def suite(*args):
        return subprocess.run([sys.executable, script, *map(str, args)], capture_output=True, text=True, timeout=600)

    output = tmp_path / "results" / "tiny.json"
    run = suite("run", "--models", models, "--only", "tiny-f32-small", "--bundle", tmp_path / "bundle",
                "--warmup", "1", "--iterations", "2", "--no-inductor", "-o", output)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "compile tiny-f32-small ..." in run.stderr and "time tiny-f32-small ..." in run.stderr
    assert f"wrote {output} and {output.with_suffix('.md')}" in run.stdout
    report = Report.from_json(output.read_text())
    assert [c.name for c in report.cases] == ["tiny-f32-small"] and report.command.startswith("python benchmarks/suite.py run")
    assert "kiln_source" in json.loads((tmp_path / "bundle" / "bundle.json").read_text())["settings"]  # git describe of the checkout
    other = tmp_path / "other.json"
    other.write_text(report.with_cases([replace(c, name="tiny-f32-large") for c in report.cases]).to_json())
    merged = suite("merge", output, other, "-o", tmp_path / "merged" / "tiny.json")
    assert merged.returncode == 0 and "(2 cases from 2 parts)" in merged.stdout, merged.stderr
    assert "tiny-f32-large" in (tmp_path / "merged" / "tiny.md").read_text()
    # A case records the digest of the artifact it timed; `merge --same-as BUNDLE` takes a part timed at
    # another revision when its artifacts are the bundle's, with digests from a sidecar for old parts.
    header = json.loads((tmp_path / "bundle" / "bundle.json").read_text())
    bundle_source = header["settings"]["kiln_source"]
    digest = report.cases[0].artifact
    (entry,) = [e for e in header["entries"] if e["name"] == "tiny-f32-small"]
    assert digest == hashlib.sha256((tmp_path / "bundle" / entry["artifact"]).read_bytes()).hexdigest()
    old = tmp_path / "old.json"
    old_settings = {**report.settings, "kiln_source": "0ld"}
    old.write_text(replace(report, settings=old_settings).with_cases([replace(c, artifact=None) for c in report.cases]).to_json())
    for sidecar, ok in ((digest, True), ("f" * 64, False)):
        old.with_suffix(".sha256.json").write_text(json.dumps({"artifacts": {"tiny-f32-small": sidecar}}))
        held = suite("merge", old, "--same-as", tmp_path / "bundle", "-o", tmp_path / "held.json")
        assert (held.returncode == 0) == ok, held.stderr
    assert "Error: not the same bytes as the bundle's artifacts: tiny-f32-small (ffffffffffff" in held.stderr
    assert Report.from_json((tmp_path / "held.json").read_text()).settings["kiln_source"] == bundle_source
    apart = tmp_path / "apart"  # --same-as takes several bundles of one revision, not of two
    apart.mkdir()
    (apart / "bundle.json").write_text(json.dumps({**header, "settings": {**header["settings"], "kiln_source": "0ther"}, "entries": []}))
    mixed = suite("merge", old, "--same-as", tmp_path / "bundle", "--same-as", apart, "-o", tmp_path / "mixed.json")
    assert mixed.returncode == 1 and "the --same-as bundles were compiled from different kiln sources" in mixed.stderr
    again = suite("merge", output, output, "-o", tmp_path / "twice.json")
    assert again.returncode == 1 and "Error: cases timed in more than one part: tiny-f32-small" in again.stderr
    assert "Traceback" not in again.stderr and not (tmp_path / "twice.json").exists()
    collected = suite("collect", "--results", output.parent, "-o", tmp_path / "RESULTS.md")
    assert collected.returncode == 0 and GENERATED in (tmp_path / "RESULTS.md").read_text()
    one = suite("ab", tmp_path / "bundle")
    assert one.returncode == 2 and "give two bundles or more" in one.stderr
    (models / "plain.py").write_text("import torch\nmodel = torch.nn.ReLU()\nexample_inputs = (torch.randn(2),)\n")
    wrong = suite("compile", "--models", models, "-o", tmp_path / "none")
    assert wrong.returncode == 1 and f"Error: {models / 'plain.py'} defines no DTYPES" in wrong.stderr


def test_suite_models_are_plain_model_files():
    """Every suite model loads as `kiln compile` loads it, and offers its dtypes and batches to the runner."""
    from kiln.compiler import load_model_file

    for path in sorted((ROOT / "benchmarks" / "models").glob("*.py")):
        spec = load_model_file(path)
        namespace = model_file_namespace(path)
        assert set(namespace["DTYPES"]) >= {"f32"} and set(namespace["BATCHES"]) == {"small", "large"}, path
        assert all(p.dtype == torch.float32 for p in spec.module.parameters()), path
        assert all(x.dtype == torch.float32 for x in spec.example_inputs), path
        assert next(iter(namespace["get_model"](dtype="bf16").parameters())).dtype == torch.bfloat16, path


def test_f32_outputs_of_tf32_artifacts_get_tf32s_tolerance():
    want = torch.randn(4096, dtype=torch.float64).float()
    got = want * (1 + 5e-3 * torch.randn(4096))  # relative L2 ~5e-3: TF32-sized, not f32-sized
    assert not check_numerics((got,), (want,)).ok
    assert check_numerics((got,), (want,), tf32=True).ok
    assert not check_numerics((want * 1.05,), (want,), tf32=True).ok  # 5e-2 is wrong even for TF32
    kernels = ({"code": "kiln", "precision": "tf32"},)
    assert computes_in_tf32(kernels) and not computes_in_tf32(({"code": "iree", "precision": "tf32"},))
    assert not computes_in_tf32(({"code": "kiln", "precision": "tf32x3"},))


@pytest.mark.parametrize(
    "contraction",
    [
        Matmul(m=64, n=2304, k=768, dtype="f32", out_dtype="f32", b_layout="kn", precision="tf32x3", bias=True),
        Matmul(m=8192, n=3072, k=768, dtype="bf16", out_dtype="bf16", bias=True),
        Conv2d(n=1, c=3, h=224, w=224, k_out=64, r=7, s=7, stride=(2, 2), padding=(3, 3), dilation=(1, 1), dtype="f32", out_dtype="f32", precision="tf32"),
        Conv2d(n=2, c=32, h=56, w=56, k_out=32, r=3, s=3, stride=(1, 1), padding=(2, 2), dilation=(2, 2), dtype="bf16", out_dtype="bf16", groups=32),
    ],
    ids=lambda contraction: contraction.label,
)
def test_zoo_kernel_table_reads_the_manifests_labels(contraction):
    """The kernel tables read each contraction's size back from its manifest label: the FLOPs kiln's own
    description counts, and the precision the kernel runs."""
    shape = shape_of(contraction.label)
    assert shape is not None and shape["flops"] == contraction.flops
    assert shape["precision"] == (contraction.precision or contraction.dtype)
    assert shape_of("rows64x768-f32-12ops-f2c5c0e2") is None


def test_kiln_compile_time_leaves_building_the_model_out(tmp_path):
    """The suite's kiln compile time is the pipeline's, as the README says and as torch.compile's first
    call is timed: a model file that takes 2 s to build the model does not add them."""
    import time

    from kiln.compiler.model_file import ModelSource
    from kiln.tune.bench import compile_timed

    model_file = tmp_path / "slow_to_build.py"
    model_file.write_text(
        "import time\nimport torch\n"
        "def get_model():\n    time.sleep(2.0)\n    return torch.nn.Linear(4, 4)\n"
        "def get_example_inputs():\n    return (torch.randn(2, 4),)\n"
    )
    start = time.perf_counter()
    timed = compile_timed(ModelSource(model_file), CompileOptions())
    assert timed.compile_s < time.perf_counter() - start - 1.9
