"""Small Sphinx extension for the ccmc_lite book.

1. Colab cannot open MyST Markdown. sphinx-book-theme points the Colab button at the
   chapter's ``.md`` source, so we point it at the executed ``.ipynb`` that the build
   publishes under ``_sources/`` on the ``gh-pages`` branch instead.
2. The downloadable ``.ipynb`` of every chapter gets one set-up cell at the top that
   installs ``ccmc_lite`` when it is missing (Colab, a fresh environment). The cell's text
   lives in one place, ``book/_colab_setup.py``; chapter sources do not repeat it.
3. sphinx-thebe's assets are dropped while Thebe is off (they throw a JavaScript error on
   every page and reference a CDN).
4. ``patch_kernel_polling`` makes notebook execution poll the kernel's sockets in short
   slices (used by the build here and by the chapter tests), see its docstring.
5. Every chapter page carries ``<meta name="ccmc-chapter">`` so the browser test knows
   which pages must show launch buttons.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx

SETUP_TAG = "ccmc-setup"
POLL_SLICE_S = 0.5


def patch_kernel_polling() -> None:
    """Poll kernel sockets in short slices instead of one long wait (idempotent).

    Executing chapters with widgets (``ipywidgets.interact``) occasionally deadlocked here:
    the kernel had finished and replied, yet nbclient kept waiting in a single
    ``socket.poll(timeout)`` until the cell timeout (the readiness notification was
    missed; see jupyter/nbclient#312 and jupyter/nbconvert#2029). Re-polling every
    ``POLL_SLICE_S`` seconds sees the waiting message. Timeouts keep their meaning: the
    total wait is unchanged, and ``queue.Empty`` is raised when it runs out.
    """
    from queue import Empty
    from time import monotonic

    from jupyter_client.channels import AsyncZMQSocketChannel

    if getattr(AsyncZMQSocketChannel.get_msg, "_ccmc_sliced", False):
        return

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        assert self.socket is not None
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            remaining = POLL_SLICE_S if deadline is None else max(0.0, deadline - monotonic())
            ready = await self.socket.poll(int(1000 * min(POLL_SLICE_S, remaining)))
            if ready:
                return await self._recv()
            if deadline is not None and monotonic() >= deadline:
                raise Empty

    get_msg._ccmc_sliced = True  # type: ignore[attr-defined]
    AsyncZMQSocketChannel.get_msg = get_msg  # type: ignore[method-assign]


def _walk_buttons(buttons: list[dict[str, Any]]):
    for button in buttons:
        yield button
        if isinstance(button.get("buttons"), list):
            yield from _walk_buttons(button["buttons"])


def _setup_cell_source(app: Sphinx) -> str:
    path = Path(app.srcdir) / app.config.ccmc_setup_cell_file
    return path.read_text(encoding="utf-8").rstrip() + "\n"


def _inject_setup_cell(notebook_path: Path, source: str) -> None:
    nb = json.loads(notebook_path.read_text(encoding="utf-8"))
    cells = nb.get("cells", [])
    if cells and SETUP_TAG in cells[0].get("metadata", {}).get("tags", []):
        return
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "id": "ccmc-setup",
        "metadata": {"tags": [SETUP_TAG]},
        "outputs": [],
        "source": source.splitlines(keepends=True),
    }
    nb["cells"] = [cell, *cells]
    notebook_path.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")


def fix_launch_and_download(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Runs after sphinx-book-theme's own launch-button handler (priority 501)."""
    ipynb = context.get("ipynb_source")
    if not ipynb:
        return
    context.setdefault("metatags", "")
    context["metatags"] += '\n<meta name="ccmc-chapter" content="1" />'
    notebook_path = Path(app.outdir) / "_sources" / ipynb
    if notebook_path.exists():
        _inject_setup_cell(notebook_path, _setup_cell_source(app))
    repo = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    prefix = "https://github.com/"
    if not repo.startswith(prefix):
        return
    org_repo = repo[len(prefix) :]
    branch = app.config.ccmc_colab_branch
    colab = f"https://colab.research.google.com/github/{org_repo}/blob/{branch}/_sources/{ipynb}"
    for button in _walk_buttons(context.get("header_buttons", [])):
        if button.get("text") == "Colab":
            button["url"] = colab


def drop_unused_thebe(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Remove sphinx-thebe's assets when Thebe is off.

    Jupyter Book always loads sphinx-thebe, which injects its inline configuration script
    twice per page (a JavaScript ``SyntaxError`` on every page) and points at a CDN. The
    book does not use Thebe (``launch_buttons.thebe: false``), so its assets go.
    """
    if app.config.html_theme_options.get("launch_buttons", {}).get("thebe"):
        return

    def keep(asset: Any) -> bool:
        text = str(getattr(asset, "filename", asset) or "") + str(
            getattr(asset, "attributes", {}).get("body", "")
        )
        return "thebe" not in text.lower()

    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [a for a in context[key] if keep(a)]


def setup(app: Sphinx) -> dict[str, Any]:
    patch_kernel_polling()
    app.add_config_value("ccmc_colab_branch", "gh-pages", "html")
    app.add_config_value("ccmc_setup_cell_file", "book/_colab_setup.py", "html")
    app.connect("html-page-context", fix_launch_and_download, priority=502)
    app.connect("html-page-context", drop_unused_thebe, priority=900)
    # Chapter titles such as "The $(p, q)$ phase diagram" put math into the navigation of
    # every page, so MathJax must load on pages that have no math of their own too.
    app.set_html_assets_policy("always")
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
