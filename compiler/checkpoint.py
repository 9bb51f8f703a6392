"""Weights from a checkpoint, for models built without them: read one tensor (or one slice) at a time.

A model file that names a checkpoint (`weights = "dir/*.safetensors"`) or a `load_weights(name)`
hook has its parameters built on the meta device (`meta_parameters`): shapes and dtypes, no memory.
`bind` checks the model against the checkpoint before anything is compiled (every tensor present,
none extra, shapes and dtypes equal) and says which stored tensor serves each of the model's names.
The weights are read only when the `.irpa` is written, tensor by tensor, converted on the way
(`--dtype bf16`).

safetensors files are read here with plain file reads, in slices of READ_CHUNK_BYTES, rather than
through the safetensors package: it maps whole files into memory, and the pages it touches count
in the process's resident memory until the file is closed (28 GB for a 7B model in f32).

Imports neither torch_mlir nor IREE: the GPU-side scripts rebuild archives with it.
"""

from __future__ import annotations

import glob
import json
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, Protocol

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from kiln.errors import KilnError

from .quantize import Derived, derived_chunks

STAGE = "load"
READ_CHUNK_BYTES = 16 << 20  # what one read holds in memory, however large the tensor

# safetensors' dtype names -> torch dtypes (the ones kiln can hold in an archive)
SAFETENSORS_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}  # fmt: skip


@contextmanager
def meta_parameters() -> Iterator[None]:
    """Modules built inside get their parameters on the meta device: shapes and dtypes, no memory,
    and initializers that do nothing. Buffers stay real: a model computes some of them when it is
    built (rotary frequencies, position ids), and checkpoints leave those out."""
    register = torch.nn.Module.register_parameter

    def register_on_meta(module: torch.nn.Module, name: str, param: torch.nn.Parameter | None) -> None:
        if param is not None and param.device.type != "meta":
            param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register(module, name, param)

    torch.nn.Module.register_parameter = register_on_meta  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register  # type: ignore[method-assign]


@contextmanager
def fake_weights(module: torch.nn.Module) -> Iterator[None]:
    """While torch.export traces `module`, its meta tensors are fake CPU tensors (still no memory).

    Traced with meta weights, the graph would compute on the meta device: a CPU buffer meeting a
    meta activation becomes a `prims.device_put`, which nothing lowers. With fake CPU weights the
    graph is the one a real CPU model gives. The meta tensors are back in place afterwards.
    """
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes: dict[int, torch.Tensor] = {}
    swapped: list[tuple[dict[str, torch.Tensor | None], str, torch.Tensor]] = []
    for owner in module.modules():
        for table in (owner._parameters, owner._buffers):
            for key, tensor in table.items():
                if tensor is None or tensor.device.type != "meta":
                    continue
                if id(tensor) not in fakes:
                    with mode:
                        fake = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device="cpu")
                    is_parameter = isinstance(tensor, torch.nn.Parameter)
                    fakes[id(tensor)] = torch.nn.Parameter(fake, requires_grad=False) if is_parameter else fake
                swapped.append((table, key, tensor))
                table[key] = fakes[id(tensor)]
    try:
        yield
    finally:
        for table, key, tensor in swapped:
            table[key] = tensor


def is_weightless(tensor: torch.Tensor) -> bool:
    """A tensor with a shape and a dtype but no data: on the meta device, or fake (fake_weights)."""
    return tensor.device.type == "meta" or isinstance(tensor, FakeTensor)


def weightless_names(module: torch.nn.Module) -> list[str]:
    """The names of `module`'s parameters and buffers that have no data."""
    return [
        name
        for name, tensor in (*module.named_parameters(), *module.named_buffers())
        if is_weightless(tensor)
    ]


@dataclass(frozen=True)
class StoredTensor:
    """Where one tensor lies in a safetensors file, read from the file's header."""

    file: Path
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int  # of the first byte, from the start of the file
    nbytes: int


class WeightSource(Protocol):
    """Somewhere weights come from, by the name the model's state_dict gives them."""

    def describe(self) -> str:
        """For messages: "the checkpoint files a.safetensors, b.safetensors", "load_weights in m.py"."""
        ...

    def stored(self) -> dict[str, StoredTensor] | None:
        """Every tensor held, when that can be known without loading them (None for a hook)."""
        ...

    def tensor(self, name: str) -> torch.Tensor:
        """Tensor `name`, whole, as stored."""
        ...


class SafetensorsCheckpoint:
    """safetensors files, indexed by their headers: nothing is read until a tensor is asked for."""

    def __init__(self, files: Sequence[Path]) -> None:
        self.files = tuple(files)
        self._stored: dict[str, StoredTensor] = {}
        for file in self.files:
            for name, tensor in _read_header(file).items():
                if name in self._stored:
                    raise KilnError(
                        f"tensor '{name}' is in two checkpoint files: {self._stored[name].file} and {file}", stage=STAGE
                    )
                self._stored[name] = tensor

    @classmethod
    def from_pattern(cls, pattern: str | Path | Sequence[str | Path], base: Path, where: Path) -> SafetensorsCheckpoint:
        """The files `pattern` (a glob or a list of paths, relative to `base`) names; `where` is for messages."""
        patterns = [pattern] if isinstance(pattern, str | Path) else list(pattern)
        files: list[Path] = []
        for item in patterns:
            full = Path(item) if Path(item).is_absolute() else base / item
            matches = sorted(Path(match) for match in glob.glob(str(full)))
            if not matches:
                raise KilnError(
                    f"{where}: `weights` names {full}, which is no file",
                    stage=STAGE,
                    hint="write the checkpoint first (safetensors files), or fix the path; relative paths are "
                    "relative to the model file",
                )
            files += matches
        return cls(files)

    def describe(self) -> str:
        return "the checkpoint " + ", ".join(str(file) for file in self.files)

    def stored(self) -> dict[str, StoredTensor]:
        return self._stored

    def write(self, name: str, dtype: torch.dtype, file: BinaryIO) -> None:
        """Write tensor `name`'s bytes, converted to `dtype`, to `file`: a slice at a time."""
        stored = self._stored[name]
        for chunk in _read_chunks(stored):
            file.write(_as_bytes(chunk if dtype == stored.dtype else chunk.to(dtype)))

    def rows(self, name: str) -> Iterator[torch.Tensor]:
        """Tensor `name` (2-D) as it is stored, a slice of whole rows at a time."""
        stored = self._stored[name]
        width = stored.shape[-1] if stored.shape else 1
        for chunk in _read_chunks(stored, multiple=width):
            yield chunk.view(-1, width)

    def tensor(self, name: str) -> torch.Tensor:
        stored = self._stored[name]
        if stored.nbytes == 0:
            return torch.empty(stored.shape, dtype=stored.dtype)
        buffer = bytearray(stored.nbytes)
        with open(stored.file, "rb", buffering=0) as handle:
            handle.seek(stored.offset)
            _read_into(handle, memoryview(buffer), stored.file)
        return torch.frombuffer(buffer, dtype=stored.dtype).reshape(stored.shape)


class WeightHook:
    """A model file's `load_weights(name) -> tensor`: called once per tensor, when the archive is written."""

    def __init__(self, load: Callable[[str], torch.Tensor], where: Path) -> None:
        self._load = load
        self._where = where

    def describe(self) -> str:
        return f"load_weights in {self._where}"

    def stored(self) -> None:
        return None

    def tensor(self, name: str) -> torch.Tensor:
        try:
            value = self._load(name)
        except Exception as exc:
            raise KilnError(
                f"{self._where}: load_weights('{name}') raised {type(exc).__name__}: {exc}", stage="weights"
            ) from exc
        if not isinstance(value, torch.Tensor):
            raise KilnError(
                f"{self._where}: load_weights('{name}') returned {type(value).__name__}, not a tensor", stage="weights"
            )
        return value.detach().to("cpu")


@dataclass(frozen=True)
class BoundWeights:
    """A weight source checked against a model: which stored tensor serves each of the model's names
    (every alias of a tied weight), and each one's shape and dtype as the model was built."""

    source: WeightSource
    stored_names: dict[str, str]  # model name -> the source's name
    expected: dict[str, tuple[tuple[int, ...], torch.dtype]]  # the source's name -> shape, dtype
    # --quantize: model name of a quantized tensor -> how it is made from a float weight (quantize.py)
    derived: dict[str, Derived] = field(default_factory=dict)

    def with_derived(self, derived: dict[str, Derived]) -> BoundWeights:
        return replace(self, derived={**self.derived, **derived})

    def write(self, name: str, dtype: torch.dtype, file: BinaryIO) -> None:
        """Write the model's tensor `name` into `file` as `dtype`: from safetensors a slice at a time
        (checked when bound), from a hook whole (checked here). A quantized tensor is made from its
        weight's rows a slice at a time too."""
        if name in self.derived:
            for chunk in self._derived_chunks(name):
                file.write(_as_bytes(chunk))
        elif isinstance(self.source, SafetensorsCheckpoint):
            self.source.write(self.stored_names[name], dtype, file)
        else:
            file.write(_as_bytes(self.tensor(name, dtype)))

    def _derived_chunks(self, name: str) -> Iterator[torch.Tensor]:
        """The quantized tensor `name`, made from its float weight's rows a slice at a time (a hook's whole)."""
        weight = self.derived[name].weight
        if isinstance(self.source, SafetensorsCheckpoint):
            rows = self.source.rows(self.stored_names[weight])
        else:
            rows = iter([self.tensor(weight, self.expected[self.stored_names[weight]][1])])
        return derived_chunks(rows, self.derived[name])

    def tensor(self, name: str, dtype: torch.dtype) -> torch.Tensor:
        if name in self.derived:
            return torch.cat(list(self._derived_chunks(name)))
        stored = self.stored_names[name]
        tensor = self.source.tensor(stored)
        self._check(stored, tensor)
        return tensor.to(dtype)

    def materialize(self, module: torch.nn.Module) -> None:
        """Give `module`'s meta tensors their weights, in their current dtype (eager runs need them)."""
        loaded: dict[int, torch.Tensor] = {}  # a tied weight is loaded once and stays tied
        for prefix, owner in module.named_modules(remove_duplicate=False):
            for table in (owner._parameters, owner._buffers):
                for key, tensor in table.items():
                    name = f"{prefix}.{key}" if prefix else key
                    if tensor is None or tensor.device.type != "meta" or name not in (*self.stored_names, *self.derived):
                        continue
                    if id(tensor) not in loaded:
                        value = self.tensor(name, tensor.dtype)
                        is_parameter = isinstance(tensor, torch.nn.Parameter)
                        loaded[id(tensor)] = torch.nn.Parameter(value, requires_grad=False) if is_parameter else value
                    table[key] = loaded[id(tensor)]

    def _check(self, stored: str, tensor: torch.Tensor) -> None:
        shape, dtype = self.expected[stored]
        if tuple(tensor.shape) != shape or not widens_exactly(tensor.dtype, dtype):
            raise KilnError(
                f"{self.source.describe()}: tensor '{stored}' is {_describe(tensor.shape, tensor.dtype)}, "
                f"the model's is {_describe(shape, dtype)}",
                stage="weights",
            )


def bind(source: WeightSource, module: torch.nn.Module, where: Path) -> BoundWeights:
    """Check `module` against `source` and move every tensor the source serves to the meta device.

    Every meta tensor of the model must be in the source, and every stored tensor must be one of the
    model's, with the same shape and dtype (or one it widens exactly); a real tensor the source does not hold (a buffer the
    model computes) stays as it is.
    """
    aliases: dict[int, list[str]] = {}
    tensors: dict[int, torch.Tensor] = {}
    for name, tensor in (*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)):
        aliases.setdefault(id(tensor), []).append(name)
        tensors[id(tensor)] = tensor
    stored = source.stored()
    if stored is not None:
        known = {name for names in aliases.values() for name in names}
        extra = sorted(set(stored) - known)
        if extra:
            raise KilnError(
                f"{stored[extra[0]].file}: tensor '{extra[0]}' is not a parameter or buffer of the model"
                + (f" (nor are {len(extra) - 1} more)" if len(extra) > 1 else ""),
                stage=STAGE,
                hint=f"the model file is {where}; the checkpoint must hold the tensors of the model it builds",
            )
    stored_names: dict[str, str] = {}
    expected: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
    for key, names in aliases.items():
        tensor = tensors[key]
        present = [name for name in names if name in stored] if stored is not None else names
        if not present or (stored is None and tensor.device.type != "meta"):
            if tensor.device.type == "meta":
                raise KilnError(
                    f"{where}: the model's tensor '{names[0]}' ({_describe(tensor.shape, tensor.dtype)}) is not in "
                    f"{source.describe()}",
                    stage=STAGE,
                    hint=None
                    if isinstance(tensor, torch.nn.Parameter)
                    else "a buffer the model computes must be built real: kiln builds only parameters on the meta "
                    "device, so leave get_model() out of `with torch.device('meta')`",
                )
            continue
        if stored is not None:
            _check_stored(stored[present[0]], present[0], tensor)
        expected[present[0]] = (tuple(tensor.shape), tensor.dtype)
        stored_names.update((name, present[0]) for name in names)
    _move_to_meta(module, stored_names)
    return BoundWeights(source, stored_names, expected)


def _check_stored(stored: StoredTensor, name: str, tensor: torch.Tensor) -> None:
    if tuple(tensor.shape) != stored.shape:
        raise KilnError(
            f"{stored.file}: tensor '{name}' has shape {list(stored.shape)}, the model's is {list(tensor.shape)}",
            stage=STAGE,
        )
    if not widens_exactly(stored.dtype, tensor.dtype):
        raise KilnError(
            f"{stored.file}: tensor '{name}' is {_describe(stored.shape, stored.dtype)}, "
            f"the model's is {_describe(tensor.shape, tensor.dtype)}",
            stage=STAGE,
            hint="build the model in the checkpoint's dtype (get_model() may call .to(dtype)); "
            "--dtype bf16 then converts the weights as they are written",
        )


def widens_exactly(stored: torch.dtype, model: torch.dtype) -> bool:
    """Whether a stored tensor may serve a model tensor of dtype `model`: the same dtype, or a float
    that `model` holds exactly (bf16 or f16 into f32, any of them into f64). Anything lossy is an
    error, unless --dtype asked for it (the model is then converted after it was checked)."""
    if stored == model:
        return True
    wider = {torch.float32: (torch.bfloat16, torch.float16), torch.float64: (torch.bfloat16, torch.float16, torch.float32)}
    return stored in wider.get(model, ())


def _move_to_meta(module: torch.nn.Module, names: dict[str, str]) -> None:
    """Replace each real tensor of `module` named in `names` by a meta tensor of its shape and dtype."""
    moved: dict[int, torch.Tensor] = {}
    for prefix, owner in module.named_modules(remove_duplicate=False):
        for table in (owner._parameters, owner._buffers):
            for key, tensor in table.items():
                name = f"{prefix}.{key}" if prefix else key
                if tensor is None or tensor.device.type == "meta" or name not in names:
                    continue
                if id(tensor) not in moved:
                    meta = tensor.detach().to("meta")
                    is_parameter = isinstance(tensor, torch.nn.Parameter)
                    moved[id(tensor)] = torch.nn.Parameter(meta, requires_grad=False) if is_parameter else meta
                table[key] = moved[id(tensor)]


def _read_header(file: Path) -> dict[str, StoredTensor]:
    """A safetensors file's index: an 8-byte little-endian length, then that much JSON."""
    try:
        with open(file, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
    except (OSError, struct.error, ValueError) as exc:
        raise KilnError(f"{file}: not a readable safetensors file ({exc})", stage=STAGE) from exc
    data_start = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in SAFETENSORS_DTYPES:
            raise KilnError(
                f"{file}: tensor '{name}' has dtype {entry['dtype']}, which kiln cannot read "
                f"(known: {', '.join(SAFETENSORS_DTYPES)})",
                stage=STAGE,
            )
        begin, end = entry["data_offsets"]
        tensors[name] = StoredTensor(file, SAFETENSORS_DTYPES[entry["dtype"]], tuple(entry["shape"]), data_start + begin, end - begin)
    return tensors


def _read_chunks(stored: StoredTensor, multiple: int = 1) -> Iterator[torch.Tensor]:
    """The tensor's elements, flat, in pieces of at most READ_CHUNK_BYTES (or of `multiple` elements,
    if more) and a multiple of `multiple` elements, all read into one buffer: each piece is valid until
    the next is asked for."""
    element = torch.empty((), dtype=stored.dtype).element_size() * multiple
    chunk_bytes = max(element, READ_CHUNK_BYTES // element * element)
    buffer = bytearray(min(chunk_bytes, stored.nbytes))
    with open(stored.file, "rb", buffering=0) as handle:
        handle.seek(stored.offset)
        remaining = stored.nbytes
        while remaining:
            view = memoryview(buffer)[: min(chunk_bytes, remaining)]
            _read_into(handle, view, stored.file)
            remaining -= len(view)
            yield torch.frombuffer(view, dtype=stored.dtype)


def _read_into(handle: BinaryIO, view: memoryview, file: Path) -> None:
    filled = 0
    while filled < len(view):
        count = handle.readinto(view[filled:])
        if not count:
            raise KilnError(f"{file}: the file ends inside a tensor (truncated?)", stage="weights")
        filled += count


def _as_bytes(tensor: torch.Tensor) -> memoryview:
    """The tensor's bytes, for file.write (no copy when it is contiguous)."""
    return memoryview(tensor.contiguous().reshape(-1).view(torch.uint8).numpy())


def _describe(shape: Sequence[int], dtype: torch.dtype) -> str:
    return f"{str(dtype).removeprefix('torch.')}{list(shape)}"
