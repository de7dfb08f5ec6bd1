"""The whole book: a ``-W -n`` build, then every page checked in headless Chromium.

These tests run last (see ``conftest.py``): the chapter tests have filled the execution
cache, so the build renders instead of executing everything again. In the browser **no
host but this machine resolves**, and every request a page makes for another host is
recorded: a page that needs a CDN for math, widgets or figures fails here.
"""

from __future__ import annotations

import dataclasses
import functools
import http.server
import json
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from book_tools import (
    BUILD_DIR,
    ROOT,
    chapter_notebooks,
    taught_chapters,
)

pytestmark = pytest.mark.book

SCREENSHOT_DIR = BUILD_DIR / "screenshots"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def test_build_is_clean_and_complete(built_book):
    for chapter in chapter_notebooks():
        page = built_book / chapter.relative_to(ROOT).with_suffix(".html")
        assert page.exists(), f"missing page {page}"
        ipynb = built_book / "_sources" / chapter.relative_to(ROOT).with_suffix(".ipynb")
        assert ipynb.exists(), f"missing downloadable notebook {ipynb}"
        assert "ccmc-setup" in ipynb.read_text(), f"{ipynb.name} lacks the Colab set-up cell"
    assert (built_book / "_static" / "vendor" / "mathjax" / "tex-svg-full.js").exists()


# A display equation ($$ ... $$) written straight after a line of text is parsed as inline
# math between two literal dollar signs: "$<span class="math">...</span>$" in the page.
_DOLLAR_WRAPPED_MATH = re.compile(
    r'\$\s*<span class="math[^"]*">|<span class="math[^"]*">[^<]*</span>\s*\$'
)


def test_no_equation_is_wrapped_in_literal_dollar_signs(built_book):
    broken = {
        page.relative_to(built_book).as_posix(): len(_DOLLAR_WRAPPED_MATH.findall(text))
        for page in sorted(built_book.rglob("*.html"))
        if _DOLLAR_WRAPPED_MATH.search(text := page.read_text(encoding="utf-8"))
    }
    assert not broken, f"math rendered between literal dollar signs (blank line missing?): {broken}"


def _chromium() -> str:
    path = os.environ.get("CCMC_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail(
            "Debian's chromium is required for the browser test; `python3 dev.py test` "
            "installs it (apt-get install chromium)"
        )
    return path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture(scope="session")
def server(built_book):
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for this module's tests; closed when the module ends, because the
    Binder test (tests/book/test_binder.py) starts its own Playwright, and two sync Playwright
    instances cannot run at once in one process."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=_chromium(), args=[*CHROMIUM_FLAGS, NO_NETWORK])
        yield b
        b.close()


def _pages(html_dir: Path) -> list[str]:
    skip = {"genindex.html", "search.html", "py-modindex.html", "index.html"}
    pages = []
    for path in sorted(html_dir.rglob("*.html")):
        rel = path.relative_to(html_dir).as_posix()
        if rel in skip or rel.startswith(("_static/", "_modules/", "_sources/")):
            continue
        pages.append(rel)
    return pages


WAIT_FOR_RENDER = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await new Promise(r => setTimeout(r, 300));
  return true;
}
"""

INSPECT = """
() => {
  const q = s => Array.from(document.querySelectorAll(s));
  const mathNodes = q('span.math, div.math');
  return {
    tracebacks: q('.output.traceback, .output.error, .cell_output .traceback').length,
    text_has_traceback: document.body.innerText.includes('Traceback (most recent call last)'),
    math_nodes: mathNodes.length,
    math_typeset: mathNodes.filter(n => n.querySelector('mjx-container')).length,
    math_errors: q('mjx-merror, [data-mjx-error]').length,
    images: q('img').map(i => ({src: i.currentSrc || i.src, ok: i.complete && i.naturalWidth > 0,
                                alt: i.alt, content: !!i.closest('.bd-article')})),
    widget_views: q('script[type="application/vnd.jupyter.widget-view+json"]').length,
    widgets_rendered: q('.jupyter-widgets, .widget-container, .jp-OutputArea').length,
    chapter: !!document.querySelector('meta[name="ccmc-chapter"]'),
    launch: q('.dropdown-launch-buttons a').map(a => a.href),
    download: q('.dropdown-download-buttons a').map(a => a.href),
    exercises: q('.exercise').length,
    exercises_shown: q('.exercise').filter(e => e.checkVisibility()).length,
    solutions: q('.solution').length,
    solutions_open: q('.solution').filter(s => Array.from(s.children).some(c =>
      !c.classList.contains('admonition-title') && c.getBoundingClientRect().height > 0
      && getComputedStyle(c).visibility !== 'hidden')).length,
  };
}
"""

DESKTOP = {"width": 1280, "height": 1000}
#: The narrowest phone screen in use, in CSS pixels (an iPhone SE of 2016; Android phones
#: are 360 wide, newer iPhones 375 to 430).
PHONE = {"width": 320, "height": 640}
#: How far the page scrolls sideways, and the outermost elements that stick out of the
#: screen (code blocks, tables and display math scroll inside their own boxes: not counted).
SIDEWAYS = """
() => {
  const width = document.documentElement.clientWidth;
  const clipped = e => {
    for (let p = e.parentElement; p; p = p.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return true;
    }
    return false;
  };
  const wide = Array.from(document.querySelectorAll('.bd-article *')).filter(e =>
    e.getBoundingClientRect().right > width + 1 && !clipped(e)
    && !(e.parentElement && e.parentElement.getBoundingClientRect().right > width + 1));
  return {
    overflow: document.documentElement.scrollWidth - width,
    wide: wide.slice(0, 3).map(e =>
      `<${e.tagName.toLowerCase()}> ${e.textContent.trim().slice(0, 60)}`),
  };
}
"""

#: Pages loaded at once by the page check: two tabs, each in its own browser context (its
#: own renderer process), so that one page typesets its math while the other is inspected.
TABS = 2
#: Every host but this machine resolves to nothing, so a page that needs the network fails
#: to load what it asked for; a listener records what it asked for. (Playwright's request
#: routing would block too, but it passes every request through the test process: 9 CPU-s
#: of Chromium's time and 7 s of wall time more for the book's pages here.)
NO_NETWORK = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"


@dataclasses.dataclass
class Rendered:
    """What the browser saw on the book's pages, each page loaded and typeset once."""

    pages: list[str]
    info: dict[str, dict]  # page -> the INSPECT record
    phone: dict[str, dict]  # page -> the SIDEWAYS record at the PHONE's width
    downloads: dict[str, int]  # chapter page -> HTTP status of its .ipynb download
    blocked: list[str]  # non-local URLs the pages asked for
    console_errors: list[str]
    screenshot: Path  # the first Part chapter, as loaded
    solution_page: str  # the first taught chapter
    solution_before: bool  # its first solution's content visible before the click
    solution_after: bool  # ... and after it
    solution_text: str


def _check_first_solution(tab) -> tuple[bool, bool, str]:
    solution = tab.locator(".solution").first
    content = solution.locator("section").first
    before = content.is_visible()
    solution.locator(".admonition-title").first.click()
    tab.wait_for_timeout(400)
    return before, content.is_visible(), content.inner_text().strip()


@pytest.fixture(scope="module")
def rendered(built_book, server, browser) -> Rendered:
    """Load every page once, in :data:`TABS` tabs, and record what the tests check.

    The screenshot and the click on a solution happen on the page as loaded for the check,
    rather than on a second load of the same page (which costs its typesetting again).
    """
    blocked: list[str] = []
    console_errors: list[str] = []
    host = urlparse(server).netloc
    tabs = []
    for _ in range(TABS):
        context = browser.new_context(viewport=DESKTOP)
        context.on(
            "request", lambda r: blocked.append(r.url) if urlparse(r.url).netloc != host else None
        )
        tab = context.new_page()
        tab.on("pageerror", lambda err, tab=tab: console_errors.append(f"{tab.url}: {err}"))
        tab.on(
            "console",
            lambda msg, tab=tab: (
                console_errors.append(f"{tab.url}: {msg.text}") if msg.type == "error" else None
            ),
        )
        tabs.append(tab)
    pages = _pages(built_book)
    chapters = {c.relative_to(ROOT).with_suffix(".html").as_posix() for c in chapter_notebooks()}
    shot = _screenshot_chapter()
    shot_page = shot.relative_to(ROOT).with_suffix(".html").as_posix()
    solution_page = taught_chapters()[0].relative_to(ROOT).with_suffix(".html").as_posix()
    assert {shot_page, solution_page} <= set(pages), (shot_page, solution_page)
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    screenshot = SCREENSHOT_DIR / (shot.stem + ".png")
    screenshot.unlink(missing_ok=True)
    info: dict[str, dict] = {}
    phone: dict[str, dict] = {}
    downloads: dict[str, int] = {}
    solution = (True, False, "")
    for tab, rel in zip(tabs, pages, strict=False):  # the first pages start loading at once
        tab.goto(f"{server}/{rel}", wait_until="commit")
    for i, rel in enumerate(pages):
        tab = tabs[i % TABS]
        tab.wait_for_load_state("load")
        tab.evaluate(WAIT_FOR_RENDER)
        info[rel] = tab.evaluate(INSPECT)
        tab.set_viewport_size(PHONE)  # the same page, laid out again on a phone's screen
        phone[rel] = tab.evaluate(SIDEWAYS)
        tab.set_viewport_size(DESKTOP)
        if rel == shot_page:
            tab.screenshot(path=str(screenshot), full_page=False)
        if rel == solution_page:
            solution = _check_first_solution(tab)
        if rel in chapters:
            ipynb = [u for u in info[rel]["download"] if u.endswith(".ipynb")]
            if ipynb:
                downloads[rel] = tab.context.request.get(ipynb[0]).status
        if i + TABS < len(pages):  # this tab's next page loads while the others are checked
            tab.goto(f"{server}/{pages[i + TABS]}", wait_until="commit")
    for tab in tabs:
        tab.context.close()
    return Rendered(pages, info, phone, downloads, blocked, console_errors, screenshot,
                    solution_page, *solution)  # fmt: skip


# What myst-nb leaves as an image's alternative text when nothing describes it: its path.
_FILE_NAME = re.compile(r"\.(png|svg|jpe?g|gif)$", re.I)


def test_every_page_renders_offline(rendered):
    assert rendered.pages, "no pages found"
    chapters = {c.relative_to(ROOT).with_suffix(".html").as_posix() for c in chapter_notebooks()}
    taught = {c.relative_to(ROOT).with_suffix(".html").as_posix() for c in taught_chapters()}
    failures: list[str] = []
    for rel, info in rendered.info.items():
        where = f"[{rel}]"
        if info["tracebacks"] or info["text_has_traceback"]:
            failures.append(f"{where} shows error output or a traceback")
        if info["math_nodes"] != info["math_typeset"]:
            failures.append(
                f"{where} typeset {info['math_typeset']} of {info['math_nodes']} math nodes"
            )
        if info["math_errors"]:
            failures.append(f"{where} has {info['math_errors']} MathJax errors")
        for img in info["images"]:
            if not img["ok"]:
                failures.append(f"{where} image did not load: {img['src']}")
            if img["content"] and (not img["alt"].strip() or _FILE_NAME.search(img["alt"])):
                failures.append(f"{where} image without a description: alt={img['alt']!r}")
        if info["widget_views"] and not info["widgets_rendered"]:
            failures.append(f"{where} has widget views that did not render")
        if rel in chapters:
            if not info["chapter"]:
                failures.append(f"{where} lacks the chapter marker")
            if not any("mybinder.org" in u for u in info["launch"]):
                failures.append(f"{where} has no Binder launch button")
            if not any(
                "colab.research.google.com" in u and u.endswith(".ipynb") for u in info["launch"]
            ):
                failures.append(f"{where} has no Colab button pointing at an .ipynb")
            if rel not in rendered.downloads:
                failures.append(f"{where} has no .ipynb download")
            elif rendered.downloads[rel] != 200:
                failures.append(f"{where} .ipynb download returns {rendered.downloads[rel]}")
        if rel in taught:
            if info["exercises"] < 2:
                failures.append(f"{where} has {info['exercises']} exercise blocks (want >= 2)")
            if info["exercises_shown"] != info["exercises"]:
                failures.append(f"{where} shows {info['exercises_shown']} of its exercises")
            if info["solutions"] != info["exercises"]:
                failures.append(
                    f"{where} has {info['solutions']} solutions for {info['exercises']} exercises"
                )
            if info["solutions_open"]:
                failures.append(f"{where} shows {info['solutions_open']} solutions before a click")
    seen_chapters = chapters & set(rendered.info)
    assert seen_chapters == chapters, sorted(chapters - seen_chapters)
    blocked = rendered.blocked
    assert not blocked, "pages tried to reach the network:\n" + "\n".join(sorted(set(blocked)))
    assert not rendered.console_errors, "JavaScript errors:\n" + "\n".join(rendered.console_errors)
    assert not failures, "\n".join(failures)


def test_no_page_scrolls_sideways_on_a_phone(rendered):
    """On a 320-pixel screen every page fits its width: long names and signatures wrap
    (book/_static/narrow.css), and what cannot wrap scrolls inside its own box."""
    assert set(rendered.phone) == set(rendered.pages)
    wide = {
        rel: f"{r['overflow']} px too wide: {r['wide']}"
        for rel, r in rendered.phone.items()
        if r["overflow"] > 0
    }
    assert not wide, "pages wider than a phone:\n" + "\n".join(f"{k}: {v}" for k, v in wide.items())


def _screenshot_chapter() -> Path:
    chapters = chapter_notebooks()
    parts = [c for c in chapters if re.search(r"part\d", c.as_posix())]
    return (parts or chapters)[0]


def test_screenshot_of_a_chapter(rendered):
    out = rendered.screenshot
    assert out.exists(), f"no screenshot of {out.stem}"
    assert out.stat().st_size > 20_000, "screenshot is suspiciously small (blank page?)"


def test_a_solution_opens_on_click(rendered):
    """Solutions are hidden, not missing: the toggle reveals the first one."""
    rel = rendered.solution_page
    assert not rendered.solution_before, f"[{rel}] first solution is open before a click"
    assert rendered.solution_after, f"[{rel}] first solution stays hidden after a click"
    assert len(rendered.solution_text) > 20, "the revealed solution is empty"


LINK = re.compile(r'href="(https://(?:mybinder\.org|colab\.research\.google\.com)/[^"]+)"')


def _launch_links(page: Path) -> dict[str, str]:
    links = {}
    for url in LINK.findall(page.read_text(encoding="utf-8")):
        url = url.replace("&amp;", "&")
        links["binder" if "mybinder.org" in url else "colab"] = url
    return links


def test_launch_links_point_at_files_that_exist(built_book):
    """Binder and Colab both open the chapter's published notebook, ``_sources/<path>.ipynb``
    of the ``gh-pages`` branch (the built ``_build/html``), which holds Binder's files too.
    Every chapter page's links name files that exist there."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    org_repo = urlparse(config["repository"]["url"]).path.strip("/")
    assert (built_book / "binder" / "environment.yml").is_file()
    assert (built_book / "binder" / "postBuild").stat().st_mode & 0o111, "postBuild runs"
    assert (built_book / ".jupyter" / "labconfig" / "default_setting_overrides.json").is_file()
    problems = []
    for chapter in chapter_notebooks():
        source = chapter.relative_to(ROOT).as_posix()
        notebook = f"_sources/{chapter.relative_to(ROOT).with_suffix('.ipynb').as_posix()}"
        page = built_book / chapter.relative_to(ROOT).with_suffix(".html")
        links = _launch_links(page)
        binder = links.get("binder", "")
        want = f"https://mybinder.org/v2/gh/{org_repo}/gh-pages?urlpath=lab/tree/{notebook}"
        if binder != want:
            problems.append(f"{source}: Binder link {binder!r}, want {want!r}")
        colab = links.get("colab", "")
        want = f"https://colab.research.google.com/github/{org_repo}/blob/gh-pages/{notebook}"
        if colab != want:
            problems.append(f"{source}: Colab link {colab!r}, want {want!r}")
        published = built_book / notebook
        if not published.is_file():
            problems.append(f"{source}: {notebook} is not in the build")
            continue
        nb = json.loads(published.read_text(encoding="utf-8"))
        first = nb["cells"][0]
        if "ccmc-setup" not in first.get("metadata", {}).get("tags", []):
            problems.append(f"{source}: the published notebook lacks the set-up cell")
    assert not problems, "\n".join(problems)
