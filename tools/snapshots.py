"""Chapter snapshots: a chapter run at the ``paper`` profile, kept as the numbers it quotes.

Chapters whose ``paper`` profile is a longer or larger version of the book-profile
computation (more samples, longer trajectories, more sizes), rather than one big training
sweep, are executed once at the ``paper`` profile with ``python3 dev.py paper-chapters``,
which passes what the chapter glued to :func:`save_snapshot`. A snapshot keeps every number
and string the chapter glues into its prose (:func:`tools.gluing.glued_values`), the
provenance of the run (versions, date, machine, wall time and the command that takes it
again) and the SHA-256 of the chapter's code, in :data:`SNAPSHOT_FOLDER`.

A hidden cell at the chapter's end (a build-only cell: readers' notebooks leave it out)
loads the snapshot (:func:`load_snapshot`) and glues, for its part's Reproduction page, the
snapshot's values beside the book profile's, the chapter's conclusions checked on both
(:class:`Claims`) and the quantities that moved (:meth:`ChapterSnapshot.changed`). The
tests check that each snapshot was taken from the chapter's current code.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ccmc_lite.core.validation import check_choice, check_float, check_instance

from .gluing import glue
from .stored import provenance

__all__ = [
    "SNAPSHOT_FOLDER",
    "ChapterSnapshot",
    "Claims",
    "load_snapshot",
    "save_snapshot",
    "snapshot_names",
]

#: The folder of the snapshots, one JSON file per chapter (``part1__02_x.json``).
SNAPSHOT_FOLDER = Path(__file__).resolve().parent / "data" / "paper_chapters"
Scalar = bool | int | float | str


def _slug(chapter: str) -> str:
    """``"part1/02_learning_by_prompting"`` -> the file stem ``part1__02_learning_by_prompting``."""
    if not isinstance(chapter, str) or not chapter.strip():
        raise ValueError(f"chapter must be a path such as 'part1/02_x'; got {chapter!r}")
    return chapter.removesuffix(".md").replace("/", "__")


def _prefix(chapter: str) -> str:
    """The glue-name prefix of a chapter: ``"part1/02_x"`` -> ``"p1c2"``, closing -> ``"cl"``."""
    part, _, name = chapter.partition("/")
    if part == "closing":
        return "cl"
    if not (part.startswith("part") and part[4:].isdigit() and name[:2].isdigit()):
        raise ValueError(f"chapter must be a path such as 'part1/02_x'; got {chapter!r}")
    return f"p{int(part[4:])}c{int(name[:2])}"


def _check_values(values: Any) -> dict[str, Scalar]:
    check_instance("values", values, Mapping)
    out: dict[str, Scalar] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise TypeError(f"values keys must be glue names (str); got {key!r}")
        if not isinstance(value, (bool, int, float, str)):
            raise TypeError(
                f"values[{key!r}] must be a bool, int, float or str; got {type(value).__name__}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"values[{key!r}] is {value}; refusing to store a non-finite value")
        out[key] = value
    return out


@dataclass(frozen=True)
class Claims:
    """A page's conclusions evaluated on this run and on the paper-profile snapshot.

    Attributes
    ----------
    held : dict
        ``claim -> (holds in this run, holds at the paper profile)``.
    """

    held: dict[str, tuple[bool, bool]]

    def __post_init__(self) -> None:
        check_instance("held", self.held, Mapping)
        for name, pair in self.held.items():
            if (
                not isinstance(pair, tuple)
                or len(pair) != 2
                or not all(isinstance(b, bool) for b in pair)
            ):
                raise TypeError(f"held[{name!r}] must be a pair of bools; got {pair!r}")

    @property
    def verdict(self) -> str:
        """``"all hold at both settings"``, or each claim that fails somewhere and where."""
        failing = {k: v for k, v in self.held.items() if not all(v)}
        if not failing:
            return "all hold at both settings"

        def word(ok: bool) -> str:
            return "holds" if ok else "fails"

        return "; ".join(
            f"{name}: {word(a)} at the book's settings, {word(b)} at the paper's"
            for name, (a, b) in failing.items()
        )

    def says(self, name: str) -> str:
        """One claim's verdict in words: ``"holds at both settings"``, ``"fails at both"``, or
        where it holds and where it fails."""
        if name not in self.held:
            raise ValueError(f"name must be one of the claims {list(self.held)}; got {name!r}")
        here, paper = self.held[name]
        if here and paper:
            return "holds at both settings"
        if not (here or paper):
            return "fails at both settings"
        where = "the paper's settings" if paper else "the book's settings"
        return f"holds only at {where}"


@dataclass(frozen=True)
class ChapterSnapshot:
    """The glued values of one chapter executed at the ``paper`` profile.

    Attributes
    ----------
    chapter : str
        The chapter's path under ``book/`` without ``.md``, e.g. ``"part3/02_near_stationarity"``.
    values : dict
        ``glue name -> value`` (numbers and strings) as that run glued them.
    code_sha256 : str
        SHA-256 of the chapter's code cells when the snapshot was taken.
    provenance : dict
        ``profile``, ``package_version``, ``torch_version``, ``python_version``, ``created``,
        ``machine``, ``wall_seconds`` and ``command``.
    """

    chapter: str
    values: dict[str, Scalar]
    code_sha256: str
    provenance: dict[str, Any]

    def __post_init__(self) -> None:
        _slug(self.chapter)
        object.__setattr__(self, "values", _check_values(self.values))
        if not isinstance(self.code_sha256, str) or len(self.code_sha256) != 64:
            raise ValueError(
                f"code_sha256 must be a 64-character hex digest; got {self.code_sha256!r}"
            )
        check_instance("provenance", self.provenance, Mapping)

    @property
    def file_name(self) -> str:
        """The snapshot's file name in :data:`SNAPSHOT_FOLDER`, e.g. ``part1__02_x.json``."""
        return f"{_slug(self.chapter)}.json"

    def rows(
        self, values: Mapping[str, Any], *, ignore: Sequence[str] = ()
    ) -> list[tuple[str, Scalar | None, Scalar | None]]:
        """``(name, this run's value, the snapshot's value)`` for every name in either.

        ``values`` are this run's glued values (:func:`tools.gluing.glued_values`);
        names matching any of the ``ignore`` patterns (shell-style, e.g. ``"*_seconds"``:
        wall times differ between profiles by design) are left out; a name glued by only
        one of the two runs has ``None`` on the other side.
        """
        here = _check_values(values)
        if isinstance(ignore, str) or not all(isinstance(s, str) for s in ignore):
            raise TypeError(f"ignore must be a sequence of strings; got {ignore!r}")
        names = list(here) + [k for k in self.values if k not in here]
        return [
            (k, here.get(k), self.values.get(k))
            for k in names
            if not any(fnmatchcase(k, pattern) for pattern in ignore)
        ]

    def changed(
        self,
        values: Mapping[str, Any],
        *,
        rtol: float = 0.1,
        atol: float = 1e-9,
        ignore: Sequence[str] = (),
    ) -> list[str]:
        """Names whose value differs between the two runs.

        Numbers differ when ``|a - b| > max(atol, rtol * max(|a|, |b|))`` (``atol`` keeps
        round-off errors such as ``1e-16`` against ``3e-16`` from counting); booleans and
        strings when they are not equal; a name glued by only one run counts as changed.
        """
        return _moved(self.rows(values, ignore=ignore), rtol, atol)

    def claims(
        self, values: Mapping[str, Any], checks: Mapping[str, Callable[[Mapping], bool]]
    ) -> Claims:
        """Evaluate each check (``claim -> test(values) -> bool``) on this run and the snapshot.

        A check reads the glued values by name, e.g.
        ``{"the 1/n rate": lambda v: abs(v["slope"] + 1) < 0.1}``; a name missing from
        either run raises ``KeyError`` naming it.
        """
        here = _check_values(values)
        check_instance("checks", checks, Mapping)
        held = {}
        for name, test in checks.items():
            if not callable(test):
                raise TypeError(f"checks[{name!r}] must be callable; got {type(test).__name__}")
            held[str(name)] = (bool(test(here)), bool(test(self.values)))
        return Claims(held)

    def glue_for_reproduction(
        self,
        values: Mapping[str, Any],
        checks: Mapping[str, Callable[[Mapping], bool]],
        quoted: Sequence[str],
        *,
        ignore: Sequence[str] = (),
        rtol: float = 0.1,
    ) -> Claims:
        """Glue what the part's Reproduction page shows of this snapshot; return the claims.

        The chapter calls this in a hidden cell at its end, where ``values`` are its own
        glued values (:func:`tools.gluing.glued_values`); the Reproduction page pastes
        the results by name from the chapter. With ``prefix`` the chapter's glue prefix
        (``"p1c2"`` for ``part1/02_...``) it glues:

        * ``{prefix}_snap_{name}`` — the snapshot's value of each ``{prefix}_{name}`` in
          ``quoted``, to stand beside this run's;
        * ``{prefix}_snap_verdict`` — :attr:`Claims.verdict` of ``checks`` on both runs,
          and ``{prefix}_snap_held_{i}`` — the verdict of the ``i``-th check alone
          (:meth:`Claims.says`);
        * ``{prefix}_snap_values`` and ``{prefix}_snap_moved`` — how many values the
          snapshot holds and how many of them moved by more than ``rtol``
          (:meth:`changed`, leaving out ``ignore``);
        * ``{prefix}_snap_created``, ``_machine``, ``_minutes``, ``_versions`` and
          ``_command`` — the provenance.
        """
        prefix = _prefix(self.chapter)
        if (
            isinstance(quoted, str)
            or not hasattr(quoted, "__iter__")
            or not all(isinstance(q, str) for q in quoted)
        ):
            raise TypeError(f"quoted must be a sequence of names (str); got {quoted!r}")
        for name in quoted:
            key = f"{prefix}_{name}"
            if key not in self.values:
                raise ValueError(f"quoted name {name!r}: the snapshot has no value {key!r}")
            glue(f"{prefix}_snap_{name}", self.values[key], display=False)
        claims = self.claims(values, checks)
        p = self.provenance
        shown = {
            "verdict": claims.verdict,
            "values": len(self.values),
            "moved": len(self.changed(values, rtol=rtol, ignore=ignore)),
            "created": p["created"],
            "machine": p["machine"],
            "minutes": p["wall_seconds"] / 60,
            "versions": f"ccmc_lite {p['package_version']}, torch {p['torch_version']}",
            "command": p["command"],
        }
        for name, value in shown.items():
            glue(f"{prefix}_snap_{name}", value, display=False)
        for i, name in enumerate(claims.held):
            glue(f"{prefix}_snap_held_{i}", claims.says(name), display=False)
        return claims


def _moved(rows: list[tuple[str, Any, Any]], rtol: float, atol: float) -> list[str]:
    """The names of ``rows`` whose two values differ (see :meth:`ChapterSnapshot.changed`)."""
    rtol = check_float("rtol", rtol, minimum=0.0)
    atol = check_float("atol", atol, minimum=0.0)
    out = []
    for name, a, b in rows:
        if a is None or b is None:
            out.append(name)
        elif isinstance(a, (bool, str)) or isinstance(b, (bool, str)):
            if a != b:
                out.append(name)
        elif abs(a - b) > max(atol, rtol * max(abs(a), abs(b))):
            out.append(name)
    return out


def snapshot_names() -> list[str]:
    """The chapters (``"part1/02_..."``) that have a snapshot in :data:`SNAPSHOT_FOLDER`."""
    return sorted(p.stem.replace("__", "/") for p in SNAPSHOT_FOLDER.glob("*.json"))


def load_snapshot(chapter: str, *, path: str | os.PathLike[str] | None = None) -> ChapterSnapshot:
    """Load the snapshot of ``chapter`` from :data:`SNAPSHOT_FOLDER` (or from ``path``).

    Raises ``ValueError`` naming the available snapshots when there is none for ``chapter``.
    """
    stem = _slug(chapter)
    if path is None:
        names = snapshot_names()
        if not names:
            raise ValueError(f"chapter must have a snapshot; there is none in {SNAPSHOT_FOLDER}")
        check_choice("chapter", chapter.removesuffix(".md"), names)
        path = SNAPSHOT_FOLDER / f"{stem}.json"
    blob = json.loads(Path(path).read_text(encoding="utf-8"))
    return ChapterSnapshot(
        chapter=blob["chapter"],
        values=_check_values(blob["values"]),
        code_sha256=blob["code_sha256"],
        provenance=blob["provenance"],
    )


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

    ``path`` defaults to :data:`SNAPSHOT_FOLDER`.
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
    path = SNAPSHOT_FOLDER / snapshot.file_name if path is None else Path(path)
    blob = {
        "chapter": snapshot.chapter,
        "code_sha256": snapshot.code_sha256,
        "provenance": snapshot.provenance,
        "values": snapshot.values,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(blob, indent=1) + "\n", encoding="utf-8")
    return path
