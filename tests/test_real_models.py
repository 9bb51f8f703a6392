"""The real-model benchmark (benchmarks/real/): its CI slice, its weights, its place in the suite.

Every model file there is a transformers (or timm) architecture whose published config is written out
in the file. At size="tiny" the same file builds the same architecture small (one or two layers,
widths of 16-80, batch 2, short inputs), which CI compiles for llvm-cpu and checks against eager in
f32: a few seconds a case. A case kiln fails today is an xfail(strict=True) holding the exact error,
so that this file records what fails and the case turns into a failure ("XPASS(strict)") once
fixed: then move it out of KNOWN_FAILURES. A case that fails with another error fails. Where
iree-compile fails with one of kiln's defaults (a lever: data tiling, channels-last, the run-time
assertions) kiln compiles without it and says so; those notes are recorded in KNOWN_FALLBACKS the
same way: a new one fails the case, and so does one that no longer happens.

The weights are set by tensor name (benchmarks/real/_weights.py), so that artifacts carried thin
rebuild bit-identically on another machine: the tests here pin the generator's bits, check that two
builds agree and that a tensor's values follow its name, not the order modules were built in.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import inspect
import math
import sys

import pytest
import torch
from testkit import ROOT, as_tuple
from torch import nn

from kiln.compiler import CompileOptions, run_pipeline, spec_from_module
from kiln.measure.bench import check_numerics
from kiln.runtime.devices import host_cpu_flags
from kiln.tune.bench import find_cases, model_file_namespace

REAL = ROOT / "benchmarks" / "real"
FILES = sorted(path.stem for path in REAL.glob("*.py") if not path.name.startswith("_"))

# Cases kiln fails today, with the error's text (a part of it that names the failure exactly).
KNOWN_FAILURES: dict[str, str] = {}

# Cases that compile only once kiln drops a default iree-compile fails with: the note's text ("..."
# for the start of a path, "*" for a line number).
KNOWN_FALLBACKS: dict[str, tuple[str, ...]] = {
    # the pooling head's probe through its query weights, a matmul of constants alone, hoisted into the
    # load initializer once const-eval is off: IREE 3.13's data tiling crashes on it there, with the
    # encodings of a host without AVX-512 (compiled for znver3 it crashes; for skylake-avx512 and znver4 not)
    "siglip_base": (
        "iree-compile failed with kiln's no-const-eval default (iree-compile crashed (SIGSEGV) (in IREE's MaterializeDeviceEncodingPass)); compiled without it",
    )
    if "avx512f" not in host_cpu_flags()
    else (),
}

# Parameters at the published size, counted on the meta device: catches a mistyped config number.
# Files marked "shaped" keep the published widths and heads but fewer layers (their docstrings say).
PUBLISHED_PARAMETERS = {
    "bart_base": 139.4e6,
    "beit_base": 86.5e6,
    "bert_base": 109.5e6,
    "clip_vit_b32": 151.3e6,
    "convnext_tiny": 28.6e6,
    "deit_small": 22.4e6,
    "distilbert_base": 66.4e6,
    "efficientnet_b0": 5.29e6,
    "gemma_2b": 1.185e9,  # shaped: 6 of 18 layers
    "gpt2": 124.4e6,
    "llama_3_2_1b": 1.236e9,
    "mistral_7b": 1.135e9,  # shaped: 4 of 32 layers
    "mobilenet_v2": 3.51e6,
    "mobilenet_v3_large": 5.48e6,
    "phi_2": 891.6e6,  # shaped: 8 of 32 layers
    "qwen2_5_0_5b": 494.0e6,
    "qwen3_0_6b": 596.0e6,
    "regnet_y_040": 20.65e6,
    "resnet50": 25.56e6,
    "roberta_base": 124.6e6,
    "siglip_base": 203.2e6,
    "swin_tiny": 28.3e6,
    "t5_base": 222.9e6,
    "vit_base": 86.6e6,
    "whisper_small_encoder": 88.2e6,
}


class KnownFailure(Exception):
    """The case failed with its recorded error (KNOWN_FAILURES): what its xfail expects."""


def namespace_of(name: str) -> dict:
    namespace = model_file_namespace(REAL / f"{name}.py")
    missing = [module for module in namespace.get("REQUIRES", ()) if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(f"{name} needs {', '.join(missing)} (make models builds .venv-models with it)")
    return namespace


def case(name: str):
    if name not in KNOWN_FAILURES:
        return name
    return pytest.param(name, marks=pytest.mark.xfail(strict=True, raises=KnownFailure, reason=KNOWN_FAILURES[name]))


@pytest.mark.slow
@pytest.mark.parametrize("name", [case(name) for name in FILES])
def test_tiny_real_model_matches_eager(name):
    """The model file at size="tiny" compiles for llvm-cpu and matches eager PyTorch (f32, batch 2)."""
    namespace = namespace_of(name)
    model = namespace["get_model"](dtype="f32", size="tiny")
    inputs = namespace["get_example_inputs"](batch="throughput", dtype="f32", size="tiny")
    with torch.no_grad():
        expected = as_tuple(model(*inputs))
    notes: list[str] = []
    try:
        compiled = run_pipeline(spec_from_module(model, inputs), CompileOptions(), say=notes.append).compiled
        actual = as_tuple(compiled(*inputs))
        numerics = check_numerics(actual, expected)
        assert numerics.ok, f"numerics: relative L2 error {numerics.rel_l2_error:.2e} > {numerics.tolerance}"
    except Exception as exc:
        if name in KNOWN_FAILURES and KNOWN_FAILURES[name] in str(exc):
            raise KnownFailure(str(exc)) from exc
        raise
    fallbacks = [note.removeprefix("note: ") for note in notes if "iree-compile failed" in note]
    known = [_pattern(text) for text in KNOWN_FALLBACKS.get(name, ())]
    assert [f for f in fallbacks if not any(fnmatch.fnmatchcase(f, k) for k in known)] == [], "a new fallback"
    assert [k for k in known if not any(fnmatch.fnmatchcase(f, k) for f in fallbacks)] == [], "fixed: remove it"


def _pattern(known: str) -> str:
    """A KNOWN_FALLBACKS text as a glob: "..." stands for the start of a path, "*" for a line number."""
    return known.replace("[", "[[]").replace("...", "*")


def test_real_model_files_are_suite_model_files():
    """Each file offers f32 and bf16, a latency (batch 1) and a throughput point, sizes "full" (the
    default, for `kiln compile` and the suite) and "tiny"; the suite finds four cases a file and skips
    the helpers (_*.py) and files whose REQUIRES are missing."""
    skipped: list[str] = []
    cases = find_cases(REAL, (), ROOT, say=skipped.append)
    runnable = [name for name in FILES if not any(line.startswith(f"skip {name}.py") for line in skipped)]
    assert len(FILES) >= 24 and {case.model for case in cases} == set(runnable)
    assert len(cases) == 4 * len(runnable)
    for name in FILES:
        namespace = model_file_namespace(REAL / f"{name}.py")
        assert set(namespace["DTYPES"]) == {"f32", "bf16"}, name
        assert set(namespace["BATCHES"]) == {"latency", "throughput"}, name
        latency = namespace["BATCHES"]["latency"]
        assert (latency[0] if isinstance(latency, tuple) else latency) == 1, name
        for factory in ("get_model", "get_example_inputs"):
            defaults = {k: p.default for k, p in inspect.signature(namespace[factory]).parameters.items()}
            assert defaults.get("dtype") == "f32" and defaults.get("size") == "full", (name, factory)


@pytest.mark.parametrize("name", FILES)
def test_published_size(name):
    """At size="full" the model has the published number of parameters (built on the meta device: shapes only)."""
    namespace = namespace_of(name)
    with torch.device("meta"):
        model = namespace["get_model"]()
    count = sum(parameter.numel() for parameter in model.parameters())
    assert count == pytest.approx(PUBLISHED_PARAMETERS[name], rel=2e-3), f"{name}: {count / 1e6:.2f}M parameters"


# ---------------------------------------------------------------------------------------------------
# Weights by name


@pytest.fixture(scope="module")
def weights():
    sys.path.insert(0, str(REAL))
    try:
        import _weights
    finally:
        sys.path.remove(str(REAL))
    return _weights


def test_generator_bits_are_pinned(weights):
    """The bits themselves: a change here changes every real model's weights, and thin artifacts
    compiled before it no longer rebuild. SplitMix64 is checked against Python's own integers too."""
    import numpy as np

    mask = 2**64 - 1
    key = weights.key_of("x")

    def splitmix(index: int) -> int:
        z = (key + (index + 1) * 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    assert [int(v) for v in weights.draws("x", 70_000, 3)] == [splitmix(i) for i in range(70_000, 70_003)]
    assert hex(weights.key_of("model.embed_tokens.weight")) == "0x2ae5039bac43d4fc"
    assert weights.fill("model.embed_tokens.weight", 4, "normal", 0.02).view(np.uint32).tolist() == [
        3151973318, 972792289, 1012368043, 3167638971,
    ]  # fmt: skip
    assert weights.fill("bn.running_var", 3, "uniform", 1.0, 0.5).view(np.uint32).tolist() == [1065521732, 1068678856, 1066434212]
    assert weights.token_input("t", (1, 4), 1000).tolist() == [[616, 893, 942, 679]]
    many = weights.fill("w", 300_000, "normal", 0.5)  # several chunks, in threads: the same as one by one
    assert np.array_equal(many[-5:], weights.fill("w", 300_000, "normal", 0.5)[-5:])
    assert abs(float(many.std()) - 0.5) < 0.005 and abs(float(many.mean())) < 0.005 and float(abs(many).max()) < 0.5 * 3.47


def test_two_builds_give_identical_state_dicts():
    """The same file built twice, with torch's random state moved in between, gives the same bits; so
    do bf16 builds (f32 rounded the same way)."""
    namespace = model_file_namespace(REAL / "llama_3_2_1b.py")
    first = namespace["get_model"](size="tiny").state_dict()
    torch.manual_seed(1234)
    torch.randn(1000)
    second = model_file_namespace(REAL / "llama_3_2_1b.py")["get_model"](size="tiny").state_dict()
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    bf16 = namespace["get_model"](dtype="bf16", size="tiny").state_dict()
    assert all(torch.equal(bf16[k], first[k].to(torch.bfloat16)) for k in first if first[k].is_floating_point())


def test_values_follow_names_not_construction_order(weights):
    """Modules built in another order (another random state for the library's own init) get the same
    tensors by name; a tied weight is set once, under its smallest name; batch norm statistics are set,
    other buffers are left as the architecture made them."""

    class Net(nn.Module):
        def __init__(self, order: tuple[str, ...]) -> None:
            super().__init__()
            makers = {
                "embed": lambda: nn.Embedding(50, 16),
                "norm": lambda: nn.LayerNorm(16),
                "conv": lambda: nn.Conv2d(16, 8, 3),
                "bn": lambda: nn.BatchNorm2d(8),
                "head": lambda: nn.Linear(16, 50),
            }
            for name in order:
                self.add_module(name, makers[name]())
            self.head.weight = self.embed.weight  # tied
            self.register_buffer("table", torch.arange(6.0))

    one = weights.set_weights(Net(("embed", "norm", "conv", "bn", "head")), fan_in=True)
    torch.manual_seed(7)
    other = weights.set_weights(Net(("head", "bn", "conv", "norm", "embed")), fan_in=True)
    a, b = one.state_dict(), other.state_dict()
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert torch.equal(a["table"], torch.arange(6.0))
    embedding = torch.from_numpy(weights.fill("embed.weight", 800, "normal", 0.02)).view(50, 16)  # `std`, not fan-in
    assert torch.equal(one.embed.weight.detach(), embedding) and one.head.weight is one.embed.weight
    assert torch.equal(one.conv.weight.detach().flatten(), torch.from_numpy(weights.fill("conv.weight", 8 * 16 * 9, "normal", 1 / math.sqrt(16 * 9))))
    norm = one.norm.weight.detach()
    assert float(norm.min()) > 0.6 and float(norm.max()) < 1.4  # 1 + 0.1 * normal
    assert float(one.bn.running_var.min()) >= 0.5 and not torch.equal(one.bn.running_mean, torch.zeros(8))
    assert float(one.conv.bias.abs().max()) < 0.1 and float(one.conv.bias.abs().min()) > 0
