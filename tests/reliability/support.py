"""The artifacts the reliability suite damages, loads and calls: compiled once per test process.

Small on purpose (a 3-layer MLP of about 100 KiB of weights): the suite is about what happens at
the edges, and a small artifact lets it try thousands of cases on two cores.
"""

from __future__ import annotations

import atexit
import functools
import os
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.export import Dim

import kiln

ROOT = Path(__file__).resolve().parents[2]

# The long part's budget: `make fuzz` (pytest -m fuzz) runs it; the default run skips it.
FUZZ_SCALE = 10  # the long part tries this many times the cases of the bounded part


def seed() -> int:
    """The corpus seed: KILN_FUZZ_SEED to replay or vary a run, else fixed."""
    return int(os.environ.get("KILN_FUZZ_SEED", "17"))


def mlp(weights_seed: int) -> nn.Module:
    torch.manual_seed(weights_seed)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10)).eval()


# A model file of its own (a forward written in it, so its lines are in the artifact's debug information).
HERE_MODEL = """import torch
from torch import nn

torch.manual_seed(0)


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 64)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2 + x


model = Residual()
example_inputs = (torch.randn(8, 64),)
"""


class DynamicMLP(nn.Module):
    """Two inputs sharing a dynamic batch size (1 to 64): for bounds and disagreeing sizes."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.layers = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.layers(x) + bias


class Lookup(nn.Module):
    """Token ids in, through an embedding table of 50 rows: for indices the caller gets wrong."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.table = nn.Embedding(50, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.table(ids))


@dataclass(frozen=True)
class Artifact:
    """A saved artifact, its files' bytes, and a reference call: inputs and eager outputs as .npy files."""

    vmfb: Path
    files: dict[str, bytes | None]  # "m.vmfb", "m.json", "m.irpa" (None: none)
    inputs: list[str]
    reference: list[str]


@functools.cache
def scratch() -> Path:
    """A folder for this test process, removed when it ends."""
    folder = Path(tempfile.mkdtemp(prefix="kiln-reliability-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


RECIPES = {
    # name: (model, example inputs, compile options)
    "mlp": (lambda: mlp(0), lambda: (torch.randn(8, 64),), {"params": "inline"}),
    "mlp-external": (lambda: mlp(0), lambda: (torch.randn(8, 64),), {"params": "external"}),
    "other": (lambda: mlp(1), lambda: (torch.randn(8, 64),), {"params": "inline"}),
    "other-external": (lambda: mlp(1), lambda: (torch.randn(8, 64),), {"params": "external"}),
    "cuda": (lambda: mlp(0), lambda: (torch.randn(8, 64),), {"target": "cuda", "gpu_arch": "sm_80"}),
    "lookup": (Lookup, lambda: (torch.randint(0, 50, (4, 6)),), {}),
    "dynamic": (
        DynamicMLP,
        lambda: (torch.randn(16, 32), torch.randn(16, 8)),
        {"dynamic_shapes": {"x": {0: Dim("batch", min=1, max=64)}, "bias": {0: Dim("batch", min=1, max=64)}}},
    ),
}


@functools.cache
def artifact(name: str) -> Artifact:
    """Compile and save recipe `name` (once per process), with a reference call from eager PyTorch."""
    make_model, make_inputs, options = RECIPES[name]
    options = dict(options)
    target = options.pop("target", "llvm-cpu")
    model = make_model()
    torch.manual_seed(100)
    inputs = make_inputs()
    folder = scratch() / name
    vmfb = kiln.compile(model, inputs, target, **options).save(folder / "m.vmfb")
    with torch.no_grad():
        outputs = model(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return Artifact(
        vmfb=vmfb,
        files={file: _read(folder / file) for file in ("m.vmfb", "m.json", "m.irpa")},
        inputs=_saved_arrays(folder, "input", inputs),
        reference=_saved_arrays(folder, "eager", outputs),
    )


def kiln_reference(name: str) -> list[str]:
    """The artifact's own results on its inputs (.npy), to compare damaged copies with bit for bit."""
    art = artifact(name)
    results = kiln.load(art.vmfb)(*(torch.from_numpy(np.load(path)) for path in art.inputs))
    results = results if isinstance(results, tuple) else (results,)
    return _saved_arrays(art.vmfb.parent, "kiln", results)


def rng(label: str) -> random.Random:
    """A random source for one corpus, fixed by the seed and the label (so corpora do not shift together)."""
    return random.Random(f"{seed()}:{label}")


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def _saved_arrays(folder: Path, stem: str, tensors: tuple[torch.Tensor, ...]) -> list[str]:
    paths = []
    for index, tensor in enumerate(tensors):
        path = folder / f"{stem}{index}.npy"
        np.save(path, tensor.detach().numpy())
        paths.append(str(path))
    return paths
