"""Binder, as a reader meets it: the launch button opens the chapter as a notebook.

JupyterLab starts from a copy of the repository's tracked files with ``$HOME`` set to it
(Binder copies the repository into ``$HOME``, so ``.jupyter/`` is its Jupyter configuration),
in an environment holding what Binder installs (``environment.yml``: the runtime
dependencies, JupyterLab, jupytext; see ``book_tools.ensure_binder_venv``). Headless
Chromium, with every non-local request blocked, opens the chapter's Binder path
(``urlpath=lab/tree/<chapter>.md``) on the local server. The test checks that a notebook
opens (not a text editor), that its first code cells run, and that a widget renders; the
screenshot is kept under ``_build/screenshots/``. The book builds meanwhile (it is started
first, in the background); at the end the test checks that the built chapter page's Binder
button names exactly the path it opened.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from book_tools import BUILD_DIR, ROOT, binder_env, ensure_binder_venv

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


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """JupyterLab serving a copy of the repository, configured as on Binder."""
    python = ensure_binder_venv()
    home = tmp_path_factory.mktemp("binder-home")
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in tracked:
        if (ROOT / name).is_file():
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, home / name)
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
    yield base
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
        with urllib.request.urlopen(f"{base}/api/sessions?token={TOKEN}", timeout=5) as r:
            sessions = json.load(r)
        if any(
            s.get("path") == path and s.get("kernel", {}).get("execution_state") == "idle"
            for s in sessions
        ):
            time.sleep(1)  # the page's kernel connection settles
            return
        time.sleep(0.5)
    raise AssertionError(f"no idle kernel for {path} after {timeout} s: sessions {sessions}")


def test_binder_button_opens_the_chapter_as_a_notebook(book_build, jupyterlab, request):
    from playwright.sync_api import sync_playwright
    from test_book import CHROMIUM_FLAGS, NO_NETWORK, _chromium

    # book_build (first argument) has started the build; it runs while JupyterLab works.
    urlpath = f"lab/tree/{CHAPTER.relative_to(ROOT).as_posix()}"  # what Binder opens
    url = f"{jupyterlab}/{urlpath}?token={TOKEN}"
    host = urlparse(jupyterlab).netloc
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
            panel = page.locator(".jp-NotebookPanel").first
            try:
                panel.wait_for(state="visible", timeout=90_000)
            except Exception:
                page.screenshot(path=str(SCREENSHOT))
                editors = page.locator(".jp-FileEditor").count()
                raise AssertionError(
                    f"{urlpath} did not open as a notebook ({editors} text editor(s) open); "
                    f"see {SCREENSHOT}"
                ) from None
            assert page.locator(".jp-FileEditor:visible").count() == 0
            # Once the notebook's kernel is up, run the first cells one by one (Shift+Enter,
            # as a reader does): the first code cells get execution counts and no error.
            _wait_for_kernel(jupyterlab, CHAPTER.relative_to(ROOT).as_posix())
            page.locator(".jp-Cell").first.click()
            page.keyboard.press("Escape")  # command mode
            for _ in range(5):
                page.keyboard.press("Shift+Enter")
            page.wait_for_function(
                """() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
                     .slice(0, 2).every(p => /\\[\\d+\\]/.test(p.textContent))""",
                timeout=180_000,
            )
            # Then the rest from the Run menu: the chapter's widget is near its end.
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
            # The explorer's two sliders (ipywidgets.interact) render.
            sliders = page.locator(".jp-OutputArea .widget-slider")
            sliders.first.wait_for(state="visible", timeout=300_000)
            assert sliders.count() >= 2, f"{sliders.count()} slider(s) rendered, want p and q"
            for _ in range(3):  # the notebook renders lazily: scroll until it settles
                sliders.first.evaluate("e => e.scrollIntoView({block: 'center'})")
                page.wait_for_timeout(700)
            page.screenshot(path=str(SCREENSHOT))
            errors = page.locator(".jp-OutputArea-output[data-mime-type*='error']").count()
            assert errors == 0, f"{errors} cell(s) of {urlpath} raised in JupyterLab"
        except Exception:
            page.screenshot(path=str(SCREENSHOT))
            raise
        finally:
            context.close()
            browser.close()
    assert not blocked, "JupyterLab tried to leave this machine:\n" + "\n".join(blocked)
    assert SCREENSHOT.stat().st_size > 20_000
    # The reader gets there through the built page's button: it must name this very path.
    launch = urlparse(_binder_url(request.getfixturevalue("built_book")))
    assert parse_qs(launch.query)["urlpath"] == [urlpath], launch.query
