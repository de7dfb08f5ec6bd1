"""The page "Where the papers are wrong or incomplete" (book/findings.md).

It collects each part's paper-level findings from ``book/_findings/part<N>.md``. Every finding
points at the chapter section whose executed cells show it, and states no measured number of
its own (numbers live, glued, in the chapters).
"""

from __future__ import annotations

import re

import pytest
import yaml

from book_tools import ROOT

FINDINGS = ROOT / "book" / "findings.md"
PART_FILES = sorted((ROOT / "book" / "_findings").glob("part*.md"))
# A decimal number right after one of these words is a section/equation number, not a result.
REFERENCE_WORDS = r"(Sec|Lemma|Thm|Theorem|Cor|eqs?|Fig|Figure|Remark|App|Prop|Table|Lemmas)\.?"


def _findings(path):
    return re.split(r"^### ", path.read_text(encoding="utf-8"), flags=re.M)[1:]


def test_findings_page_is_in_the_toc_and_includes_every_part():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert "book/findings" in files
    text = FINDINGS.read_text(encoding="utf-8")
    parts = [p.name for p in PART_FILES]
    assert parts == ["part1.md", "part2.md", "part3.md"]
    included = re.findall(r"```\{include\}\s+_findings/(part\d\.md)", text)
    assert included == parts


@pytest.mark.parametrize("path", PART_FILES, ids=lambda p: p.stem)
def test_every_finding_links_to_its_computation(path):
    text = path.read_text(encoding="utf-8")
    assert text.startswith("## Part "), "each file opens with its part heading"
    findings = _findings(path)
    assert findings, f"{path.name} has no ### finding"
    for block in findings:
        title = block.splitlines()[0]
        assert "{ref}`" in block, f"finding {title!r} does not link to a chapter section"


@pytest.mark.parametrize("path", PART_FILES, ids=lambda p: p.stem)
def test_findings_state_no_measured_numbers(path):
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"\$[^$]*\$", "", text)  # formulas may hold exponents and constants
    text = re.sub(r"\{ref\}`[^`]*`", "", text)
    for match in re.finditer(r"\d+\.\d+", text):
        before = text[max(0, match.start() - 12) : match.start()]
        assert re.search(REFERENCE_WORDS + r"\s*\(?$", before), (
            f"{path.name}: {match.group()!r} after {before!r} looks like a measured number; "
            "glue it in the chapter and link there instead"
        )
