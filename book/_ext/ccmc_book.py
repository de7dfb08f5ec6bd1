"""Small Sphinx extension for the ccmc_lite book.

1. Colab and Binder open the chapter's published ``.ipynb`` (``_sources/`` on the
   ``gh-pages`` branch, the built pages), not its MyST source; the build also writes the
   ``binder/`` folder and JupyterLab settings that make that branch a Binder repository.
2. The downloadable ``.ipynb`` of every chapter is written from the page's resolved doctree
   (:mod:`plain_notebooks`): plain Markdown with the values, numbers and links of the page,
   the executed outputs, and a first cell that installs the commit that built the pages
   (``book/_colab_setup.py``). Its student version (no solutions, no outputs) goes to
   ``student_notebooks/`` beside the pages (:func:`booktools.write_published`).
3. sphinx-thebe's assets are dropped while Thebe is off (they throw a JavaScript error on
   every page and reference a CDN).
4. ``booktools.patch_kernel_polling`` makes notebook execution poll the kernel's sockets
   in short slices (the build, the tests and the benchmarks call it), see its docstring.
5. Every chapter page carries ``<meta name="ccmc-chapter">`` so the browser test knows
   which pages must show launch buttons.
6. ``CCMC_BOOK_BUILD=1`` is set for the kernels that execute chapters, so
   ``tools.gluing.glue`` (called in build-only cells) records values for the prose.
7. The ``chapter-overview`` directive renders the instructors' table of chapters.
8. A figure's image gets its caption's first sentence as alternative text (myst-nb leaves
   the image's file path there, which is what a screen reader would read aloud).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from booktools import patch_kernel_polling, put_on_kernel_path, write_published
from docutils import nodes
from docutils.statemachine import StringList
from plain_notebooks import commit_of, plain_notebook
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

BOOK_BUILD_ENV = "CCMC_BOOK_BUILD"  # the same name as tools.gluing.BOOK_BUILD_ENV


def _walk_buttons(buttons: list[dict[str, Any]]):
    for button in buttons:
        yield button
        if isinstance(button.get("buttons"), list):
            yield from _walk_buttons(button["buttons"])


def keep_plain_notebook(app: Sphinx, doctree: Any, docname: str) -> None:
    """Render the reader's notebook of a chapter from its resolved doctree (see below)."""
    notebook = plain_notebook(app, doctree, docname, app.ccmc_commit)  # type: ignore[attr-defined]
    if notebook is not None:
        app.ccmc_notebooks[docname] = notebook  # type: ignore[attr-defined]


# The end of a caption's first sentence: a full stop, then a capital, not after an
# abbreviation such as "et al." or "Fig.".
_SENTENCE_END = re.compile(
    r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)(?<!\bFig)(?<!\bEq)(?<!\bcf)"  # not an abbreviation
    r"\.\s+(?=[A-Z(])"
)


# LaTeX in a caption, as plain text for the alternative text (read aloud, not typeset):
# Greek letters and arrows as characters, font commands dropped, other commands by name.
_SYMBOLS = {
    **dict(zip("alpha beta gamma delta varepsilon zeta eta theta iota kappa lambda mu nu xi "
               "omicron pi rho varsigma sigma tau upsilon phi chi psi omega".split(),
               "αβγδεζηθικλμνξοπρςστυφχψω", strict=True)),
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Pi": "Π", "Sigma": "Σ",
    "Omega": "Ω", "ell": "ℓ", "to": "→", "infty": "∞", "le": "≤", "ge": "≥", "neq": "≠",
    "approx": "≈", "times": "×", "cdot": "·", "pm": "±", "in": "∈", "mid": "|", "top": "ᵀ",
    "star": "*", "partial": "∂", "nabla": "∇", "sum": "Σ", "sim": "~", "propto": "∝",
    "dots": "…", "big": "", "Big": "", "left": "", "right": "", "quad": " ", "qquad": " ",
    "mathbf": "", "mathcal": "", "mathbb": "", "mathrm": "", "text": "", "boldsymbol": "",
    "operatorname": "",
}  # fmt: skip
_COMMAND = re.compile(r"\\([A-Za-z]+)")


def _plain_math(text: str) -> str:
    text = _COMMAND.sub(lambda m: _SYMBOLS.get(m.group(1), m.group(1)), text.replace("\\,", " "))
    return " ".join(text.replace("{", "").replace("}", "").split())


def figure_description(caption: str) -> str:
    """A caption's first sentence, its LaTeX as plain text: the figure's alternative text."""
    text = _plain_math(caption)
    return _SENTENCE_END.split(text, maxsplit=1)[0].rstrip(".") + "."


def describe_figures(app: Sphinx, doctree: Any, docname: str) -> None:
    """Give each figure's images the caption's first sentence as alternative text."""
    for figure in doctree.findall(nodes.figure):
        captions = list(figure.findall(nodes.caption))
        if not captions:
            continue
        first = figure_description(captions[0].astext())
        for image in figure.findall(nodes.image):
            alt = image.get("alt", "")
            if not alt or alt == image.get("uri") or alt.endswith((".png", ".svg", ".jpg")):
                image["alt"] = first


def fix_launch_and_download(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Runs after sphinx-book-theme's own launch-button handler (priority 501)."""
    ipynb = context.get("ipynb_source")
    if not ipynb:
        return
    context.setdefault("metatags", "")
    context["metatags"] += '\n<meta name="ccmc-chapter" content="1" />'
    notebook = app.ccmc_notebooks.pop(pagename, None)  # type: ignore[attr-defined]
    if notebook is not None:
        write_published(Path(app.outdir), pagename, notebook)
    repo = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    prefix = "https://github.com/"
    if not repo.startswith(prefix):
        return
    org_repo = repo[len(prefix) :]
    branch = app.config.ccmc_pages_branch
    colab = f"https://colab.research.google.com/github/{org_repo}/blob/{branch}/_sources/{ipynb}"
    binder = f"https://mybinder.org/v2/gh/{org_repo}/{branch}?urlpath=lab/tree/_sources/{ipynb}"
    for button in _walk_buttons(context.get("header_buttons", [])):
        if button.get("text") == "Colab":
            button["url"] = colab
        elif button.get("text") == "Binder":
            button["url"] = binder


#: JupyterLab settings for Binder on the published pages: no autosave, so running a
#: chapter never rewrites the published notebook; every cell rendered (not only those in
#: view), so that the browser's find reaches the whole chapter; no news or update checks.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "defer"},
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def reread_when_the_commit_changes(
    app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]
) -> list[str]:
    """Every page again when the checked-out commit changed since the last build.

    Each published notebook pins the commit that built it (its set-up cell), and Sphinx
    writes only the pages whose sources changed; re-reading all of them (execution stays
    cached) keeps every notebook on the same, current commit.
    """
    commit = app.ccmc_commit  # type: ignore[attr-defined]
    if getattr(env, "ccmc_commit", None) == commit:
        return []
    env.ccmc_commit = commit
    return sorted(env.found_docs)


def remember_commit(app: Sphinx) -> None:
    """The checked-out commit, read once per build: notebooks and Binder pin it."""
    app.ccmc_commit = commit_of(Path(app.srcdir))  # type: ignore[attr-defined]


def write_binder_files(app: Sphinx) -> None:
    """Make the published pages (the ``gh-pages`` branch) a Binder repository.

    Binder and Colab open the same published notebook (plain Markdown, the page's numbers
    and figures). Binder reads ``binder/environment.yml`` (the repository's) and runs
    ``binder/postBuild``, which installs the commit that built the pages; Binder's ``$HOME``
    is the branch, so ``.jupyter/labconfig/`` holds JupyterLab's settings. Written when
    the build starts: they depend on nothing the build makes.
    """
    if app.builder.name != "html":
        return
    out = Path(app.outdir)
    (out / "binder").mkdir(exist_ok=True)
    (out / "binder" / "environment.yml").write_text(
        (Path(app.srcdir) / "environment.yml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    commit = app.ccmc_commit or "main"  # type: ignore[attr-defined]
    repo = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    post = out / "binder" / "postBuild"
    post.write_text(
        "#!/usr/bin/env bash\n"
        "# Written by the book build: installs the ccmc_lite that built these pages\n"
        "# (its dependencies come from environment.yml).\n"
        "set -euo pipefail\n"
        f'python -m pip install --no-deps "ccmc_lite @ git+{repo}@{commit}"\n',
        encoding="utf-8",
    )
    post.chmod(0o755)
    lab = out / ".jupyter" / "labconfig"
    lab.mkdir(parents=True, exist_ok=True)
    (lab / "default_setting_overrides.json").write_text(
        json.dumps(LAB_SETTINGS, indent=2) + "\n", encoding="utf-8"
    )


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


def _seconds(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.0f} s" if isinstance(value, float) else f"{value} s"


class ChapterOverview(SphinxDirective):
    """``{chapter-overview}``: one table row per taught chapter (instructors' page).

    Rows come from :func:`booktools.chapter_overview` (the toc, the chapter sources, the
    chapter timings in ``benchmarks/results.json`` and the chapter snapshots' provenance).
    """

    has_content = False

    def run(self) -> list[Any]:
        from booktools import SNAPSHOT_FOLDER, chapter_overview, paper_snapshot_runs, student_name

        root = Path(self.env.srcdir)
        results_path = root / "benchmarks" / "results.json"
        self.env.note_dependency(str(results_path))
        for snapshot in sorted((root / SNAPSHOT_FOLDER).glob("*.json")):
            self.env.note_dependency(str(snapshot))
        results = json.loads(results_path.read_text()) if results_path.exists() else {}
        snapshots = paper_snapshot_runs(root)
        rows = chapter_overview(root, results, snapshots)
        if not rows:
            raise self.error("chapter-overview found no taught chapters in _toc.yml")
        here = Path(self.env.doc2path(self.env.docname)).parent
        site = self.config.html_baseurl.rstrip("/")
        lines = [
            "| part | chapter | exercises | student notebook | book profile | paper profile |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            link = Path(os.path.relpath(root / r["path"], here)).as_posix()
            name = student_name(str(Path(r["path"]).with_suffix("")))
            student = f"[{name}.ipynb]({site}/student_notebooks/{name}.ipynb)"
            paper = _seconds(r["paper_s"]) + (" \\*" if r["paper_from_snapshot"] else "")
            lines.append(
                f"| {r['part'].split(' — ')[0]} | [{r['title']}]({link}) | {r['exercises']} | "
                f"{student} | {_seconds(r['book_s'])} | {paper} |"
            )
        days = sorted({run["created"][:10] for run in snapshots.values()})
        machines = sorted({run["machine"] for run in snapshots.values()})
        lines += [
            "",
            f"Book profile measured {results.get('chapter_book_date', '?')} on "
            f"{results.get('chapter_book_machine', '?')}. Paper profile: the chapters marked "
            f"\\* were timed when their snapshot was taken ({', '.join(days)}, on "
            f"{'; '.join(machines)}); the others {results.get('chapter_paper_date', '?')} "
            f"({results.get('chapter_paper_cap_s', '?')}).",
        ]
        container = nodes.container(classes=["ccmc-chapter-overview"])
        self.state.nested_parse(StringList(lines, source=self.env.docname), 0, container)
        return [container]


class ApiPart(SphinxDirective):
    """``{api-part} markov``: the API of one subpackage of ``ccmc_lite``, module by module.

    For each module listed in the subpackage's ``__all__`` groups (the ``__init__`` imports
    them in book order), the module's docstring is shown, then every public name of that
    module documented under the subpackage (``ccmc_lite.markov.binary_kernel``): the name a
    chapter writes (``markov.binary_kernel``) is the name the reference documents. A public
    name added to a module appears here without editing the page.
    """

    required_arguments = 1
    has_content = False

    def run(self) -> list[Any]:
        import importlib
        import inspect

        part = self.arguments[0]
        package = importlib.import_module(f"ccmc_lite.{part}")
        exported = list(getattr(package, "__all__", []))
        by_module: dict[str, list[str]] = {}
        for name in exported:
            obj = getattr(package, name)
            module = getattr(obj, "__module__", None)
            if not (isinstance(module, str) and module.startswith(f"ccmc_lite.{part}.")):
                module = _defining_module(package, name)
            by_module.setdefault(module, []).append(name)
        rst = [f".. automodule:: ccmc_lite.{part}", ""]
        for module, names in by_module.items():
            rst += [f".. automodule:: {module}", "", f".. currentmodule:: ccmc_lite.{part}", ""]
            for name in names:
                obj = getattr(package, name)
                if inspect.isclass(obj):
                    rst += [f".. autoclass:: {name}", "   :members:", ""]
                elif callable(obj):
                    rst += [f".. autofunction:: {name}", ""]
                else:  # a constant: its ``#:`` comment lives in the defining module
                    rst += [f".. py:data:: {name}", f"   :value: {_short_repr(obj)}", ""]
                    rst += [f"   {line}" for line in _attribute_doc(module, name)] + [""]
        exercises = f"ccmc_lite.{part}.exercises"
        if importlib.util.find_spec(exercises) is not None:
            rst += [f".. automodule:: {exercises}", "   :members:", ""]
        text = ["```{eval-rst}", *rst, "```"]
        container = nodes.container(classes=["ccmc-api-part"])
        self.state.nested_parse(StringList(text, source=self.env.docname), 0, container)
        return container.children


def _defining_module(package: Any, name: str) -> str:
    """The submodule whose ``__all__`` lists ``name`` (constants carry no ``__module__``)."""
    import importlib

    for module_name in _submodules(package):
        module = importlib.import_module(module_name)
        if name in getattr(module, "__all__", []):
            return module_name
    raise ValueError(f"{package.__name__}.{name} is exported but no submodule defines it")


def _attribute_doc(module: str, name: str) -> list[str]:
    """The ``#:`` documentation comment of a module-level constant (``[]`` if none)."""
    from sphinx.pycode import ModuleAnalyzer

    docs = ModuleAnalyzer.for_module(module).find_attr_docs()
    return list(docs.get(("", name), []))


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _submodules(package: Any) -> list[str]:
    import pkgutil

    return [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]


def setup(app: Sphinx) -> dict[str, Any]:
    patch_kernel_polling()
    os.environ[BOOK_BUILD_ENV] = "1"  # inherited by the kernels myst-nb starts
    put_on_kernel_path(Path(app.srcdir))  # build-only cells import tools/
    app.add_config_value("ccmc_pages_branch", "gh-pages", "html")
    app.add_config_value("ccmc_setup_cell_file", "book/_colab_setup.py", "html")
    app.ccmc_notebooks = {}  # type: ignore[attr-defined]
    app.connect("doctree-resolved", describe_figures, priority=400)
    app.connect("doctree-resolved", keep_plain_notebook)
    app.connect("html-page-context", fix_launch_and_download, priority=502)
    app.connect("html-page-context", drop_unused_thebe, priority=900)
    app.connect("builder-inited", remember_commit, priority=100)
    app.connect("builder-inited", write_binder_files)
    app.connect("env-get-outdated", reread_when_the_commit_changes)
    app.add_directive("chapter-overview", ChapterOverview)
    app.add_directive("api-part", ApiPart)
    # Chapter titles such as "The $(p, q)$ phase diagram" put math into the navigation of
    # every page, so MathJax must load on pages that have no math of their own too.
    app.set_html_assets_policy("always")
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
