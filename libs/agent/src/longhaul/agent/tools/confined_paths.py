"""Opening files beneath the working directory without a window for a swap.

The file tools run in the executor, outside the sandbox, while a sandboxed ``bash`` of the
same key (a parallel sub-agent, another phase) may be changing the same directory. Checking a
path and then opening it by name leaves a window in which a component becomes a symlink to
``/`` — and the open follows it. So every open here resolves the path in the kernel, in one
step, refusing to leave the root: ``openat2`` with ``RESOLVE_BENEATH`` (Linux 5.6+; symlinks
that stay inside are followed), else a walk component by component with ``O_NOFOLLOW`` from a
descriptor of the root (every symlink refused). The tools then act only on descriptors: reads
through the file's, writes by a new file made in the parent's descriptor and renamed over the
name (a rename replaces a planted link instead of following it, and leaves a hard link's other
names alone).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from longhaul.agent.errors import ToolError
from longhaul.agent.tools.jail import OUTSIDE

_SYS_OPENAT2 = 437  # one number on every architecture (the generic syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_ESCAPES = (errno.EXDEV, errno.ELOOP)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _openat2(dir_fd: int, path: str, flags: int, mode: int) -> int:
    mode = mode if flags & os.O_CREAT else 0  # the kernel refuses a mode it would not use
    how = _OpenHow(flags | os.O_CLOEXEC, mode, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    fd = _libc().syscall(
        _SYS_OPENAT2,
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return int(fd)


@functools.cache
def has_openat2() -> bool:
    root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.close(_openat2(root, ".", os.O_RDONLY | os.O_DIRECTORY, 0))
        return True
    except OSError:
        return False
    finally:
        os.close(root)


def _walk(dir_fd: int, path: str, flags: int, mode: int) -> int:
    """The fallback: each component opened with ``O_NOFOLLOW`` from its parent's fd."""
    parts = PurePosixPath(path).parts
    current = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            following = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current
            )
            os.close(current)
            current = following
        last = parts[-1] if parts else "."
        return os.open(last, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
    finally:
        os.close(current)


def _relative(path: str) -> str:
    pure = PurePosixPath(path)
    if not path.strip() or pure.is_absolute() or ".." in pure.parts:
        raise ToolError(f"path {path!r} refused: not inside the working directory", code=OUTSIDE)
    return str(pure)


def _open(root_fd: int, relative: str, flags: int, mode: int) -> int:
    if has_openat2():
        return _openat2(root_fd, relative, flags, mode)
    return _walk(root_fd, relative, flags, mode)


def open_at(root: Root, path: str, flags: int, mode: int = 0o644) -> int:
    """``path`` (relative) opened beneath ``root``; a way out is a :class:`ToolError`
    (``path_outside_workdir``), other failures ``OSError``. A link that stays inside but is
    written absolute (which ``RESOLVE_BENEATH`` refuses) is followed by resolving it in user
    space and opening the result beneath the root again: a link planted meanwhile is refused
    by that open."""
    relative = _relative(path)
    try:
        return _open(root.fd, relative, flags, mode)
    except OSError as exc:
        if exc.errno not in _ESCAPES:
            raise
    resolved = (root.path / relative).resolve()
    if resolved.is_relative_to(root.path) and resolved != root.path:
        try:
            return _open(root.fd, str(resolved.relative_to(root.path)), flags, mode)
        except OSError as exc:
            if exc.errno not in _ESCAPES:
                raise
    raise ToolError(
        f"path {path!r} refused: it leads through a link out of the working directory",
        code=OUTSIDE,
    )


class Root(NamedTuple):
    """The working directory, open for the duration of one tool call."""

    fd: int
    path: Path


@contextlib.contextmanager
def root(directory: Path) -> Iterator[Root]:
    """The working directory, open for the duration of one tool call."""
    path = directory.resolve()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield Root(fd, path)
    finally:
        os.close(fd)


@contextlib.contextmanager
def opened(root: Root, path: str, flags: int = os.O_RDONLY) -> Iterator[int]:
    """A regular file beneath the root, never a hard-linked one (its other names may be
    anywhere), judged on the descriptor itself."""
    try:
        fd = open_at(root, path, flags | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ToolError(f"{path}: no such file", code="not_found") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory", code="tool_call_invalid") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{path} is not a regular file", code="tool_call_invalid")
        if info.st_nlink > 1:
            raise ToolError(
                f"path {path!r} refused: it is a hard link (the file has other names, possibly "
                "outside the working directory); copy the content into a new file instead",
                code=OUTSIDE,
            )
        yield fd
    finally:
        os.close(fd)


def _directory(root: Root, parts: tuple[str, ...]) -> int:
    """The directory ``parts`` beneath the root, made where missing."""
    if not parts:
        return os.dup(root.fd)
    prefix = str(PurePosixPath(*parts))
    try:
        return open_at(root, prefix, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        parent = _directory(root, parts[:-1])
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(parts[-1], 0o755, dir_fd=parent)
        finally:
            os.close(parent)
        return open_at(root, prefix, os.O_RDONLY | os.O_DIRECTORY)
    except NotADirectoryError:
        raise ToolError(f"{prefix} is not a directory", code="not_a_directory") from None


def replace_file(root: Root, path: str, data: bytes) -> None:
    """Write ``data`` as the file ``path`` beneath the root: a new file in the parent's
    descriptor, renamed over the name."""
    pure = PurePosixPath(_relative(path))
    parent = _directory(root, pure.parts[:-1])
    temporary = f".{pure.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(
            temporary,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=parent,
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        try:
            os.replace(temporary, pure.name, src_dir_fd=parent, dst_dir_fd=parent)
        except IsADirectoryError:
            os.unlink(temporary, dir_fd=parent)
            raise ToolError(f"{path} is a directory", code="tool_call_invalid") from None
    finally:
        os.close(parent)
