"""Chapters run at the paper profile: the snapshot files, their checks, their freshness.

``python3 dev.py paper-chapters`` (``tools/paper_chapters.py``) executes the chapters it
lists at the ``paper`` profile and stores what they glue (``tools/snapshots.py``). Here: a
snapshot round-trips and compares as documented; every listed chapter has a snapshot with full
provenance, taken from the chapter's current code, and shows it in a ``paper-snapshot`` cell.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import booktools  # noqa: E402
import chapter_code  # noqa: E402

from tools.snapshots import (  # noqa: E402
    ChapterSnapshot,
    Claims,
    load_snapshot,
    save_snapshot,
    snapshot_names,
)

PROVENANCE = {
    "profile",
    "package_version",
    "torch_version",
    "python_version",
    "created",
    "machine",
    "wall_seconds",
    "command",
}


def _script():
    from tools import paper_chapters

    return paper_chapters


# --- ChapterSnapshot -----------------------------------------------------------------------


def _snapshot(tmp_path, values=None) -> ChapterSnapshot:
    values = values or {"a": 1.0, "err": 1e-16, "label": "bigram", "n": 3, "gone": 2.0}
    path = save_snapshot(
        "part9/01_x", values, code_sha256="0" * 64, wall_seconds=12.5,
        command="python3 dev.py paper-chapters part9/01_x", path=tmp_path / "s.json",
    )  # fmt: skip
    return load_snapshot("part9/01_x", path=path)


def test_snapshot_round_trips_with_its_provenance(tmp_path):
    snap = _snapshot(tmp_path)
    assert snap.chapter == "part9/01_x"
    assert snap.values == {"a": 1.0, "err": 1e-16, "label": "bigram", "n": 3, "gone": 2.0}
    assert set(snap.provenance) == PROVENANCE and snap.provenance["profile"] == "paper"
    assert snap.provenance["wall_seconds"] == 12.5
    assert snap.provenance["command"] == "python3 dev.py paper-chapters part9/01_x"


def test_snapshot_compares_by_name_with_tolerances(tmp_path):
    snap = _snapshot(tmp_path)
    here = {"a": 1.05, "err": 3e-16, "label": "trigram", "n": 3, "new": 1.0}
    rows = snap.rows(here)
    assert [r[0] for r in rows] == ["a", "err", "label", "n", "new", "gone"]
    assert rows[-1] == ("gone", None, 2.0) and rows[-2] == ("new", 1.0, None)
    # 5 % < rtol 10 %; round-off below atol; strings compared exactly; one-sided names change
    assert snap.changed(here) == ["label", "new", "gone"]
    assert snap.changed(here, rtol=0.01) == ["a", "label", "new", "gone"]
    assert snap.changed(here, atol=0.0) == ["err", "label", "new", "gone"]
    assert snap.changed(here, ignore=("ne*", "go*")) == ["label"]
    assert [r[0] for r in snap.rows(here, ignore=("*e*",))] == ["a", "n"]
    assert snap.changed(here, ignore=("ne*", "go*", "label")) == []


def test_claims_are_checked_on_both_runs(tmp_path):
    snap = _snapshot(tmp_path)
    checks = {"a is about 1": lambda v: abs(v["a"] - 1) < 0.01, "n is 3": lambda v: v["n"] == 3}
    claims = snap.claims({"a": 1.0, "n": 3}, checks)
    assert claims.held == {"a is about 1": (True, True), "n is 3": (True, True)}
    assert claims.verdict == "all hold at both settings"
    claims = snap.claims({"a": 2.0, "n": 3}, checks)
    assert claims.held["a is about 1"] == (False, True)
    assert claims.verdict == "a is about 1: fails at the book's settings, holds at the paper's"
    with pytest.raises(KeyError, match="'a'"):
        snap.claims({"n": 3}, checks)
    with pytest.raises(TypeError, match="checks\\['x'\\] must be callable"):
        snap.claims({"a": 1.0}, {"x": 1})


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(values={}), ValueError, "at least one"),
        (dict(values={"a": float("nan")}), ValueError, "non-finite"),
        (dict(values={"a": [1, 2]}), TypeError, "values\\['a'\\]"),
        (dict(values={1: 2.0}), TypeError, "glue names"),
        (dict(code_sha256="abc"), ValueError, "code_sha256"),
        (dict(command=" "), ValueError, "command"),
        (dict(wall_seconds=-1.0), ValueError, "wall_seconds"),
        (dict(chapter=""), ValueError, "chapter"),
    ],
)
def test_save_snapshot_rejects_bad_input(tmp_path, kwargs, error, match):
    args = dict(chapter="part9/01_x", values={"a": 1.0}, code_sha256="0" * 64,
                wall_seconds=1.0, command="cmd")  # fmt: skip
    args.update(kwargs)
    chapter, values = args.pop("chapter"), args.pop("values")
    with pytest.raises(error, match=match):
        save_snapshot(chapter, values, path=tmp_path / "s.json", **args)
    assert not (tmp_path / "s.json").exists()


def test_load_snapshot_names_the_available_chapters():
    with pytest.raises(ValueError, match="part3/02_near_stationarity"):
        load_snapshot("part9/01_missing")
    with pytest.raises(ValueError, match="chapter must be"):
        load_snapshot("")


def test_chapter_code_fingerprint_ignores_snapshot_cells_and_prose(tmp_path):
    head = "---\njupytext:\n  text_representation:\n    format_name: myst\n---\n"
    a = tmp_path / "a.md"
    a.write_text(head + "# T\n\n```{code-cell} ipython3\nx = 1\n```\n")
    b = tmp_path / "b.md"
    b.write_text(
        head + "# Other prose\n\n```{code-cell} ipython3\nx = 1\n```\n\n"
        "```{code-cell} ipython3\n:tags: [paper-snapshot]\nprint(2)\n```\n"
    )
    c = tmp_path / "c.md"
    c.write_text(head + "# T\n\n```{code-cell} ipython3\nx = 2\n```\n")
    fa, fb, fc = (booktools.chapter_code_sha256(p) for p in (a, b, c))
    assert fa == fb != fc and len(fa) == 64


def test_chapter_code_fingerprint_ignores_formatting_comments_and_cell_boundaries(tmp_path):
    head = "---\njupytext:\n  text_representation:\n    format_name: myst\n---\n"

    def fingerprint(*cells: str) -> str:
        body = "".join(f"```{{code-cell}} ipython3\n{c}\n```\n\n" for c in cells)
        path = tmp_path / "x.md"
        path.write_text(head + body)
        return booktools.chapter_code_sha256(path)

    one = fingerprint("y = f(1, 'a')\nglue('k', y)")
    assert one == fingerprint('y = f(\n    1,\n    "a",  # the first argument\n)', "glue('k', y)")
    assert one != fingerprint("glue('k', y)", "y = f(1, 'a')")  # order matters
    assert one != fingerprint("y = f(1, 'b')\nglue('k', y)")  # so does a constant


# --- the stored snapshots -----------------------------------------------------------------

CHAPTERS = _script().CHAPTERS


def test_every_listed_chapter_has_a_snapshot_and_nothing_else_does():
    assert set(snapshot_names()) == set(CHAPTERS)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_snapshot_is_fresh_complete_and_shown(chapter):
    snap = load_snapshot(chapter)
    path = ROOT / "book" / f"{chapter}.md"
    assert set(snap.provenance) == PROVENANCE and snap.provenance["profile"] == "paper"
    assert snap.provenance["command"] == f"python3 dev.py paper-chapters {chapter}"
    assert snap.code_sha256 == booktools.chapter_code_sha256(path), (
        f"{chapter} changed since its paper-profile snapshot was taken; "
        f"run `python3 dev.py paper-chapters {chapter}` and commit the new snapshot"
    )
    text = path.read_text(encoding="utf-8")
    shown = [c for c in chapter_code.code_cells(text) if booktools.SNAPSHOT_TAG in c.tags]
    assert len(shown) == 1 and f'load_snapshot("{chapter}")' in shown[0].source
    part, name = chapter.split("/")
    reproduction = ROOT / "book" / "reproduction" / f"{part}.md"
    if "glue_for_reproduction(" in shown[0].source:  # the part's Reproduction page shows it
        page = reproduction.read_text(encoding="utf-8")
        assert f"../{chapter}.md::" in page and "_snap_verdict:s`" in page
    prefix = "cl" if part == "closing" else f"p{part[4:]}c{int(name[:2])}"
    assert snap.values and all(k.startswith(prefix + "_") for k in snap.values)


def test_the_instructors_table_times_each_snapshot_chapter_by_its_snapshot():
    """One record of a paper-profile run: the table reads the snapshot, not a second copy."""
    from tools.snapshots import SNAPSHOT_FOLDER

    assert ROOT / booktools.SNAPSHOT_FOLDER == SNAPSHOT_FOLDER
    rows = {r["path"]: r for r in booktools.chapter_overview(ROOT, {})}
    for chapter in CHAPTERS:
        row = rows[f"book/{chapter}.md"]
        assert row["paper_from_snapshot"]
        assert row["paper_s"] == load_snapshot(chapter).provenance["wall_seconds"]
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    stale = [k for k in results if k.removeprefix("chapter_paper_s[book/")[:-4] in CHAPTERS]
    assert not stale, f"benchmarks/results.json repeats the snapshots' times: {stale}"


def test_every_chapter_with_a_paper_profile_shows_its_paper_results():
    """A chapter whose settings depend on the profile shows a stored run or a snapshot."""
    for path in (ROOT / "book").glob("*/*.md"):
        text = path.read_text(encoding="utf-8")
        if "by_profile(" in text:
            assert "load_stored(" in text or "load_snapshot(" in text, (
                f"{path.relative_to(ROOT)} has a paper profile but shows no paper-setting result"
            )


def test_claims_say_where_each_claim_holds():
    claims = Claims(
        {"a": (True, True), "b": (True, False), "c": (False, True), "d": (False, False)}
    )
    assert [claims.says(k) for k in "abcd"] == [
        "holds at both settings",
        "holds only at the book's settings",
        "holds only at the paper's settings",
        "fails at both settings",
    ]
    with pytest.raises(ValueError, match="name must be one of the claims"):
        claims.says("e")


def test_glue_for_reproduction_glues_values_verdicts_and_provenance(tmp_path, monkeypatch):
    path = save_snapshot(
        "part9/01_x",
        {"p9c1_a": 1.0, "p9c1_b": 2.0, "p9c1_c": "x"},
        code_sha256="0" * 64,
        wall_seconds=90.0,
        command="python3 dev.py paper-chapters part9/01_x",
        path=tmp_path / "s.json",
    )
    snap = load_snapshot("part9/01_x", path=path)
    glued = {}
    monkeypatch.setattr(
        "tools.snapshots.glue",
        lambda name, value, display=True: glued.update({name: value}),
    )
    here = {"p9c1_a": 1.0, "p9c1_b": 3.0, "p9c1_c": "x"}
    checks = {"a is one": lambda v: v["p9c1_a"] == 1, "b is two": lambda v: v["p9c1_b"] == 2}
    claims = snap.glue_for_reproduction(here, checks, ["a", "c"])
    assert claims.held == {"a is one": (True, True), "b is two": (False, True)}
    assert glued["p9c1_snap_a"] == 1.0 and glued["p9c1_snap_c"] == "x"
    assert "p9c1_snap_b" not in glued  # only the quoted values
    assert glued["p9c1_snap_held_0"] == "holds at both settings"
    assert glued["p9c1_snap_held_1"] == "holds only at the paper's settings"
    assert glued["p9c1_snap_verdict"] == claims.verdict
    assert glued["p9c1_snap_values"] == 3 and glued["p9c1_snap_moved"] == 1  # b: 3 vs 2
    assert glued["p9c1_snap_minutes"] == 1.5
    assert glued["p9c1_snap_command"] == snap.provenance["command"]
    with pytest.raises(ValueError, match="quoted name 'z'"):
        snap.glue_for_reproduction(here, checks, ["z"])
