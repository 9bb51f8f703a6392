"""Determinism: the same model compiles to the same bytes, and the same inputs give the same bits.

One difference is by design and recorded here: the `.vmfb` keeps the source locations of the ops
(IREE's debug information, for error messages and profiles), so a model file compiled from
another folder differs in the bytes of that path, and in nothing else.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from support import HERE_MODEL, DynamicMLP, artifact

import kiln

KILN = str(Path(sys.executable).parent / "kiln")


def test_compiling_twice_gives_the_same_bytes(tmp_path):
    inputs = (torch.randn(16, 32), torch.randn(16, 8))
    first, second = (kiln.compile(DynamicMLP(), inputs) for _ in range(2))
    assert first.vmfb == second.vmfb
    assert first.manifest == second.manifest
    paths = [artifact.save(tmp_path / f"{name}.vmfb") for artifact, name in ((first, "a"), (second, "b"))]
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert json.loads(paths[0].with_suffix(".json").read_text()) == json.loads(paths[1].with_suffix(".json").read_text())


@pytest.mark.fuzz
def test_compiling_in_two_processes_gives_the_same_bytes(tmp_path):
    (tmp_path / "model.py").write_text(HERE_MODEL)
    for run in ("one", "two"):
        command = [KILN, "compile", str(tmp_path / "model.py"), "--params", "external", "-q", "-o", str(tmp_path / run / "m.vmfb")]
        subprocess.run(command, check=True)
    for suffix in (".vmfb", ".irpa", ".json"):
        assert (tmp_path / "one" / f"m{suffix}").read_bytes() == (tmp_path / "two" / f"m{suffix}").read_bytes()


def test_another_folder_differs_only_in_the_path(tmp_path):
    """The one recorded difference: the model file's path, kept in the module's debug information and
    in the dispatches' (the .vmfb is a zip of both, so their checksums in it differ too)."""
    for folder in ("aaaa", "bbbb"):  # paths of the same length, so the bytes line up
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "model.py").write_text(HERE_MODEL)
        command = [KILN, "compile", str(tmp_path / folder / "model.py"), "-q", "-o", str(tmp_path / folder / "m.vmfb")]
        subprocess.run(command, check=True)
    first, second = (zipfile.ZipFile(tmp_path / folder / "m.vmfb") for folder in ("aaaa", "bbbb"))
    assert first.namelist() == second.namelist()
    assert any(first.read(name) != second.read(name) for name in first.namelist())
    for name in first.namelist():
        moved = first.read(name).replace(f"{tmp_path}/aaaa/".encode(), f"{tmp_path}/bbbb/".encode())
        assert moved == second.read(name), name


PROBE = """
import hashlib, sys, torch, kiln
module = kiln.load(sys.argv[1])
digest = hashlib.sha256()
for batch in (1, 2, 7, 16, 64):
    torch.manual_seed(batch)
    for _ in range(3):
        result = module(torch.randn(batch, 32), torch.randn(batch, 8))
        digest.update(result.numpy().tobytes())
print(digest.hexdigest())
"""


def test_same_inputs_same_bits_across_calls_and_processes():
    path = artifact("dynamic").vmfb
    module = kiln.load(path)
    torch.manual_seed(9)
    x, bias = torch.randn(64, 32), torch.randn(64, 8)
    first = module(x, bias)
    assert all(torch.equal(module(x, bias), first) for _ in range(50))
    digests = {subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True).stdout
               for _ in range(2)}  # fmt: skip
    assert len(digests) == 1
    here = hashlib.sha256()
    for batch in (1, 2, 7, 16, 64):
        torch.manual_seed(batch)
        for _ in range(3):
            here.update(module(torch.randn(batch, 32), torch.randn(batch, 8)).numpy().tobytes())
    assert digests == {here.hexdigest() + "\n"}
