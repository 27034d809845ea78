"""The compiled record path (``_native.c``), loaded with ctypes; None where unusable.

Built at install time as an optional extension: where no C compiler was found, or
``PACEKEEPER_NATIVE_RECORDS=0`` is set, or the record layout of the installed
cupti-python is not what the C code reads, every caller keeps to its numpy path, which
gives the same results (tests/unit/cupti_ext/test_native.py).
"""

from __future__ import annotations

import ctypes
import logging
import os
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

NATIVE_ENV = "PACEKEEPER_NATIVE_RECORDS"

_P = ctypes.c_void_p
_I64 = ctypes.c_int64

# Field name, expected dtype, per record kind: what _native.c reads, in layout order.
_KERNEL_FIELDS = (
    ("start", "u8"),
    ("end", "u8"),
    ("correlation_id", "u4"),
    ("name", "i8"),
    ("grid_x", "i4"),
    ("grid_y", "i4"),
    ("grid_z", "i4"),
    ("block_x", "i4"),
    ("block_y", "i4"),
    ("block_z", "i4"),
)
_EXTERNAL_FIELDS = (("external_kind", "i4"), ("correlation_id", "u4"), ("external_id", "u8"))
_API_FIELDS = (("correlation_id", "u4"), ("cbid", "u4"))
_MEMSET_FIELDS = (("correlation_id", "u4"), ("value", "u4"), ("bytes", "u8"), ("stream_id", "u4"))
_LAYOUT_FIELDS = 9 + sum(map(len, (_KERNEL_FIELDS, _EXTERNAL_FIELDS, _API_FIELDS, _MEMSET_FIELDS)))
OUT_FIELDS = 13
"""Output arrays of ``pk_decode`` (records._OUT_DTYPES lists them)."""
COUNT_FIELDS = 7
LIST_FIELDS = 6
"""int64 fields per interval list of ``pk_attribute_fold``: starts' address, stops'
address, length, the section's dense map's address, section id, and a search hint the
C code keeps (0 to start)."""
ATTRIBUTE_COUNTS = 7
"""Counts ``pk_attribute_fold`` returns: held, records, communication, unattributed,
refused, deferred, and the communication kernels' nanoseconds."""
MARKER_COUNTS = 10
"""Counts ``pk_markers`` returns: fences, ring values lost, pairs closed, markers left
to Python, serials for the book's ``above``, the book's known-through serial and entry
floor after the buffer, the markers read, whether the pairs' entry ids ascend, whether
the pairs all name one section."""
SNAPSHOT_FIELDS = 7
"""Doubles per row of ``pk_snapshot``'s output: count, median, mean, min, max, standard
deviation, total."""
ABI = 2
"""``pk_abi()`` of the library this code speaks to (2: ``pk_attribute_fold`` takes a
negative list count for "every kernel inside")."""
MARK_BYTES = 24
"""Bytes of one element of ``pk_markers``' sort scratch (packed id, order, id)."""


class NativeLib:
    """The loaded library with its argument types set."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        self.path = path
        lib.pk_decode.argtypes = [_P, _I64, _P, _P, _I64, _P]
        lib.pk_decode.restype = None
        lib.pk_lookup.argtypes = [_P, _P, _I64, ctypes.c_int32, _I64, _P, _P, _I64, _P, _P]
        lib.pk_lookup.restype = _I64
        lib.pk_insert.argtypes = [_P, _P, _I64, ctypes.c_uint64, _I64]
        lib.pk_insert.restype = None
        lib.pk_fold.argtypes = [_P, _P, _P, _I64, _I64, _P, _P, _P, _P, _P, _P]
        lib.pk_fold.restype = None
        lib.pk_attribute_fold.argtypes = [_P, _P, _P, _I64, _I64, _I64, _P, _P, _I64]
        lib.pk_attribute_fold.argtypes += [_P, _P, _P, _I64, _P, _P, _P]
        lib.pk_attribute_fold.restype = None
        lib.pk_markers.argtypes = [_P, _P, _P, _I64, ctypes.c_int32, _P, _P, _P, _P, _I64]
        lib.pk_markers.argtypes += [_I64, ctypes.c_uint64, _P, _P, _I64, _P, _I64, _I64, _I64]
        lib.pk_markers.argtypes += [ctypes.c_int32, _P, _P, _P, _P, _P]
        lib.pk_markers.restype = None
        lib.pk_snapshot.argtypes = [_P, _I64, _I64, _P, _P]
        lib.pk_snapshot.restype = None
        self.layout_fields = int(lib.pk_layout_fields())
        self.out_fields = int(lib.pk_out_fields())
        self.count_fields = int(lib.pk_count_fields())
        # A library left over from an older build must not be fed today's arrays.
        expected = (
            ABI,
            _LAYOUT_FIELDS,
            OUT_FIELDS,
            COUNT_FIELDS,
            LIST_FIELDS,
            ATTRIBUTE_COUNTS,
            MARKER_COUNTS,
            SNAPSHOT_FIELDS,
        )
        try:
            found = (
                int(lib.pk_abi()),
                self.layout_fields,
                self.out_fields,
                self.count_fields,
                int(lib.pk_list_fields()),
                int(lib.pk_attribute_counts()),
                int(lib.pk_marker_counts()),
                int(lib.pk_snapshot_fields()),
            )
        except AttributeError as e:
            raise AttributeError(f"{path.name} is older than this code: {e}") from e
        if found != expected:
            raise AttributeError(f"{path.name} speaks {found}, this code {expected}")
        self.lib = lib


def _library_path() -> Path | None:
    here = Path(__file__).parent
    found = sorted(here.glob("_native*.so")) + sorted(here.glob("_native*.pyd"))
    return found[0] if found else None


@cache
def library() -> NativeLib | None:
    """The native library, or None (logged once, at debug level, with the reason)."""
    if os.environ.get(NATIVE_ENV, "").strip() == "0":
        logger.debug("native record path disabled", extra={"env": NATIVE_ENV})
        return None
    path = _library_path()
    if path is None:
        logger.debug("native record path not built; using numpy")
        return None
    try:
        return NativeLib(path)
    except (OSError, AttributeError) as e:
        logger.warning("native record path unusable; using numpy", extra={"error": repr(e)})
        return None


def reset() -> None:
    """Forget the loaded library and layouts (tests switch ``NATIVE_ENV``)."""
    library.cache_clear()
    layout_array.cache_clear()


_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def ptr(a: npt.NDArray[Any]) -> int:
    """Address of a contiguous array's first element. Through the buffer protocol it
    costs a quarter of ``a.ctypes.data`` (0.2 against 0.9 us on the dev machine; a
    buffer's handling takes some twenty); read-only and empty arrays take the slow way."""
    try:
        return _addressof(_from_buffer(a))  # type: ignore[arg-type]  # numpy exports one
    except (TypeError, ValueError):
        return int(a.ctypes.data)


@lru_cache(maxsize=8)
def layout_array(layout: Any, lib: NativeLib) -> npt.NDArray[np.int32] | None:
    """The int32 layout _native.c reads, or None where a field it reads has another
    type in this cupti-python (the numpy path then decodes, from the dtypes)."""
    values = [
        layout.kernel_kind,
        layout.external_kind,
        layout.driver_kind,
        layout.runtime_kind,
        layout.memset_kind,
        layout.kernel_dtype.itemsize,
        layout.external_dtype.itemsize,
        layout.api_dtype.itemsize,
        layout.memset_dtype.itemsize,
    ]
    for dtype, fields in (
        (layout.kernel_dtype, _KERNEL_FIELDS),
        (layout.external_dtype, _EXTERNAL_FIELDS),
        (layout.api_dtype, _API_FIELDS),
        (layout.memset_dtype, _MEMSET_FIELDS),
    ):
        for name, expected in fields:
            field = (dtype.fields or {}).get(name)
            # The C code reads each field at its offset inside a record of itemsize bytes.
            if (
                field is None
                or field[0] != np.dtype(expected)
                or field[1] + field[0].itemsize > dtype.itemsize
            ):
                logger.warning(
                    "cupti-python's record layout is not the compiled path's; using numpy",
                    extra={"field": name, "dtype": str(dtype)},
                )
                return None
            values.append(int(field[1]))
    return np.array(values, dtype=np.int32)


__all__ = ["NATIVE_ENV", "NativeLib", "layout_array", "library", "ptr", "reset"]
