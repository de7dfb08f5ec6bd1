"""Binder, as a reader meets it: the launch button opens the chapter's published notebook.

The launch buttons start Binder on the published pages (the ``gh-pages`` branch is the
built ``_build/html``), which the build makes a Binder repository (``binder/``,
``.jupyter/labconfig/``). So JupyterLab starts with ``$HOME`` a copy of the built pages
(Binder copies the repository into ``$HOME``), in an environment holding what Binder
installs (``environment.yml``: the runtime dependencies, JupyterLab, jupyterlab-myst,
jupytext; see ``book_tools.ensure_binder_venv``). Headless Chromium, with every non-local
request blocked, opens the path the chapter page's Binder button names. The test checks
that the notebook opens, that its markdown is rendered text (a numbered theorem, a glued
number, a figure, typeset math), that its cells run to the end with the explorer's sliders,
and that running it leaves the published file as it was. The screenshot is kept under
``_build/screenshots/``.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from book_tools import BUILD_DIR, HTML_DIR, ROOT, binder_env, ensure_binder_venv

pytestmark = pytest.mark.binder

#: A chapter with a widget (``ipywidgets.interact``) that runs in seconds.
CHAPTER = ROOT / "book" / "part2" / "02_unigram_trap.md"
SCREENSHOT = BUILD_DIR / "screenshots" / "binder_landing.png"
TOKEN = "ccmc-binder-test"
CONDA_TO_PIP = {"pytorch-cpu": "torch", "pytorch": "torch", "matplotlib-base": "matplotlib"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0].lower() for r in requirements}


def test_environment_yml_lists_every_runtime_dependency():
    import tomllib
    import yaml

    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    conda = {
        CONDA_TO_PIP.get(n, n) for n in _names(d for d in env["dependencies"] if isinstance(d, str))
    }
    runtime = _names(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    )
    assert runtime <= conda, f"environment.yml lacks {sorted(runtime - conda)}"
    binder = _names(
        line
        for line in (ROOT / "requirements" / "binder.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert binder <= conda, f"environment.yml lacks {sorted(binder - conda)}"


def _binder_url(built_book: Path) -> str:
    page = built_book / CHAPTER.relative_to(ROOT).with_suffix(".html")
    found = re.findall(r'href="(https://mybinder\.org/[^"]+)"', page.read_text(encoding="utf-8"))
    assert found, f"{page} has no Binder button"
    return found[0].replace("&amp;", "&")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: The published notebook the chapter page's Binder button opens (checked at the end).
PUBLISHED = Path("_sources") / CHAPTER.relative_to(ROOT).with_suffix(".ipynb")


def _published_during_the_build(book_build, timeout: float = 900) -> None:
    """Wait until the running build has written the chapter's published notebook.

    The build writes Binder's files when it starts and each page's notebook when it writes
    the page, so JupyterLab can run the chapter while Sphinx writes the other pages (two
    cores: one for the build, one for the kernel), as Binder would serve it afterwards.
    """
    started = getattr(book_build, "started_at", 0.0)  # a stale file from an older build
    path = HTML_DIR / PUBLISHED
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = book_build.poll() == 0  # an up-to-date page is not written again
        if path.exists() and (path.stat().st_mtime >= started or done):
            try:
                if "ccmc-setup" in json.loads(path.read_text(encoding="utf-8"))["cells"][0].get(
                    "metadata", {}
                ).get("tags", []):
                    return
            except (ValueError, KeyError, IndexError):
                pass  # being written, or still the theme's copy of the source
        if book_build.poll() is not None and book_build.returncode != 0:
            pytest.fail("the book build failed before it wrote the chapter's notebook")
        time.sleep(0.5)
    pytest.fail(f"the build did not write {PUBLISHED} within {timeout} s")


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory, book_build):
    """JupyterLab serving the published pages as Binder does, while the build finishes.

    ``$HOME`` gets the build's Binder files and the chapter's published notebook (the rest
    of the pages is not needed to run it); the test checks the built page's button at the
    end, once the build is done.
    """
    python = ensure_binder_venv()
    home = tmp_path_factory.mktemp("binder-home")
    _published_during_the_build(book_build)
    for rel in (PUBLISHED, Path("binder"), Path(".jupyter")):
        source = HTML_DIR / rel
        if source.is_dir():
            shutil.copytree(source, home / rel, dirs_exist_ok=True)
        else:
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, home / rel)
    port = _free_port()
    log = (BUILD_DIR / "binder-jupyterlab.log").open("w")
    proc = subprocess.Popen(
        [
            str(python),
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--allow-root",  # CI runs as root
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={TOKEN}",
            "--ServerApp.disable_check_xsrf=True",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        cwd=home,
        env=binder_env(home),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.terminate()
                pytest.fail(f"JupyterLab did not start; see {BUILD_DIR / 'binder-jupyterlab.log'}")
            time.sleep(0.5)
    yield base, home
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _wait_for_kernel(base: str, path: str, timeout: float = 120) -> None:
    """Until the server has a session for ``path`` whose kernel is idle."""
    import json

    deadline = time.monotonic() + timeout
    sessions = []
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/api/sessions?token={TOKEN}", timeout=5) as r:
                sessions = json.load(r)
        except (TimeoutError, urllib.error.URLError):  # a busy server answers late: ask again
            time.sleep(0.5)
            continue
        if any(
            s.get("path") == path and s.get("kernel", {}).get("execution_state") == "idle"
            for s in sessions
        ):
            time.sleep(1)  # the page's kernel connection settles
            return
        time.sleep(0.5)
    raise AssertionError(f"no idle kernel for {path} after {timeout} s: sessions {sessions}")


def test_binder_button_opens_the_published_notebook(jupyterlab, request):
    from playwright.sync_api import sync_playwright
    from test_book import CHROMIUM_FLAGS, NO_NETWORK, _chromium

    base, home = jupyterlab
    path = PUBLISHED.as_posix()
    urlpath = f"lab/tree/{path}"  # what Binder opens; the page's button is checked below
    published = (home / path).read_bytes()
    assert (home / "binder" / "environment.yml").read_text() == (
        ROOT / "environment.yml"
    ).read_text()
    assert "git+https://github.com/ccmc-lite/ccmc_lite@" in (home / "binder/postBuild").read_text()
    settings = f"{base}/lab/api/settings/@jupyterlab/docmanager-extension:plugin?token={TOKEN}"
    with urllib.request.urlopen(settings, timeout=10) as r:
        schema = json.load(r)["schema"]  # the overrides become the schema's defaults
    assert schema["properties"]["autosave"]["default"] is False, "autosave rewrites the file"

    url = f"{base}/{urlpath}?token={TOKEN}"
    host = urlparse(base).netloc
    blocked: list[str] = []
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    with sync_playwright() as pw:
        # Every host but this machine resolves to nothing (Playwright's request routing
        # would also do, but it stops JupyterLab from creating its kernel session).
        browser = pw.chromium.launch(
            executable_path=_chromium(), args=[*CHROMIUM_FLAGS, NO_NETWORK]
        )
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.on(
            "request",
            lambda r: blocked.append(r.url) if urlparse(r.url).netloc != host else None,
        )
        page = context.new_page()
        try:
            page.goto(url, wait_until="domcontentloaded")
            page.locator(".jp-NotebookPanel").first.wait_for(state="visible", timeout=90_000)
            _wait_for_kernel(base, path)
            # The markdown is text, rendered by jupyterlab-myst: a theorem heading, typeset
            # math, a glued number, and the prose's figure (a cell attachment) drawn.
            markdown = page.locator(".jp-MarkdownCell .myst")
            markdown.first.wait_for(state="visible", timeout=60_000)
            page.wait_for_timeout(1000)
            dirty = page.locator(".jp-mod-dirty").count()
            assert dirty == 0, "opening the notebook marked it modified"
            page.wait_for_function(  # every cell rendered ("defer" windowing)
                "() => document.querySelector('.jp-Notebook').innerText.includes('Takeaways')",
                timeout=60_000,
            )
            text = page.locator(".jp-Notebook").inner_text()
            for raw in ("{glue", "{prf:", "```{", ":label:", "{numref", "{cite"):
                assert raw not in text, f"raw MyST {raw!r} shown in the notebook"
            assert re.search(r"Theorem\s*\(Global minimum", text), "no rendered theorem"
            assert "0.926 nats above the entropy rate" in text, "no glued number"
            page.wait_for_function(
                "() => document.querySelectorAll('.jp-MarkdownCell .myst .katex').length > 20",
                timeout=60_000,
            )
            # Run the first cells one by one (Shift+Enter, as a reader does) ...
            page.locator(".jp-CodeCell").first.click()
            page.keyboard.press("Escape")  # command mode
            for _ in range(3):
                page.keyboard.press("Shift+Enter")
            page.wait_for_function(
                """() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
                     .slice(0, 2).every(p => /\\[\\d+\\]/.test(p.textContent))""",
                timeout=180_000,
            )
            # ... then the rest from the Run menu: the explorer is near the end.
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
            sliders = page.locator(".jp-OutputArea .widget-slider")
            sliders.first.wait_for(state="visible", timeout=300_000)
            assert sliders.count() >= 2, f"{sliders.count()} slider(s) rendered, want p and q"
            figure = page.locator(".jp-MarkdownCell .myst img").first
            figure.scroll_into_view_if_needed()
            page.wait_for_function(
                """() => Array.from(document.querySelectorAll('.jp-MarkdownCell .myst img'))
                     .some(i => i.complete && i.naturalWidth > 100)""",
                timeout=60_000,
            )
            for _ in range(3):  # the notebook renders lazily: scroll until it settles
                sliders.first.evaluate("e => e.scrollIntoView({block: 'center'})")
                page.wait_for_timeout(700)
            page.screenshot(path=str(SCREENSHOT))
            errors = page.locator(".jp-OutputArea-output[data-mime-type*='error']").count()
            assert errors == 0, f"{errors} cell(s) of {path} raised in JupyterLab"
        except Exception:
            page.screenshot(path=str(SCREENSHOT))
            raise
        finally:
            context.close()
            browser.close()
    assert not blocked, "JupyterLab tried to leave this machine:\n" + "\n".join(blocked)
    assert SCREENSHOT.stat().st_size > 20_000
    assert (home / path).read_bytes() == published, "running the chapter rewrote its file"
    # The reader gets there through the built page's button: it names this very path.
    built_book = request.getfixturevalue("built_book")
    launch = urlparse(_binder_url(built_book))
    assert launch.path.endswith("/gh-pages"), launch.path
    assert parse_qs(launch.query)["urlpath"] == [urlpath], launch.query
    assert (built_book / PUBLISHED).read_bytes() == published, "the build rewrote the notebook"
