"""The manifest: the JSON file beside every `.vmfb` that says how to call it.

It is the contract between the compiler, which writes it, and the runtime, which checks every call
against it. The runtime owns the format so that a deployment needs only `kiln.runtime`.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

FORMAT_VERSION = 7  # 2: several functions; 3: the calling convention (arguments, results, write-backs, state);
# 4: the size and sha256 of the .vmfb and .irpa (`files`); 5: transient variants (`transients_variant`);
# 6: `generation` (prefill and decode over a KV cache); 7: `generation.prefill_chunk` (prefill takes the
# prompt in chunks of a fixed size)


# A dimension: a size, or the name of a dynamic size's symbol ("s0"; outputs may hold an expression).
Dim = int | str


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[Dim, ...]
    dtype: str  # torch dtype name without the prefix: "float32", "bfloat16", "int64", "bool"
    carried_as: str | None = None  # the dtype the compiled function takes or returns instead, where the
    # target lacks `dtype` (float64 on a GPU target: float32); the runtime converts at the boundary

    def describe(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]"


# The nesting of a function's arguments or results, as JSON: {"tuple": [...]}, {"list": [...]},
# {"dict": [[key, node], ...]}, {"namedtuple": "module.Name", "fields": [...], "items": [...]},
# {"node": "module.Name", "context": ..., "items": [...]} (another pytree container), and leaves
# {"input": i} / {"output": i} (a tensor of `inputs` / `outputs`; with "scalar": "int", a Python int
# carried as a 0-d int64 tensor) or {"constant": value} (a Python value fixed at compile time).
Tree = Any


@dataclass(frozen=True)
class FunctionSpec:
    """One callable function of an artifact: its name, inputs and outputs, and its dynamic sizes.

    `inputs` and `outputs` are the tensors the compiled function takes and returns; `arguments` and
    `results` say how they nest in forward's call (None in manifests before format 3: the inputs in
    order, and one output or a tuple). The compiled function returns `outputs`, then one new value
    per entry of `writes_back`: the index of the input it is copied into (forward mutated it).
    `state` names the buffers and parameters the artifact keeps across calls (forward mutates them).
    """

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    symbols: dict[str, list[int | None]] = field(default_factory=dict)  # dynamic size -> [min, max or null]
    arguments: Tree = None
    results: Tree = None
    writes_back: tuple[int, ...] = ()
    state: tuple[str, ...] = ()
    # The exported function that writes the results into tensors the caller allocated (one trailing
    # argument per result, written-back inputs included), e.g. "main$out"; None in artifacts without one.
    out_variant: str | None = None
    # The exported function that keeps the call's intermediate tensors in a buffer the caller passes
    # (one trailing !hal.buffer argument), e.g. "main$transients"; None in artifacts without one (GPU).
    transients_variant: str | None = None
    # Inputs the compiled code may write into (IREE computes some in-place ops into their argument):
    # the runtime hands IREE a copy of these (kiln.compiler.written_inputs).
    overwritten: tuple[int, ...] = ()

    @property
    def returns(self) -> tuple[TensorSpec, ...]:
        """What the compiled function returns: `outputs`, then the new value of each input in `writes_back`."""
        return (*self.outputs, *(self.inputs[index] for index in self.writes_back))


# Prompt tokens a --generate artifact's prefill call takes unless the compile says otherwise: a static
# shape, which kiln's kernels need (with the prompt's length dynamic, IREE's own code took 845 ms for
# 128 tokens of Llama-3.2-1B on the H200, eager 14 ms); a longer prompt goes in chunks, a shorter one padded.
PREFILL_CHUNK = 128
QUANTIZE_SCHEMES = ("int8", "int4", "int4-g32", "int4-g64", "int4-g128")  # --quantize's names (int4 is int4-g128)


@dataclass(frozen=True)
class GenerationSpec:
    """An artifact compiled with `--generate`: `prefill(ids[batch, prefill_chunk], start[1], count[1])`
    (a chunk of the prompt at positions `start` on, its first `count` tokens real, the rest padding)
    and `decode(token[batch], position[1])`, each returning (the greedy next token [batch], the logits
    [batch, vocab], the next position [1]), over a KV cache of `max_seq_len` positions kept in the artifact."""

    max_seq_len: int
    batch: int
    vocab: int
    prefill_chunk: int
    eos_token_ids: tuple[int, ...] = ()
    tokenizer: str | None = None  # what the model file's `tokenizer` names, for transformers' AutoTokenizer
    prefill: str = "prefill"
    decode: str = "decode"


@dataclass(frozen=True)
class FileDigest:
    """What one of the artifact's files must be: its size and sha256, checked before IREE reads it."""

    bytes: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    functions: tuple[FunctionSpec, ...]  # the first is what calling the module runs
    target: str  # kiln target name, e.g. "llvm-cpu"
    driver: str  # IREE runtime driver that runs it, e.g. "local-task"
    target_details: dict[str, str]  # what the target was built for, e.g. {"cpu": "host", "host_cpu": ...}
    iree_flags: tuple[str, ...]
    versions: dict[str, str]
    source: dict[str, str] = field(default_factory=dict)  # {"path": ..., "sha256": ...}
    precision: str | None = None  # "bf16"/"f16" when compiled from an f32 model with --dtype
    quantized: str | None = None  # --quantize: the Linear layers' weights, "int8" or "int4-g<group>"
    parameters: dict[str, int] | None = None  # external weights {"count", "bytes"}, in <stem>.irpa
    # One entry per contraction a kiln kernel could compute (llvm-cpu: bf16; cuda on Hopper: those the
    # compiler outlined): which code computes it ("kiln": kernel, tiles, layout, precision; or "iree")
    # and why. Empty where kiln has no kernels for the target or model.
    kernels: tuple[dict[str, Any], ...] = ()
    # CPU features (LLVM's names) the artifact's code needs beyond its target's baseline: kiln's CPU
    # kernels' (amx-bf16, avx512bf16). The runtime checks them, and asks Linux for AMX state, at load.
    cpu_features: tuple[str, ...] = ()
    # The saved files by kind ("vmfb", "irpa"), recorded at save; None in memory and before format 4.
    files: dict[str, FileDigest] | None = None
    generation: GenerationSpec | None = None  # --generate: how to generate with it
    format_version: int = FORMAT_VERSION

    @property
    def entry(self) -> str:
        return self.functions[0].name

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.functions[0].inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.functions[0].outputs

    def function(self, name: str) -> FunctionSpec:
        for function in self.functions:
            if function.name == name:
                return function
        known = ", ".join(f.name for f in self.functions)
        raise KeyError(f"the artifact has no function '{name}'; it has: {known}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @staticmethod
    def from_json(text: str) -> Manifest:
        """The manifest in `text`; a ManifestError (a ValueError) says what is wrong and where.

        A manifest is data from elsewhere: every field is checked for its type and range before use.
        """
        try:
            data = json.loads(text)
        except RecursionError as exc:
            raise ManifestError("nested too deeply to be a manifest") from exc
        check_manifest_json(data)
        data["functions"] = tuple(function_spec(f) for f in data["functions"])
        data["iree_flags"] = tuple(data["iree_flags"])
        data["kernels"] = tuple(data.get("kernels", ()))
        data["cpu_features"] = tuple(data.get("cpu_features", ()))
        if data.get("files") is not None:
            data["files"] = {kind: FileDigest(**digest) for kind, digest in data["files"].items()}
        if data.get("generation") is not None:
            data["generation"] = generation_spec(data["generation"])
        return Manifest(**data)


def manifest_path(vmfb_path: Path) -> Path:
    return Path(vmfb_path).with_suffix(".json")


def parameters_path(vmfb_path: Path) -> Path:
    """Where an artifact with external weights keeps them: an IREE parameter archive beside it."""
    return Path(vmfb_path).with_suffix(".irpa")


PARAMETER_SCOPE = "model"  # the scope the compiler names parameters in and the runtime serves them


def function_spec(data: dict[str, Any]) -> FunctionSpec:
    """A FunctionSpec from its JSON; the fields a format before 3 lacks take their defaults."""
    return FunctionSpec(
        name=data["name"],
        inputs=tuple(_tensor_spec(t) for t in data["inputs"]),
        outputs=tuple(_tensor_spec(t) for t in data["outputs"]),
        symbols=data.get("symbols", {}),
        arguments=data.get("arguments"),
        results=data.get("results"),
        writes_back=tuple(data.get("writes_back", ())),
        state=tuple(data.get("state", ())),
        out_variant=data.get("out_variant"),
        transients_variant=data.get("transients_variant"),
        overwritten=tuple(data.get("overwritten", ())),
    )


def generation_spec(data: dict[str, Any]) -> GenerationSpec:
    return GenerationSpec(**{**data, "eos_token_ids": tuple(data.get("eos_token_ids", ()))})


def _tensor_spec(data: dict[str, Any]) -> TensorSpec:
    return TensorSpec(name=data["name"], shape=tuple(data["shape"]), dtype=data["dtype"], carried_as=data.get("carried_as"))


class ManifestError(ValueError):
    """A manifest that is not one: the field and what is wrong with it."""


DTYPES = (
    "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool",
    "complex64", "complex128",
)  # fmt: skip
DRIVERS = ("local-task", "local-sync", "cuda", "vulkan", "hip")  # the IREE drivers kiln's targets use
FILE_KINDS = ("vmfb", "irpa")
_MAX_SIZE = 2**63 - 1
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def check_manifest_json(data: Any) -> None:
    """Check decoded manifest JSON field by field, before any of it is used; ManifestError otherwise.

    Names must be printable (function names identifiers): they reach IREE's C API and messages.
    Fields this reader does not know are an error, so a hand-edit that misspells one is caught.
    """
    _fields(data, Manifest, "the manifest")
    version = _integer(data.get("format_version", FORMAT_VERSION), "format_version", low=1)
    if version > FORMAT_VERSION:
        raise ManifestError(
            f"format_version {version} is newer than this kiln reads ({FORMAT_VERSION}); upgrade kiln.runtime"
        )
    functions = _list(data["functions"], "functions")
    if not functions:
        raise ManifestError("functions: empty; an artifact has at least one")
    seen: set[str] = set()
    for index, function in enumerate(functions):
        _check_function(function, f"functions[{index}]")
        if function["name"] in seen:
            raise ManifestError(f"functions[{index}].name: '{function['name']}' names two functions")
        seen.add(function["name"])
    _text(data["target"], "target", printable=False)
    if data["driver"] not in DRIVERS:
        raise ManifestError(f"driver: {_shown(data['driver'])} is not an IREE driver kiln knows ({', '.join(DRIVERS)})")
    for field_name in ("target_details", "versions", "source"):  # informational: any text
        for key, value in _mapping(data.get(field_name, {}), field_name).items():
            _text(value, f"{field_name}.{key}", printable=False)
    for index, flag in enumerate(_list(data["iree_flags"], "iree_flags")):
        _text(flag, f"iree_flags[{index}]", printable=False)
    if data.get("precision") is not None:
        _text(data["precision"], "precision")
    if data.get("quantized") is not None:
        _text(data["quantized"], "quantized")
    for index, feature in enumerate(_list(data.get("cpu_features", []), "cpu_features")):
        _text(feature, f"cpu_features[{index}]")
    for index, record in enumerate(_list(data.get("kernels", []), "kernels")):  # informational: any object
        _mapping(record, f"kernels[{index}]")
    if data.get("parameters") is not None:
        parameters = _mapping(data["parameters"], "parameters")
        for key in ("count", "bytes"):
            _integer(parameters.get(key), f"parameters.{key}")
    if data.get("files") is not None:
        for kind, digest in _mapping(data["files"], "files").items():
            if kind not in FILE_KINDS:
                raise ManifestError(f"files: unknown kind {_shown(kind)}; known: {', '.join(FILE_KINDS)}")
            _fields(digest, FileDigest, f"files.{kind}")
            _integer(digest["bytes"], f"files.{kind}.bytes")
            if not (isinstance(digest["sha256"], str) and _SHA256.match(digest["sha256"])):
                raise ManifestError(f"files.{kind}.sha256: {_shown(digest['sha256'])} is not a sha256 in hex")
    if data.get("generation") is not None:
        _check_generation(data["generation"], seen)


def _check_generation(data: Any, functions: set[str]) -> None:
    _fields(data, GenerationSpec, "generation")
    for key in ("max_seq_len", "batch", "vocab", "prefill_chunk"):
        _integer(data[key], f"generation.{key}", low=1)
    if data["prefill_chunk"] > data["max_seq_len"]:
        raise ManifestError(f"generation.prefill_chunk: {data['prefill_chunk']} is more than max_seq_len {data['max_seq_len']}")
    for index, token in enumerate(_list(data.get("eos_token_ids", []), "generation.eos_token_ids")):
        _integer(token, f"generation.eos_token_ids[{index}]")
    if data.get("tokenizer") is not None:
        _text(data["tokenizer"], "generation.tokenizer")
    for role in ("prefill", "decode"):
        name = data.get(role, role)
        if name not in functions:
            raise ManifestError(f"generation.{role}: {_shown(name)} is not one of the artifact's functions")


def _check_function(data: Any, where: str) -> None:
    _fields(data, FunctionSpec, where)
    name = data["name"]
    if not (isinstance(name, str) and name.isidentifier()) or name.startswith("__"):
        raise ManifestError(f"{where}.name: {_shown(name)} is not a function name (an identifier, not IREE's __...)")
    for role in ("inputs", "outputs"):
        for index, tensor in enumerate(_list(data[role], f"{where}.{role}")):
            _check_tensor(tensor, f"{where}.{role}[{index}]")
    for role, suffix in (("out_variant", "$out"), ("transients_variant", "$transients")):
        variant = data.get(role)
        if variant is not None and variant != f"{name}{suffix}":  # the name the runtime looks up in the .vmfb
            raise ManifestError(f"{where}.{role}: {_shown(variant)} is not '{name}{suffix}'")
    for role in ("writes_back", "overwritten"):
        for index, input_index in enumerate(_list(data.get(role, []), f"{where}.{role}")):
            if _integer(input_index, f"{where}.{role}[{index}]") >= len(data["inputs"]):
                raise ManifestError(f"{where}.{role}[{index}]: {input_index} is not an input's index")
    for symbol, bounds in _mapping(data.get("symbols", {}), f"{where}.symbols").items():
        bounds = _list(bounds, f"{where}.symbols.{symbol}")
        if len(bounds) != 2:
            raise ManifestError(f"{where}.symbols.{symbol}: expected [min, max or null], got {_shown(bounds)}")
        low = _integer(bounds[0] or 0, f"{where}.symbols.{symbol}[0]")
        if bounds[1] is not None and _integer(bounds[1], f"{where}.symbols.{symbol}[1]") < low:
            raise ManifestError(f"{where}.symbols.{symbol}: max {bounds[1]} is below min {low}")


def _check_tensor(data: Any, where: str) -> None:
    _fields(data, TensorSpec, where)
    _text(data["name"], f"{where}.name")
    for axis, dim in enumerate(_list(data["shape"], f"{where}.shape")):
        if not isinstance(dim, str):
            _integer(dim, f"{where}.shape[{axis}]")
        elif not dim or not dim.isprintable() or len(dim) > 256:
            raise ManifestError(f"{where}.shape[{axis}]: {_shown(dim)} is neither a size nor a size expression")
    if data["dtype"] not in DTYPES:
        raise ManifestError(f"{where}.dtype: {_shown(data['dtype'])} is not a dtype kiln knows ({', '.join(DTYPES)})")


def _fields(data: Any, kind: type, where: str) -> None:
    """`data` is an object with the fields of dataclass `kind`: every required one, and no other."""
    data = _mapping(data, where)
    known = {item.name: item for item in fields(kind)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ManifestError(f"{where}: unknown field {_shown(unknown[0])}")
    for name, item in known.items():
        if name not in data and item.default is MISSING and item.default_factory is MISSING:
            raise ManifestError(f"{where}: missing field '{name}'")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: expected an object, got {_shown(value)}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ManifestError(f"{where}: expected a list, got {_shown(value)}")
    return value


def _integer(value: Any, where: str, low: int = 0) -> int:
    if type(value) is not int or not low <= value <= _MAX_SIZE:
        raise ManifestError(f"{where}: expected a whole number from {low} to 2**63-1, got {_shown(value)}")
    return value


def _text(value: Any, where: str, printable: bool = True) -> str:
    if not isinstance(value, str) or (printable and not value.isprintable()):
        raise ManifestError(f"{where}: expected {'printable ' if printable else ''}text, got {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    """A value for a message: repr (NUL and control characters escaped), cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def package_versions(names: tuple[str, ...]) -> dict[str, str]:
    """The installed version of each distribution, "not installed" where it is missing: for manifests and reports."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
