"""Write a chapter's paper-profile snapshot: the numbers it glues, with their provenance.

``python3 dev.py paper-chapters`` executes a chapter at the ``paper`` profile and passes
what it glued to :func:`save_snapshot`, which writes the file that
:func:`ccmc_lite.stored.load_snapshot` reads on the chapter's Reproduction page: the values,
the SHA-256 of the chapter's code (a test fails when the code changed since), and the
provenance (versions, date, machine, wall time and the command that takes it again).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from ccmc_lite.core.validation import check_float
from ccmc_lite.stored.snapshots import SNAPSHOT_FOLDER, ChapterSnapshot

from .stored import provenance

__all__ = ["save_snapshot"]


def save_snapshot(
    chapter: str,
    values: Mapping[str, Any],
    *,
    code_sha256: str,
    wall_seconds: float,
    command: str,
    path: str | os.PathLike[str] | None = None,
) -> Path:
    """Write a snapshot of ``chapter`` run at the ``paper`` profile; return the file's path.

    ``path`` defaults to the package's ``data/paper_chapters/`` folder.
    """
    wall_seconds = check_float("wall_seconds", wall_seconds, minimum=0.0, open_lower=True)
    if not isinstance(command, str) or not command.strip():
        raise ValueError("command must say how to regenerate the snapshot (a non-empty string)")
    snapshot = ChapterSnapshot(  # checks the chapter, the values and the digest
        chapter=chapter.removesuffix(".md") if isinstance(chapter, str) else chapter,
        values=dict(values) if isinstance(values, Mapping) else values,
        code_sha256=code_sha256,
        provenance={
            "profile": "paper",
            **provenance(),
            "wall_seconds": round(wall_seconds, 1),
            "command": command,
        },
    )
    if not snapshot.values:
        raise ValueError("values must hold at least one glued value")
    if path is None:
        folder = Path(str(resources.files("ccmc_lite").joinpath(SNAPSHOT_FOLDER)))
        path = folder / snapshot.file_name
    path = Path(path)
    blob = {
        "chapter": snapshot.chapter,
        "code_sha256": snapshot.code_sha256,
        "provenance": snapshot.provenance,
        "values": snapshot.values,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(blob, indent=1) + "\n", encoding="utf-8")
    return path
