"""Damaged artifacts, generated from a good one with a seeded random source: the same seed, the same corpus.

Each generator takes the good artifact's files ({"m.vmfb": bytes, "m.json": bytes, "m.irpa": ...})
and yields Mutants of one class:
- vmfb: truncated, bit-flipped, zeroed, random, spliced, or another model's `.vmfb`;
- manifest: the JSON edited where it matters (shapes, dtypes, counts, names with `/`, `..` or NUL,
  huge and negative numbers, unknown and missing fields, versions, digests, drivers) and at random
  nodes, or the file itself broken (truncated, not UTF-8, nested deep, huge, another model's);
- irpa: truncated, bit-flipped in its header or its data, zeroed, missing, or another model's.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

from harness import Mutant

Files = dict[str, bytes | None]

VMFB, MANIFEST, IRPA = "m.vmfb", "m.json", "m.irpa"


def vmfb_mutants(rng: random.Random, files: Files, count: int, others: list[bytes]) -> Iterator[Mutant]:
    """`count` damaged copies of the .vmfb (the manifest left as it was)."""
    data = files[VMFB]
    assert data is not None
    for _ in range(count):
        name, damaged = _damaged_bytes(rng, data, others)
        yield Mutant("vmfb", name, {**files, VMFB: damaged})


def _damaged_bytes(rng: random.Random, data: bytes, others: list[bytes]) -> tuple[str, bytes]:
    """Damage that changes the bytes (zeroing zeros, say, is drawn again)."""
    while True:
        name, damaged = _damage(rng, data, others)
        if damaged != data:
            return name, damaged


def irpa_mutants(rng: random.Random, files: Files, count: int, others: list[bytes]) -> Iterator[Mutant]:
    """`count` damaged copies of the .irpa, then the archive missing altogether."""
    data = files[IRPA]
    assert data is not None
    for _ in range(count):
        if rng.random() < 0.3:  # the header and entry table: what IREE parses
            position = rng.randrange(min(len(data), 512))
            damaged = bytearray(data)
            damaged[position] ^= 1 << rng.randrange(8)
            yield Mutant("irpa", f"flip a header bit at {position}", {**files, IRPA: bytes(damaged)})
        else:
            name, damaged = _damaged_bytes(rng, data, others)
            yield Mutant("irpa", name, {**files, IRPA: damaged})
    yield Mutant("irpa", "missing", {**files, IRPA: None})


def _damage(rng: random.Random, data: bytes, others: list[bytes]) -> tuple[str, bytes]:
    choice = rng.choice(("truncate", "flip", "flip", "flip", "zero", "random", "splice", "other", "append"))
    if choice == "truncate":
        length = rng.choice((0, 1, 4, 8, 16, 64, rng.randrange(len(data)), len(data) - rng.randrange(1, 64)))
        return f"truncated to {length} bytes", data[: max(length, 0)]
    if choice == "flip":
        damaged = bytearray(data)
        positions = sorted(rng.randrange(len(data)) for _ in range(rng.choice((1, 1, 2, 8))))
        for position in positions:
            damaged[position] ^= 1 << rng.randrange(8)
        return f"bits flipped at {positions}", bytes(damaged)
    if choice == "zero":
        start, length = rng.randrange(len(data)), rng.choice((4, 64, 4096))
        return f"{length} bytes zeroed at {start}", data[:start] + bytes(length) + data[start + length :]
    if choice == "random":
        length = rng.choice((len(data), rng.randrange(1, 4096)))
        return f"{length} random bytes", rng.randbytes(length)
    if choice == "splice":
        position = rng.randrange(len(data))
        return f"16 bytes inserted at {position}", data[:position] + rng.randbytes(16) + data[position:]
    if choice == "append":
        return "4096 bytes appended", data + rng.randbytes(4096)
    return "another model's file", rng.choice(others)


# Values put where a field's value was: wrong types, huge and negative numbers, hostile names.
HOSTILE_VALUES: tuple[Any, ...] = (
    None, True, -1, 0, 2**31, 2**63, 2**64, -(2**63), 1e308, 0.5, "", "x" * 5000, "../../etc/passwd",
    "a/b", "..", "main\x00evil", "line\nbreak", "\u202emain", [], [[]], {}, {"a": 1}, [1, 2, 3],
)  # fmt: skip


def manifest_mutants(rng: random.Random, files: Files, count: int, others: list[bytes]) -> Iterator[Mutant]:
    """The targeted edits, then `count` random ones, then broken files."""
    manifest = json.loads(files[MANIFEST] or b"{}")
    for name, edited in _targeted_edits(manifest):
        yield Mutant("manifest", name, {**files, MANIFEST: json.dumps(edited).encode()})
    for _ in range(count):
        edited = copy.deepcopy(manifest)
        name = _random_edit(rng, edited)
        yield Mutant("manifest", name, {**files, MANIFEST: json.dumps(edited).encode()})
    text = files[MANIFEST] or b""
    broken = {
        "empty file": b"",
        "truncated in half": text[: len(text) // 2],
        "not UTF-8": b"\xff\xfe" + text,
        "a JSON list": b"[]",
        "JSON null": b"null",
        "nested 100000 deep": b"[" * 100000 + b"]" * 100000,
        "17 MiB of whitespace": text + b" " * (17 << 20),
        "NaN and Infinity": text.replace(b'"format_version": ', b'"x": Infinity, "format_version": NaN, "y": ', 1),
        "another model's manifest": rng.choice(others),
        "random bytes": rng.randbytes(len(text)),
    }
    for name, contents in broken.items():
        yield Mutant("manifest", name, {**files, MANIFEST: contents})


def _targeted_edits(manifest: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Edits aimed at each way a manifest can mislead the runtime."""

    def edit(name: str, change: Any) -> tuple[str, dict[str, Any]]:
        edited = copy.deepcopy(manifest)
        change(edited)
        return name, edited

    main = lambda m: m["functions"][0]  # noqa: E731
    first_input = lambda m: main(m)["inputs"][0]  # noqa: E731
    first_output = lambda m: main(m)["outputs"][0]  # noqa: E731
    for dtype in ("float16", "bfloat16", "float64", "int32", "int64", "uint8", "bool", "float8", "complex64", 7):
        yield edit(f"input dtype {dtype!r}", lambda m, d=dtype: first_input(m).__setitem__("dtype", d))
        yield edit(f"output dtype {dtype!r}", lambda m, d=dtype: first_output(m).__setitem__("dtype", d))
    for dim in (0, 1, 7, 9, 2**40, 2**62, 2**64, -1, 1.5, "s0", "", "x" * 300, None, [8]):
        yield edit(f"input size {dim!r}", lambda m, d=dim: first_input(m)["shape"].__setitem__(0, d))
        yield edit(f"output size {dim!r}", lambda m, d=dim: first_output(m)["shape"].__setitem__(0, d))
    yield edit("input rank + 1", lambda m: first_input(m)["shape"].append(1))
    yield edit("output rank - 1", lambda m: first_output(m)["shape"].pop())
    yield edit("one input more", lambda m: main(m)["inputs"].append(copy.deepcopy(first_input(m))))
    yield edit("no inputs", lambda m: main(m)["inputs"].clear())
    yield edit("one output more", lambda m: main(m)["outputs"].append(copy.deepcopy(first_output(m))))
    yield edit("no outputs", lambda m: main(m)["outputs"].clear())
    yield edit("no functions", lambda m: m["functions"].clear())
    yield edit("a second function named like the first", lambda m: m["functions"].append(copy.deepcopy(main(m))))
    for name in ("main/../x", "..", "../main", "/main", "ma\x00in", "main\x00", "", "__init", "évil", 42, None):
        yield edit(f"function name {name!r}", lambda m, n=name: main(m).__setitem__("name", n))
        yield edit(f"input name {name!r}", lambda m, n=name: first_input(m).__setitem__("name", n))
    yield edit("unknown top-level field", lambda m: m.__setitem__("entry_point", "evil"))
    yield edit("unknown function field", lambda m: main(m).__setitem__("code", "import os"))
    yield edit("unknown tensor field", lambda m: first_input(m).__setitem__("strides", [1, 1]))
    for key in list(manifest):
        yield edit(f"missing field {key}", lambda m, k=key: m.pop(k))
    for key in list(manifest["functions"][0]):
        yield edit(f"missing function field {key}", lambda m, k=key: main(m).pop(k))
    for version in (99, 0, -1, "3", 2.0, None):
        yield edit(f"format_version {version!r}", lambda m, v=version: m.__setitem__("format_version", v))
    for driver in ("cuda", "vulkan", "hip", "local-sync", "bogus", "", None):
        yield edit(f"driver {driver!r}", lambda m, d=driver: m.__setitem__("driver", d))
    yield edit("target cuda", lambda m: m.__setitem__("target", "cuda"))
    yield edit("symbols with max below min", lambda m: main(m).__setitem__("symbols", {"s0": [8, 1]}))
    yield edit("symbols of the wrong shape", lambda m: main(m).__setitem__("symbols", {"s0": 4}))
    yield edit("parameters claimed", lambda m: m.__setitem__("parameters", {"count": 3, "bytes": 1024}))
    yield edit("parameters removed", lambda m: m.__setitem__("parameters", None))
    yield edit("parameters of huge size", lambda m: m.__setitem__("parameters", {"count": 2**63, "bytes": -5}))
    if manifest.get("files"):
        yield edit("digests removed (format 2)", lambda m: (m.pop("files"), m.__setitem__("format_version", 2)))
        yield edit("vmfb sha256 changed", lambda m: m["files"]["vmfb"].__setitem__("sha256", "0" * 64))
        yield edit("vmfb size changed", lambda m: m["files"]["vmfb"].__setitem__("bytes", 12))
        yield edit("vmfb sha256 not hex", lambda m: m["files"]["vmfb"].__setitem__("sha256", "../" * 20))
        yield edit("vmfb digest missing", lambda m: m["files"].pop("vmfb"))
        yield edit("irpa digest claimed", lambda m: m["files"].__setitem__("irpa", m["files"]["vmfb"]))
        yield edit("unknown file kind", lambda m: m["files"].__setitem__("../x", m["files"]["vmfb"]))


def _random_edit(rng: random.Random, manifest: dict[str, Any]) -> str:
    """Replace, remove or duplicate one node of the JSON tree chosen at random; returns what was done."""
    parent, key, path = _random_node(rng, manifest)
    action = rng.choice(("replace", "replace", "remove", "duplicate"))
    if action == "replace":
        value = rng.choice(HOSTILE_VALUES)
        parent[key] = value
        return f"{path} = {value!r}"[:120]
    if action == "remove":
        del parent[key]
        return f"{path} removed"
    if isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))
    else:
        parent[f"{key}_copy"] = copy.deepcopy(parent[key])
    return f"{path} duplicated"


def _random_node(rng: random.Random, root: Any) -> tuple[Any, Any, str]:
    """A (container, key, path) chosen by walking down from the root, stopping at random."""
    parent: Any = None
    key: Any = None
    node, path = root, ""
    while isinstance(node, (dict, list)) and node and (parent is None or rng.random() < 0.7):
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        parent, key = node, rng.choice(keys)
        node, path = node[key], f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]"
    if parent is None:  # an empty root: edit a top-level field instead
        return root, "functions", ".functions"
    return parent, key, path
