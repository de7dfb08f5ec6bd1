"""``booktools.patch_kernel_polling``: nbclient polls kernel sockets in short slices.

A single long ``socket.poll`` could miss the kernel's reply and wait out the whole cell
timeout (seen in the build, and in a cold test run whose floor chapter run lacked the patch:
760 s idle). The patch must be applied by every program here that executes notebooks.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from queue import Empty

import booktools
import pytest
from jupyter_client.channels import AsyncZMQSocketChannel

from book_tools import ROOT


class FakeSocket:
    """Answers ``poll`` with "nothing yet" ``silent`` times, then "ready"; records each wait."""

    def __init__(self, silent: int) -> None:
        self.silent = silent
        self.waits_ms: list[int] = []

    async def poll(self, timeout_ms: int) -> int:
        self.waits_ms.append(timeout_ms)
        return int(len(self.waits_ms) > self.silent)


def _channel(socket: FakeSocket) -> AsyncZMQSocketChannel:
    channel = object.__new__(AsyncZMQSocketChannel)  # no ZMQ context: only get_msg is used
    channel.socket = socket  # type: ignore[assignment]

    async def recv() -> dict:
        return {"msg_type": "execute_reply"}

    channel._recv = recv  # type: ignore[method-assign]
    return channel


def test_get_msg_waits_in_short_slices_and_returns_the_message():
    booktools.patch_kernel_polling()
    booktools.patch_kernel_polling()  # idempotent
    socket = FakeSocket(silent=3)
    msg = asyncio.run(_channel(socket).get_msg(timeout=30.0))
    assert msg == {"msg_type": "execute_reply"}
    slice_ms = int(1000 * booktools.POLL_SLICE_S)
    assert socket.waits_ms == [slice_ms] * 4  # never one 30 s wait


def test_get_msg_without_a_timeout_keeps_polling():
    booktools.patch_kernel_polling()
    socket = FakeSocket(silent=10)
    asyncio.run(_channel(socket).get_msg(timeout=None))
    assert len(socket.waits_ms) == 11
    assert max(socket.waits_ms) == int(1000 * booktools.POLL_SLICE_S)


def test_get_msg_still_times_out():
    booktools.patch_kernel_polling()
    socket = FakeSocket(silent=10**9)
    with pytest.raises(Empty):
        asyncio.run(_channel(socket).get_msg(timeout=0.05))
    assert max(socket.waits_ms) <= 50


def _python_sources() -> list[Path]:
    """The project's own Python files (not the environments or the build under ``_build``)."""
    files = [ROOT / "dev.py"]
    for folder in ("ccmc_lite", "tools", "tests", "benchmarks", "book"):
        files += (ROOT / folder).rglob("*.py")
    return [p for p in files if p.name != Path(__file__).name]


def test_every_notebook_client_here_applies_the_patch():
    """A file that constructs ``NotebookClient(`` also calls ``patch_kernel_polling()``."""
    clients = [p for p in _python_sources() if re.search(r"\bNotebookClient\(", p.read_text())]
    assert len(clients) >= 4  # tests/book_tools.py, test_floor.py, tools/paper_chapters.py, ...
    unpatched = [
        p.relative_to(ROOT).as_posix()
        for p in clients
        if not re.search(r"\bpatch_kernel_polling\(\)", p.read_text())
    ]
    assert not unpatched, f"notebook clients without booktools.patch_kernel_polling(): {unpatched}"
