"""Valgrind client requests from plain Python: switch callgrind's instrumentation on.

Why: a counted process spends most of its life starting up (the interpreter, pytest, the
backend's imports) and none of that is counted. Under callgrind with ``--instr-atstart=no``
that code runs 3-4x faster (a fork server's start-up: 11 s -> 3 s here), and the process
switches instrumentation on just before its first reading (``callgrind.Counter``). Counts do
not depend on when instrumentation started: every round is counted from a zeroed counter.

A client request is a no-op instruction sequence that valgrind's translator recognises
(valgrind.h's ``VALGRIND_DO_CLIENT_REQUEST_EXPR``). Python cannot emit it, so the sequence is
written as a tiny function into an executable page and called through ctypes. It exists for
x86-64 only here; elsewhere, or where the system refuses executable memory, ``available()``
is false and callgrind instruments from the start, as before.
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import sys
from collections.abc import Callable

#: ``unsigned long request(unsigned long *args, unsigned long default)``: rax = args,
#: rdx = default, the preamble (four rotations of rdi by 128 bits in all: it is left as it was),
#: ``xchg rbx, rbx`` (valgrind puts the result in rdx), return rdx. Natively: the default.
_AMD64 = bytes(
    [
        0x48,
        0x89,
        0xF8,  # mov rax, rdi
        0x48,
        0x89,
        0xF2,  # mov rdx, rsi
        0x48,
        0xC1,
        0xC7,
        0x03,  # rol rdi, 3
        0x48,
        0xC1,
        0xC7,
        0x0D,  # rol rdi, 13
        0x48,
        0xC1,
        0xC7,
        0x3D,  # rol rdi, 61
        0x48,
        0xC1,
        0xC7,
        0x33,  # rol rdi, 51
        0x48,
        0x87,
        0xDB,  # xchg rbx, rbx
        0x48,
        0x89,
        0xD0,  # mov rax, rdx
        0xC3,  # ret
    ]
)

RUNNING_ON_VALGRIND = 0x1001
_CALLGRIND_BASE = (ord("C") << 24) | (ord("T") << 16)  # valgrind.h's VG_USERREQ_TOOL_BASE('C','T')
START_INSTRUMENTATION = _CALLGRIND_BASE + 4  # callgrind.h's enum, in order from DUMP_STATS
STOP_INSTRUMENTATION = _CALLGRIND_BASE + 5

# the callable, made on first use; False: this machine cannot make it
_request: Callable[[int, int], int] | bool | None = None


def _make():
    global _request
    if _request is None:
        _request = False
        if (
            sys.platform.startswith("linux")
            and platform.machine() in ("x86_64", "amd64")
            and sys.maxsize > 2**32
        ):
            try:
                page = mmap.mmap(
                    -1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC
                )
                page.write(_AMD64)
                address = ctypes.addressof(ctypes.c_char.from_buffer(page))
                call = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong)(address)
                # the code lives as long as the function (a ctypes function takes attributes;
                # its stubs do not say so)
                call._page = page  # type: ignore[attr-defined]
                _request = call
            except (
                OSError,
                ValueError,
                AttributeError,
            ):  # no executable memory (SELinux execmem, PaX)
                pass
    return _request


def request(code: int, *args: int, default: int = 0) -> int:
    call = _make()
    if not call:
        return default
    block = (ctypes.c_ulong * 6)(code, *args, *([0] * (5 - len(args))))
    return call(ctypes.addressof(block), default)


def available() -> bool:
    """Whether requests can be made here (checked by making one)."""
    if not _make():
        return False
    request(RUNNING_ON_VALGRIND)
    return True


def start_instrumentation() -> bool:
    """Ask callgrind to instrument from here on; whether this process runs under valgrind."""
    if request(RUNNING_ON_VALGRIND) == 0:
        return False
    request(START_INSTRUMENTATION)
    return True


def stop_instrumentation() -> None:
    """Ask callgrind to stop instrumenting: what follows runs 3-4x faster than instrumented code
    would, counted as nothing (switching back on discards valgrind's translations, a fraction of
    a second)."""
    request(STOP_INSTRUMENTATION)
