"""Checking an artifact's files before IREE reads them: artifacts are data, and data is not trusted.

A `.vmfb` is the bytecode and machine code IREE runs. IREE verifies its flatbuffer and bytecode
when it loads a module, but not the executables inside it: one flipped byte there crashes the
process or silently changes results (tests/reliability/README.md has the figures). So the
manifest records each file's size and sha256 when the artifact is saved, and `load` checks them
before handing the files over:

- the `.vmfb`, always: its size, then its sha256 (it is small when weights are external);
- the `.irpa`, its size always, and its sha256 unless the caller opts out (`verify_weights=False`):
  hashing reads every weight (about 0.5 to 2 GB/s here), which a many-GB archive feels at each
  start. Without the hash, damaged weights give wrong numbers, not a crash: IREE reads them as data.

A file hashed once in a process is not hashed again while its stamp (device, inode, size, mtime,
ctime) is unchanged, so reloading an artifact costs a `stat`. Manifests from before format 4 have
no digests: they load as before, with a warning that nothing was checked.

`check_declarations` then compares the manifest with the module's own declaration of each
function (argument and result counts, ranks, static sizes, element types), where IREE records one
(not for the torch hand-off): a manifest edited by hand, or belonging to another `.vmfb`, is an
error at load, never a misread result.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kiln.errors import KilnError

from .manifest import FileDigest, FunctionSpec, Manifest, TensorSpec

STAGE = "runtime"


class UncheckedArtifactWarning(UserWarning):
    """An artifact whose manifest records no digests (kiln before manifest format 4) was loaded unchecked."""


def check_files(vmfb: Path, manifest: Manifest, parameters: Path | None, verify_weights: bool) -> None:
    """Each file of the artifact is the one its manifest describes; a KilnError naming the file otherwise."""
    files = manifest.files
    if files is None:
        warnings.warn(
            f"{vmfb}: its manifest records no checksums (written before kiln's manifest format 4, or not by "
            "Compiled.save), so the files were not checked; recompile to add them",
            UncheckedArtifactWarning,
            stacklevel=_outside_kiln(),
        )
        return
    if "vmfb" not in files:
        raise KilnError("corrupt manifest: files has no entry for the .vmfb", stage=STAGE)
    if (parameters is None) != ("irpa" not in files):
        raise KilnError(
            "corrupt manifest: 'parameters' and files.irpa disagree on whether there is an .irpa",
            stage=STAGE,
        )
    _check_file(vmfb, files["vmfb"], full=True)
    if parameters is not None:
        _check_file(parameters, files["irpa"], full=verify_weights)


def _outside_kiln() -> int:
    """The warnings stack level of the first caller outside kiln: the user's line, not ours."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").split(".")[0] == "kiln":
        frame, level = frame.f_back, level + 1
    return level


def _check_file(path: Path, digest: FileDigest, full: bool) -> None:
    size = path.stat().st_size
    if size != digest.bytes:
        raise KilnError(
            f"{path.name} is {size} bytes; its manifest says {digest.bytes}: the file is truncated, damaged or "
            "from another artifact",
            stage=STAGE,
            hint=_RECOPY,
        )
    if full and sha256_of(path) != digest.sha256:
        replaced = "; if you replaced the weights on purpose, load with verify_weights=False" if path.suffix == ".irpa" else ""
        raise KilnError(
            f"{path.name} does not match its manifest (sha256 differs): the file is damaged or from another artifact",
            stage=STAGE,
            hint=_RECOPY + replaced,
        )


_RECOPY = "copy the .vmfb, .json and .irpa together, or compile again"

_hashed: dict[tuple[int, ...], str] = {}  # file stamp -> sha256, for files hashed in this process
_hashed_lock = threading.Lock()


def sha256_of(path: Path) -> str:
    """The file's sha256, from memory when this process hashed the same unchanged file before."""
    with open(path, "rb") as file:
        info = os.fstat(file.fileno())
        stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        with _hashed_lock:
            known = _hashed.get(stamp)
        if known is not None:
            return known
        digest = hashlib.sha256()
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    with _hashed_lock:
        _hashed[stamp] = digest.hexdigest()
    return digest.hexdigest()


@contextmanager
def artifact_lock(directory: Path, exclusive: bool) -> Iterator[None]:
    """Hold the artifact folder's lock: exclusive while a save renames its files into place, shared
    while a load reads them, so a load never sees half of one save and half of another.

    An advisory `flock` on the folder itself: nothing is created, and other programs are not held
    up. Where the filesystem has no flock, loads and saves go on unlocked.
    """
    try:
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError:
            pass
        yield
    finally:
        os.close(descriptor)  # releases the lock


def check_declarations(vm_module: Any, manifest: Manifest) -> None:
    """Each manifest function is in the module, declared with the same inputs and outputs."""
    for spec in manifest.functions:
        function = vm_module.lookup_function(spec.name)
        if function is None:
            raise KilnError(f"the manifest names function '{spec.name}', which the module does not have", stage=STAGE)
        # Artifacts handed off at the torch level (--handoff torch) carry no declaration to compare with.
        declaration = _declared(function.reflection.get("iree.abi.declaration", ""))
        if declaration is not None:
            _compare(spec, *declaration)


# "sync func @main(%input0: tensor<?x64xf32>, ...) -> (%output0: tensor<8x10xf32>)": what iree-compile
# records for each exported function. Any other form, or an argument that is not a tensor, is not checked.
_DECLARATION = re.compile(r"^(?:sync )?func @[^(]+\((.*?)\)(?: -> \((.*)\))?$")
_ENTRY = re.compile(r"^%[\w.$-]+: tensor<((?:[^<>]|<[^<>]*>)*)>$")  # tensor<3x4xcomplex<f32>> too
_ELEMENT_TYPES = {
    "float32": ("f32",), "float16": ("f16",), "bfloat16": ("bf16",), "float64": ("f64",),
    "int8": ("i8", "si8"), "uint8": ("i8", "ui8"), "int16": ("i16", "si16"), "int32": ("i32", "si32"),
    "int64": ("i64", "si64"), "bool": ("i1", "i8"),
    "complex64": ("complex<f32>",), "complex128": ("complex<f64>",),
}  # fmt: skip  (IREE's integers are signless at the boundary: i8 for int8 and uint8 alike)


def _declared(text: str) -> tuple[list[list[str]], list[list[str]]] | None:
    """The declared arguments and results, each as its type's parts ("?", "64", "f32"); None if unreadable."""
    match = _DECLARATION.match(text)
    if match is None:
        return None
    parts: list[list[list[str]]] = []
    for group in (match[1], match[2] or ""):
        entries = [entry.strip() for entry in re.split(r",\s*(?=%)", group)] if group.strip() else []
        tensors = [_ENTRY.match(entry) for entry in entries]
        if not all(tensors):
            return None
        parts.append([_type_parts(tensor[1]) for tensor in tensors if tensor])
    return parts[0], parts[1]


def _type_parts(text: str) -> list[str]:
    """"?x64xf32" -> ["?", "64", "f32"]; the element type whole ("3xcomplex<f32>" -> ["3", "complex<f32>"])."""
    dims = re.match(r"(?:(?:\d+|\?)x)*", text)[0]  # type: ignore[index]
    return [*dims.split("x")[:-1], text[len(dims) :]]


def _compare(spec: FunctionSpec, arguments: list[list[str]], results: list[list[str]]) -> None:
    # The function returns its outputs, then the new values of the inputs it writes back.
    for role, tensors, declared in (("inputs", spec.inputs, arguments), ("outputs", spec.returns, results)):
        if len(tensors) != len(declared):
            raise KilnError(
                f"the manifest gives function '{spec.name}' {len(tensors)} {role}; the module declares {len(declared)}",
                stage=STAGE,
                hint=_RECOPY,
            )
        for tensor, parts in zip(tensors, declared, strict=True):
            problem = _mismatch(tensor, parts[:-1], parts[-1])
            if problem:
                raise KilnError(
                    f"the manifest's {role[:-1]} '{tensor.name}' of function '{spec.name}' is {tensor.dtype}"
                    f"{list(tensor.shape)}; the module declares tensor<{'x'.join(parts)}> ({problem})",
                    stage=STAGE,
                    hint=_RECOPY,
                )


def _mismatch(tensor: TensorSpec, dims: list[str], element: str) -> str | None:
    if element not in _ELEMENT_TYPES.get(tensor.carried_as or tensor.dtype, ()):
        return "element type"
    if len(dims) != len(tensor.shape):
        return "rank"
    for axis, (dim, declared) in enumerate(zip(tensor.shape, dims, strict=True)):
        if isinstance(dim, int) and declared.isdigit() and int(declared) != dim:
            return f"size of dimension {axis}"
    return None
