"""Write an IREE parameter archive (`.irpa`) one entry at a time, so no weight need be in memory.

iree.runtime's `save_archive_file` takes every buffer at once; a 7B model's weights do not fit
this machine's memory. The format (IREE's `iree/schemas/parameter_archive.h`, version 0) puts every
entry's name and size before the data, so the whole layout is known from the names and sizes alone:
this module writes the header, then asks each entry to write its bytes at its offset, one after the
other. The layout is the one IREE's own builder makes (tests compare the two byte for byte).

Imports neither torch_mlir nor IREE: the GPU-side scripts rebuild archives with it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAGIC = 0x41505249  # "IRPA"
HEADER_ALIGNMENT = 16  # the entry table starts on this, and each entry in it
DATA_ALIGNMENT = 64  # the storage segment and each entry's data in it
FILE_ALIGNMENT = 4096  # the file's size: a page, so the runtime can map it
ENTRY_TYPE_DATA = 2

# The v0 header: magic, version major and minor, header size, next header offset, flags,
# entry count, then (offset, length) of the entry table, the metadata (names) and the storage segment.
_HEADER = struct.Struct("<IHHQQQQQQQQQQ")
# A data entry: entry size, type, flags, name (offset, length), metadata (offset, length),
# minimum alignment, then its data's (offset, length) in the storage segment.
_DATA_ENTRY = struct.Struct("<QIQQQQQQQQ")


@dataclass(frozen=True)
class ArchiveEntry:
    """One parameter: its name, its size in bytes, and how to write exactly those bytes to a file."""

    name: str
    nbytes: int
    write: Callable[[BinaryIO], None]


def write_parameter_archive(path: Path, entries: Sequence[ArchiveEntry]) -> None:
    """Write `entries` to `path` as an IREE parameter archive; memory use is whatever one `write` needs."""
    names = [entry.name.encode() for entry in entries]
    if len(set(names)) != len(names):
        raise ValueError("parameter names in an archive must be unique")
    table_offset = _align(_HEADER.size, HEADER_ALIGNMENT)
    entry_offsets = []
    offset = table_offset
    for _ in entries:
        offset = _align(offset, HEADER_ALIGNMENT)
        entry_offsets.append(offset)
        offset += _DATA_ENTRY.size
    table_length = offset - table_offset if entries else 0
    metadata_offset = table_offset + table_length
    metadata = b"".join(names)
    # The storage segment is aligned to its entries' alignment: not at all when there are none, as in IREE's.
    storage_offset = _align(metadata_offset + len(metadata), DATA_ALIGNMENT if entries else 1)
    data_offsets = []
    cursor = 0
    for entry in entries:
        data_offsets.append(cursor)
        cursor = _align(cursor + entry.nbytes, DATA_ALIGNMENT)
    storage_length = data_offsets[-1] + entries[-1].nbytes if entries else 0

    with open(path, "wb") as file:
        file.write(
            _HEADER.pack(
                MAGIC, 0, 0, _HEADER.size, 0, 0, len(entries),
                table_offset, table_length, metadata_offset, len(metadata), storage_offset, storage_length,
            )
        )
        name_offset = 0
        for entry, name, entry_offset, data_offset in zip(entries, names, entry_offsets, data_offsets, strict=True):
            file.seek(entry_offset)
            file.write(
                _DATA_ENTRY.pack(
                    _DATA_ENTRY.size, ENTRY_TYPE_DATA, 0, name_offset, len(name), 0, 0, DATA_ALIGNMENT,
                    data_offset, entry.nbytes,
                )
            )
            name_offset += len(name)
        file.seek(metadata_offset)
        file.write(metadata)
        for entry, data_offset in zip(entries, data_offsets, strict=True):
            start = storage_offset + data_offset
            file.seek(start)
            entry.write(file)
            written = file.tell() - start
            if written != entry.nbytes:
                raise ValueError(f"parameter '{entry.name}' wrote {written} bytes, expected {entry.nbytes}")
        file.truncate(_align(storage_offset + storage_length, FILE_ALIGNMENT))


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment
