"""Artifacts are untrusted data: every damaged `.vmfb`, `.json` or `.irpa` is one clear KilnError.

Each case loads and calls a damaged copy in a worker process (harness.py): a crash, a hang, a
result that differs from the undamaged artifact's, another exception, an error that names no file
of the artifact, or any file written in the sandbox fails the test. The bounded part runs by
default; `make fuzz` runs FUZZ_SCALE times as many cases, and the survey of what IREE does with
the same damage when kiln does not check (manifests of format 2).
"""

from __future__ import annotations

import json

import pytest
from corpus import IRPA, MANIFEST, VMFB, irpa_mutants, manifest_mutants, vmfb_mutants
from harness import SPECIAL, Mutant, Sandbox, Tally, Worker, run_mutants
from support import FUZZ_SCALE, artifact, kiln_reference, rng


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory):
    worker = Worker(Sandbox(tmp_path_factory.mktemp("sandbox")))
    yield worker
    worker.close()


def run(mutants: list[Mutant], worker: Worker, name: str) -> Tally:
    art = artifact(name)
    tally = run_mutants(mutants, worker, art.inputs, kiln_reference(name))
    print(f"\n{name}:\n{tally.table()}")
    return tally


def assert_all_clear(tally: Tally) -> None:
    assert not tally.failures, f"{len(tally.failures)} case(s) failed:\n{tally.describe_failures()}"


def others(name: str, file: str) -> list[bytes]:
    return [data for data in (artifact(name).files[file],) if data is not None]


@pytest.mark.parametrize("scale", [pytest.param(1, id="bounded"), pytest.param(FUZZ_SCALE, id="fuzz", marks=pytest.mark.fuzz)])
def test_damaged_vmfb(worker, scale):
    mutants = list(vmfb_mutants(rng("vmfb"), artifact("mlp").files, 40 * scale, others("other", VMFB)))
    tally = run(mutants, worker, "mlp")
    assert_all_clear(tally)
    assert tally.counts["vmfb", "same"] == 0  # every change to the .vmfb is caught, none run


@pytest.mark.parametrize("scale", [pytest.param(1, id="bounded"), pytest.param(FUZZ_SCALE, id="fuzz", marks=pytest.mark.fuzz)])
def test_damaged_manifest(worker, scale):
    files = artifact("mlp-external").files
    mutants = list(manifest_mutants(rng("manifest"), files, 40 * scale, others("other-external", MANIFEST)))
    assert_all_clear(run(mutants, worker, "mlp-external"))


@pytest.mark.parametrize("scale", [pytest.param(1, id="bounded"), pytest.param(FUZZ_SCALE, id="fuzz", marks=pytest.mark.fuzz)])
def test_damaged_irpa(worker, scale):
    mutants = list(irpa_mutants(rng("irpa"), artifact("mlp-external").files, 20 * scale, others("other-external", IRPA)))
    tally = run(mutants, worker, "mlp-external")
    assert_all_clear(tally)
    assert tally.counts["irpa", "same"] == 0


def test_another_models_files(worker):
    """Files of a same-shaped model with other weights: the sizes agree, only the digests tell."""
    mine, theirs = artifact("mlp-external").files, artifact("other-external").files
    mutants = [
        Mutant("swap", "another model's .irpa", {**mine, IRPA: theirs[IRPA]}),
        Mutant("swap", "another model's .vmfb", {**mine, VMFB: theirs[VMFB]}),
        Mutant("swap", "another model's .json", {**mine, MANIFEST: theirs[MANIFEST]}),
        Mutant("swap", "the .json of an inline-weights artifact", {**mine, MANIFEST: artifact("mlp").files[MANIFEST]}),
    ]
    tally = run(mutants, worker, "mlp-external")
    assert_all_clear(tally)
    assert tally.counts["swap", "error"] == len(mutants)


def test_special_files(worker):
    """Each file of the artifact replaced by a FIFO, a folder, a link to an endless device or to
    nothing: an error, never a read that waits forever."""
    files = artifact("mlp-external").files
    mutants = [
        Mutant("special", f"{name} is a {kind}", {**files, name: kind})
        for name in (VMFB, MANIFEST, IRPA)
        for kind in SPECIAL
    ]
    tally = run(mutants, worker, "mlp-external")
    assert_all_clear(tally)
    assert tally.counts["special", "error"] == len(mutants)


def test_weights_unverified_by_choice(worker):
    """verify_weights=False checks the .irpa's size only: a same-sized archive with other weights is
    then loaded, and gives other results. What the opt-out costs, measured, not hidden."""
    mine, theirs = artifact("mlp-external").files, artifact("other-external").files
    mutants = [
        Mutant("unverified", "another model's .irpa", {**mine, IRPA: theirs[IRPA]}, {"verify_weights": False}),
        Mutant("unverified", "truncated .irpa", {**mine, IRPA: mine[IRPA][:-4096]}, {"verify_weights": False}),
    ]
    tally = run(mutants, worker, "mlp-external")
    assert [outcome.kind for outcome in tally.failures] == ["wrong"]
    assert tally.counts["unverified", "error"] == 1  # the size still catches truncation


def test_other_target(worker):
    """A CUDA artifact here (no GPU), and a CUDA .vmfb under a CPU manifest: errors, not crashes."""
    cuda, cpu = artifact("cuda").files, artifact("mlp").files
    manifest = json.loads(cpu[MANIFEST])
    manifest["files"] = json.loads(cuda[MANIFEST])["files"]  # digests that match the CUDA module
    mutants = [
        Mutant("target", "a CUDA artifact on a machine without a GPU", cuda),
        Mutant("target", "a CUDA .vmfb with a CPU manifest", {**cpu, VMFB: cuda[VMFB], MANIFEST: json.dumps(manifest).encode()}),
        Mutant("target", "loaded onto a device kind it is not for", cpu, {"device": "vulkan"}),
        Mutant("target", "loaded onto a device that is not there", cuda, {"device": "cuda:7"}),
    ]
    tally = run(mutants, worker, "mlp")
    assert_all_clear(tally)
    assert tally.counts["target", "error"] == len(mutants)


def test_old_manifest_loads_unchecked(worker, tmp_path):
    """A manifest from before format 4 (no digests) still loads and runs, with a warning."""
    import kiln

    files = artifact("mlp").files
    manifest = json.loads(files[MANIFEST])
    del manifest["files"]
    manifest["format_version"] = 2
    for name, contents in {**files, MANIFEST: json.dumps(manifest).encode()}.items():
        if contents is not None:
            (tmp_path / name).write_bytes(contents)
    with pytest.warns(UserWarning, match=r"m\.vmfb: its manifest records no checksums"):
        kiln.load(tmp_path / VMFB)
    tally = run([Mutant("old", "format 2", {**files, MANIFEST: json.dumps(manifest).encode()})], worker, "mlp")
    assert tally.counts["old", "same"] == 1


@pytest.mark.fuzz
def test_survey_without_checks(worker):
    """What the same .vmfb and .irpa damage does when nothing is checked (digests removed): the
    figures for the README. IREE's own verification catches some; the rest crash or mislead, and
    every one of those is an error once the digests are checked (test_damaged_vmfb, _irpa)."""
    unchecked = Tally()
    for name, make in (("mlp", vmfb_mutants), ("mlp-external", irpa_mutants)):
        files = dict(artifact(name).files)
        manifest = json.loads(files[MANIFEST])
        del manifest["files"]
        manifest["format_version"] = 2
        files[MANIFEST] = json.dumps(manifest).encode()
        file = VMFB if make is vmfb_mutants else IRPA
        mutants = list(make(rng(f"survey-{file}"), files, 20 * FUZZ_SCALE, others(name.replace("mlp", "other"), file)))
        run_mutants(mutants, worker, artifact(name).inputs, kiln_reference(name), unchecked)
    print(f"\nwithout kiln's checks:\n{unchecked.table()}\n{unchecked.describe_failures(40)}")
    # The damage the digests stop is real: without them, some of it crashes or misleads.
    assert any(kind in ("crash", "wrong") for (_, kind) in unchecked.counts)
