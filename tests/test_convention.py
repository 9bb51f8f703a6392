"""The calling convention: an artifact is called as forward is, and answers as eager PyTorch does.

Python scalars in (specialized, checked) and out, nested results, inputs mutated in place, state a
module keeps across calls, and every dtype at the boundary (float64 kept on llvm-cpu, carried as
float32 elsewhere; uint8 stays uint8). Each result is compared with eager's.
"""

from __future__ import annotations

import collections
import json
from typing import NamedTuple

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch import nn

import kiln
from kiln.cli.main import kiln as kiln_cli
from kiln.compiler import CompileOptions, ModelSpec, run_pipeline
from kiln.compiler.model_file import EntryPoint
from kiln.compiler.verify import verify
from kiln.runtime import convention
from kiln.runtime.manifest import FORMAT_VERSION, FunctionSpec, Manifest, TensorSpec


def _same(got: object, want: object) -> None:
    """Equal nesting and types; tensors equal in dtype, shape and (closely) values."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    elif isinstance(want, dict):
        assert list(got) == list(want)  # type: ignore[arg-type]
        for key in want:
            _same(got[key], want[key])  # type: ignore[index]
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)  # type: ignore[arg-type]
        for g, w in zip(got, want, strict=True):  # type: ignore[call-overload]
            _same(g, w)
    else:
        assert got == want


class Scaled(nn.Module):
    def forward(self, x: torch.Tensor, factor: float, offset: int, negate: bool) -> tuple[torch.Tensor, int, float]:
        y = x * factor + offset
        return (-y if negate else y), offset + 1, 0.5


def test_python_scalars_are_specialized_recorded_and_checked(tmp_path):
    x = torch.randn(3, 4)
    path = kiln.compile(Scaled(), (x, 1.5, 2, True)).save(tmp_path / "scaled.vmfb")
    function = json.loads(path.with_suffix(".json").read_text())["functions"][0]
    assert function["arguments"] == {"tuple": [{"input": 0}, {"constant": 1.5}, {"constant": 2}, {"constant": True}]}
    assert function["results"] == {"tuple": [{"output": 0}, {"constant": 3}, {"constant": 0.5}]}
    artifact = kiln.load(path)
    _same(artifact(x, 1.5, 2, True), Scaled()(x, 1.5, 2, True))
    with pytest.raises(kiln.KilnError, match=r"argument 2 is 3, but the artifact was compiled for 2: torch.export fixes Python scalars"):
        artifact(x, 1.5, 3, True)
    with pytest.raises(kiln.KilnError, match=r"argument 3 is 1, but the artifact was compiled for True"):
        artifact(x, 1.5, 2, 1)
    with pytest.raises(kiln.KilnError, match=r"expected 4 input\(s\) \(x: float32\[3, 4\], = 1.5, = 2, = True\), got 2"):
        artifact(x, 1.5)


def test_a_symbolic_int_argument_is_a_0d_tensor_and_comes_back_an_int():
    class Repeat(nn.Module):
        def forward(self, x: torch.Tensor, n: int) -> tuple[torch.Tensor, int]:
            return x * n, n * 2

    x = torch.randn(2, 3)
    entry = EntryPoint("main", Repeat(), (x, 4), dynamic_shapes=(None, torch.export.Dim.DYNAMIC))
    compiled = run_pipeline(ModelSpec((entry,), None, None), CompileOptions()).compiled
    assert compiled.manifest.inputs[1] == TensorSpec("n", (), "int64")
    for n in (4, 7):
        _same(compiled(x, n), Repeat()(x, n))


class Point(NamedTuple):
    x: torch.Tensor
    y: torch.Tensor


class Nested(nn.Module):
    def forward(self, pair: tuple[torch.Tensor, torch.Tensor], named: dict[str, torch.Tensor]) -> object:
        a, b = pair
        return (
            [a + named["c"], (b * 2,)],
            {"sum": a.sum(), "point": Point(a, b), "none": None},
            collections.OrderedDict(z=b - a),
            torch.max(a, dim=0),
        )


def test_nested_arguments_and_results_keep_their_structure(tmp_path):
    args = ((torch.randn(3, 4), torch.randn(3, 4)), {"c": torch.randn(3, 4)})
    artifact = kiln.load(kiln.compile(Nested(), args).save(tmp_path / "nested.vmfb"))
    got = artifact(*args)
    want = Nested()(*args)
    _same(got[:3], want[:3])
    assert type(got[1]["point"]).__name__ == "Point" and got[1]["point"]._fields == ("x", "y")
    assert type(got[3]) is type(want[3])  # torch.return_types.max
    _same(tuple(got[3]), tuple(want[3]))
    with pytest.raises(kiln.KilnError, match=r"argument 1 must be a dict with keys \['c'\], got dict"):
        artifact(args[0], {"d": torch.randn(3, 4)})
    with pytest.raises(kiln.KilnError, match=r"argument 0 must be a tuple of 2, got a list of 3"):
        artifact([torch.randn(3, 4)] * 3, args[1])


def test_a_single_output_in_a_tuple_stays_a_tuple():
    class One(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
            return (x * 2,)

    x = torch.randn(3)
    _same(kiln.compile(One(), (x,))(x), (x * 2,))


class AddInPlace(nn.Module):
    def forward(self, x: torch.Tensor, index: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        x.index_put_((index,), y)
        return x * 2


def test_inputs_mutated_in_place_are_written_back_and_the_result_is_forwards():
    x, index, y = torch.randn(5, 3), torch.tensor([0, 3]), torch.randn(2, 3)
    compiled = kiln.compile(AddInPlace(), (x.clone(), index, y))
    assert compiled.manifest.functions[0].writes_back == (0,)
    mine, eagers = x.clone(), x.clone()
    got = compiled(mine, index, y)
    want = AddInPlace()(eagers, index, y)
    _same(got, want)  # one tensor, not a tuple with the mutated input
    torch.testing.assert_close(mine, eagers)
    as_array = x.numpy().copy()
    compiled(as_array, index, y)
    np.testing.assert_allclose(as_array, eagers.numpy(), rtol=1e-6)


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.scale = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count += 1
        with torch.no_grad():
            self.scale.mul_(2)  # as RWKV rescales its weights in forward
        return x * self.count * self.scale


def test_state_is_kept_in_the_artifact_across_calls_and_per_loaded_module(tmp_path):
    x = torch.randn(3)
    path = kiln.compile(Counter(), (x,)).save(tmp_path / "counter.vmfb")
    assert Manifest.from_json(path.with_suffix(".json").read_text()).functions[0].state == ("scale", "count")  # parameters, then buffers
    first, second, eager = kiln.load(path), kiln.load(path), Counter()
    for _ in range(3):
        _same(first(x), eager(x).detach())
    _same(second(x), Counter()(x).detach())  # another loaded module starts from the initial state
    assert int(eager.count) == 3  # compiling and calling never touched this module


def test_verify_compares_mutated_inputs_and_leaves_the_module_as_it_was(tmp_path):
    model_file = tmp_path / "mutating.py"
    model_file.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.register_buffer('count', torch.zeros(()))\n"
        "    def forward(self, x, y, scale: float):\n"
        "        self.count += 1\n"
        "        x.mul_(scale)\n"
        "        return {'out': x + y * self.count, 'n': 2}\n"
        "model = M()\n"
        "example_inputs = (torch.randn(4), torch.randn(4), 0.5)\n"
    )
    result = CliRunner().invoke(kiln_cli, ["compile", str(model_file), "-o", str(tmp_path / "m.vmfb"), "--verify", "-q"])
    assert result.exit_code == 0, result.output
    verified = [line.split(":")[0] for line in result.output.splitlines() if line.startswith("verify ")]
    assert len(verified) == 3 and verified[1:] == ["verify constant 2", "verify x (mutated)"], result.output
    assert all(line.endswith("  ok") for line in result.output.splitlines() if line.startswith("verify "))
    run = CliRunner().invoke(kiln_cli, ["run", str(tmp_path / "m.vmfb"), "--random"])
    assert run.exit_code == 0, run.output
    assert run.output.splitlines()[0].endswith(": torch.float32 [4]") and len(run.output.splitlines()) == 2  # the one tensor


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (torch.float64, lambda: torch.randn(3, 4, dtype=torch.float64)),
        (torch.uint8, lambda: torch.randint(0, 256, (3, 4)).to(torch.uint8)),
        (torch.int8, lambda: torch.randint(-128, 128, (3, 4)).to(torch.int8)),
    ],
)
def test_dtypes_come_back_as_eager_gives_them(dtype, values):
    class Twice(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x + x, x > x.flatten()[0]

    x = values()
    compiled = kiln.compile(Twice(), (x,))
    got, want = compiled(x), Twice()(x)
    assert got[0].dtype == dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)  # float64 computed in float64: exact


def test_float64_stays_float64_on_llvm_cpu_and_is_carried_as_float32_elsewhere():
    class Third(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x / 3

    x = torch.randn(4, dtype=torch.float64)
    cpu = kiln.compile(Third(), (x,))
    assert "--iree-input-demote-f64-to-f32=false" in cpu.manifest.iree_flags
    assert cpu.manifest.inputs[0].carried_as is None
    torch.testing.assert_close(cpu(x), x / 3, rtol=0, atol=0)
    vulkan = kiln.compile(Third(), (x,), target="vulkan-spirv", gpu_arch="ampere")
    assert (vulkan.manifest.inputs[0].carried_as, vulkan.manifest.outputs[0].carried_as) == ("float32", "float32")


def test_the_runtime_converts_carried_dtypes():
    carried = TensorSpec("x", (2,), "float64", carried_as="float32")
    assert convention.to_carried(np.array([1.0, 1 / 3]), carried).dtype == np.float32
    assert convention.to_carried(torch.tensor([1.0, 1 / 3], dtype=torch.float64), carried).dtype == torch.float32
    assert convention.from_carried(torch.tensor([0.5, 2.0]), carried).dtype == torch.float64
    plain = TensorSpec("y", (2,), "uint8")
    y = torch.tensor([255, 5], dtype=torch.uint8)
    assert convention.to_carried(y, plain) is y and convention.from_carried(y, plain) is y


def test_a_manifest_before_format_3_reads_and_calls_as_before():
    old = {
        "functions": [{"name": "main", "inputs": [{"name": "x", "shape": [3], "dtype": "float32"}], "outputs": []}],
        "target": "llvm-cpu", "driver": "local-task", "target_details": {}, "iree_flags": [], "versions": {},
        "format_version": 2,
    }  # fmt: skip
    manifest = Manifest.from_json(json.dumps(old))
    function = manifest.functions[0]
    assert function == FunctionSpec("main", (TensorSpec("x", (3,), "float32"),), ())
    assert FORMAT_VERSION == 7 and manifest.format_version == 2
    assert convention.arguments(function, (1, 2)) == [1, 2]  # positional, checked by the module
    assert convention.results(function, ["a"]) == "a" and convention.results(function, ["a", "b"]) == ("a", "b")


class Decoder(nn.Module):
    """Two entry points sharing a cache: `write` fills it, `read` (which never mutates) reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.cache.add_(x)
        return self.cache * 1

    def read(self, scale: torch.Tensor) -> torch.Tensor:
        return self.cache * scale


def test_state_is_shared_by_the_functions_of_one_model():
    decoder, x, scale = Decoder(), torch.randn(4), torch.tensor(2.0)
    entries = (EntryPoint("write", decoder, (x,)), EntryPoint("read", decoder, (scale,), method="read"))
    compiled = run_pipeline(ModelSpec(entries, None, None), CompileOptions()).compiled
    functions, eager = compiled.load().functions, Decoder()
    for _ in range(2):
        _same(functions["write"](x), eager(x))
        _same(functions["read"](scale), eager.read(scale))


def test_verify_runs_the_functions_of_one_model_on_one_state():
    """The artifact's functions share the model's state, so eager's must too: `read` after `write`
    reads what `write` cached, on both sides (a copy per function compared `read` with an empty cache)."""
    decoder, x, scale = Decoder(), torch.randn(4), torch.tensor(2.0)
    entries = (EntryPoint("write", decoder, (x,)), EntryPoint("read", decoder, (scale,), method="read"))
    spec = ModelSpec(entries, None, None)
    checks = verify(run_pipeline(spec, CompileOptions()).compiled, spec)
    assert [check.name for check in checks] == ["write.mul", "read.mul"] and all(check.ok for check in checks), checks
    assert not decoder.cache.any()  # the user's module is left as it was


def test_an_input_that_cannot_be_updated_in_place_is_a_clear_error():
    x, index, y = torch.randn(5, 3), torch.tensor([0, 3]), torch.randn(2, 3)
    compiled = kiln.compile(AddInPlace(), (x.clone(), index, y))
    frozen = x.numpy().copy()
    frozen.flags.writeable = False
    with pytest.raises(kiln.KilnError, match=r"input 'x' could not be updated in place, as forward updates it \(.*read-only"):
        compiled(frozen, index, y)
