"""Reading a policy file from disk: the bytes of a regular file no larger than
``MAX_POLICY_BYTES``, refused with the file's name otherwise.

Separate from ``policy.py`` (which re-exports ``read_policy_bytes``) because this is the
core's one file read, and its defences (stat before open, no blocking on a FIFO, a read
that stops at the cap) are about the file system, not the document.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .policy_errors import PolicyError
from .policy_yaml import MAX_POLICY_BYTES


def read_policy_bytes(p: Path) -> bytes:
    """The bytes of the policy file ``p``: a regular file of at most
    ``MAX_POLICY_BYTES``, or ``PolicyError`` naming it.

    The core's one file read: the bytes, so that decoding is checked (and refused with
    the file's name) by the pure reader, not by Python's text layer. A FIFO or a device
    would block the controller's start forever (a FIFO's open waits for a writer, its
    read for data, /dev/zero never ends), and a huge file takes the YAML parser minutes:
    the path is stat'ed before it is opened, opened without blocking, checked again on the
    open descriptor (the path may have been swapped between the two), and read no further
    than the cap."""
    try:
        st = os.stat(p)  # follows symlinks: a mounted ConfigMap's file is one
    except OSError as e:
        raise PolicyError(f"{p}: cannot read: {e.strerror or e}") from e
    _check_policy_file(p, st)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise PolicyError(f"{p}: cannot read: {e.strerror or e}") from e
    try:
        _check_policy_file(p, os.fstat(fd))
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_POLICY_BYTES:
            chunk = os.read(fd, MAX_POLICY_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise PolicyError(f"{p}: cannot read: {e.strerror or e}") from e
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_POLICY_BYTES:  # it grew after the stat
        raise PolicyError(_too_large(p, len(data)))
    return data


def _check_policy_file(p: Path, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise PolicyError(
            f"{p}: is {_file_kind(st.st_mode)}, not a regular file; a policy file is read "
            "whole at start, so it must be a plain file (a ConfigMap's mounted key is one)"
        )
    if st.st_size > MAX_POLICY_BYTES:
        raise PolicyError(_too_large(p, st.st_size))


def _too_large(p: Path, size: int) -> str:
    return (
        f"{p}: is {size} bytes, over the {MAX_POLICY_BYTES} bytes (1 MiB) a policy file may "
        "have (a ConfigMap holds no more)"
    )


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")
