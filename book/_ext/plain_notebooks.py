"""The notebooks readers download: each chapter as plain Jupyter Markdown with its outputs.

A chapter's source is MyST Markdown: glue roles, theorem and exercise directives, cross
references and citations that only Sphinx understands. Opened as a notebook (the download
button, Colab) that markup would show as raw text. This module writes the notebook from
the chapter's *resolved* doctree instead — after Sphinx has put the glued values in, numbered
the figures, theorems and equations and resolved every reference — so each markdown cell
reads as the web page does:

* glued numbers are numbers, glued figures are images (cell attachments);
* theorems, proofs, admonitions, exercises, hints and solutions are blockquotes headed by
  their numbered title ("**Lemma 3.1** (…)");
* cross references and citations are links into the online book;
* displayed equations keep their numbers (``\\tag{3.2}``).

Code cells are the cells the page shows, with the outputs of the executed build; cells
hidden on the page are left out, except those tagged ``notebook-only`` (live explorers).
Cells inside a solution carry the tag ``solution``, so a student notebook is the published
notebook less those cells and less every output (:func:`booktools.student_notebook`, which
needs only the standard library). The first cell installs the exact commit that built the
pages (``book/_colab_setup.py``).

An element the writer does not know raises ``PlainMarkdownError`` naming the page: a
silent fallback would put raw markup back into readers' notebooks.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from booktools import NOTEBOOK_ONLY_TAG, SETUP_TAG, SOLUTION_TAG
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx

_PROOF_TYPES = {
    "axiom",
    "theorem",
    "lemma",
    "algorithm",
    "definition",
    "remark",
    "conjecture",
    "corollary",
    "criterion",
    "example",
    "property",
    "observation",
    "proposition",
    "assumption",
    "notation",
}
_NAMED_ADMONITIONS = {
    "note": "Note",
    "tip": "Tip",
    "hint": "Hint",
    "important": "Important",
    "warning": "Warning",
    "caution": "Caution",
    "attention": "Attention",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
}


class PlainMarkdownError(ValueError):
    """The doctree holds an element the plain-Markdown writer cannot render."""


def _escape(text: str) -> str:
    """Markdown-escape plain text (math, links and emphasis are written by the writer)."""
    text = text.replace("\\", "\\\\")
    text = re.sub(r"([*_`$\[\]|])", r"\\\1", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _image_alt(text: str) -> str:
    """An image's description for ``![...](...)``: brackets stay when they pair up (Markdown
    allows that, and escaped ones are lost from the description by some renderers)."""
    depth = 0
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth != 0:
        text = text.replace("[", "(").replace("]", ")")
    return text.replace("\\", "\\\\")


def _kind(node: nodes.Node) -> str:
    return f"{type(node).__module__}.{type(node).__name__}"


def _is_cell(node: nodes.Node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "cell_code"


def _is_title(node: nodes.Node) -> bool:
    return isinstance(node, nodes.title) or _kind(node).endswith("_title")


def _line(node: nodes.Node) -> int | None:
    """The source line of a block (its first descendant's when it has none itself)."""
    for n in node.findall(nodes.Element) if isinstance(node, nodes.Element) else []:
        if n.line:
            return int(n.line)
    return None


def _has_cell(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Element) and any(_is_cell(n) for n in node.findall())


class NotebookWriter:
    """Renders one resolved doctree into notebook cells (``nbformat`` v4 dictionaries).

    ``code_cells`` maps a source cell index to the executed cell (source and outputs);
    ``fignumbers`` is Sphinx's per-document numbering (``env.toc_fignumbers[docname]``);
    ``page_url`` is the page's URL in the online book, against which relative links resolve.
    """

    def __init__(
        self,
        docname: str,
        code_cells: dict[int, dict[str, Any]],
        fignumbers: dict[str, dict[str, tuple[int, ...]]],
        page_url: str,
        srcdir: Path,
        exercise_numbers: dict[str, str],
    ) -> None:
        self.docname = docname
        self.code_cells = code_cells
        self.fignumbers = fignumbers
        self.page_url = page_url
        self.srcdir = srcdir
        self.exercise_numbers = exercise_numbers
        self.cells: list[dict[str, Any]] = []
        self._lines: list[str] = []
        self._attachments: dict[str, dict[str, str]] = {}
        self._quote = 0
        self._tags: list[str] = []
        self._images = 0
        #: (source line, cell) of cells hidden on the page but kept in the notebook
        self.pending: list[tuple[int, dict[str, Any]]] = []

    # -- cells -----------------------------------------------------------------------
    def _flush(self) -> None:
        while self._lines and self._lines[-1].strip(" >") == "":
            self._lines.pop()
        text = "\n".join(self._lines).strip("\n")
        if text.strip(" >\n"):
            cell: dict[str, Any] = {
                "cell_type": "markdown",
                "metadata": {"tags": list(self._tags)} if self._tags else {},
                "source": text + "\n",
            }
            if self._attachments:
                cell["attachments"] = self._attachments
            self.cells.append(cell)
        self._lines, self._attachments = [], {}

    def _emit(self, block: str) -> None:
        """Append a block of markdown (lines), quoted at the current depth, then a blank line."""
        prefix = "> " * self._quote
        for line in block.rstrip("\n").split("\n"):
            self._lines.append((prefix + line).rstrip() if line else prefix.rstrip())
        self._lines.append(prefix.rstrip())

    def _code_cell(self, node: nodes.Element) -> None:
        index = int(node["cell_index"])
        if index not in self.code_cells:
            raise PlainMarkdownError(f"{self.docname}: code cell {index} is not in the notebook")
        self._flush()
        cell = copy.deepcopy(self.code_cells[index])
        tags = [t for t in cell.get("metadata", {}).get("tags", []) if t not in self._tags]
        cell.setdefault("metadata", {})["tags"] = tags + list(self._tags)
        if not cell["metadata"]["tags"]:
            del cell["metadata"]["tags"]
        self.cells.append(cell)

    def _place_pending(self, line: int | None) -> None:
        """Emit the notebook-only cells whose source comes before ``line``."""
        while self.pending and (line is None or self.pending[0][0] < line):
            self._flush()
            self.cells.append(self.pending.pop(0)[1])

    # -- blocks ----------------------------------------------------------------------
    def render(self, doctree: nodes.document) -> list[dict[str, Any]]:
        self.pending.sort(key=lambda item: item[0])
        self._walk_children(doctree, level=0)
        self._place_pending(None)
        self._flush()
        return self.cells

    def _walk_children(self, node: nodes.Element, level: int) -> None:
        for child in node.children:
            self._walk(child, level)

    def _walk(self, node: nodes.Node, level: int) -> None:
        line = _line(node) if self.pending else None
        if line is not None:
            self._place_pending(line)
        if _is_cell(node):
            self._code_cell(node)
        elif isinstance(node, nodes.section):
            title = node.next_node(nodes.title) if node.children else None
            if title is not None and title.parent is node:
                self._emit("#" * min(level + 1, 6) + " " + self._inline(title))
            for child in node.children:
                if child is not title:
                    self._walk(child, level + 1 if title is not None else level)
        elif _has_cell(node):
            self._container(node, level)
        else:
            block = self._block(node)
            if block is not None:
                self._emit(block)

    def _container(self, node: nodes.Element, level: int) -> None:
        """A block that holds code cells: a heading line, then its children, quoted."""
        header, body, tag = self._header(node)
        if tag:
            self._flush()
            self._tags.append(tag)
        if header:
            self._emit(header)
        self._quote += bool(header)
        for child in body:
            self._walk(child, level)
        self._quote -= bool(header)
        if tag:
            self._flush()
            self._tags.pop()

    def _header(self, node: nodes.Element) -> tuple[str, list[nodes.Node], str]:
        """Title line, body nodes and cell tag of a titled block (exercise, proof, …)."""
        kind = _kind(node)
        title_types = (nodes.title, nodes.rubric)
        if "sphinx_exercise" in kind and "solution_node" in kind:
            target = node.get("target_label", "")
            number = self.exercise_numbers.get(target, "")
            body = [c for c in node.children if not _is_title(c)]
            return f"**Solution to Exercise {number}**", body, SOLUTION_TAG
        if "sphinx_exercise" in kind:
            titles = [c for c in node.children if _is_title(c)]
            subtitle = node.next_node(lambda n: "exercise_subtitle" in _kind(n))
            number = self.exercise_numbers.get(node.get("label", ""), "")
            head = f"**Exercise {number}**".replace(" **", "**")
            if subtitle is not None:
                head += f" ({self._inline(subtitle)})"
            return head, [c for c in node.children if c not in titles], ""
        if "sphinx_proof" in kind:
            realtype = node.get("realtype", "proof")
            name = realtype.title()
            if realtype != "proof" and "unenumerable" not in kind:
                number = self._number(node.get("countertype", realtype), node)
                name += f" {number}" if number else ""
            title = next((c for c in node.children if isinstance(c, nodes.title)), None)
            text = self._inline(title).strip() if title is not None else ""
            if text.startswith("(") and text.endswith(")"):
                text = text[1:-1]
            head = f"**{name}**" + (f" ({text})" if text else "")
            return head, [c for c in node.children if c is not title], ""
        if kind.endswith("dropdown_main"):
            titles = [c for c in node.children if _is_title(c)]
            text = self._inline(titles[0]).strip() if titles else "Details"
            return f"**{text}**", [c for c in node.children if c not in titles], ""
        if node.get("design_component") == "dropdown" or isinstance(node, nodes.admonition):
            title = next((c for c in node.children if isinstance(c, title_types)), None)
            text = self._inline(title) if title is not None else "Details"
            return f"**{text}**", [c for c in node.children if c is not title], ""
        for cls, name in _NAMED_ADMONITIONS.items():
            if type(node).__name__ == cls:
                return f"**{name}**", list(node.children), ""
        if isinstance(node, (nodes.container, nodes.compound)) or "section" in kind:
            return "", list(node.children), ""
        raise PlainMarkdownError(f"{self.docname}: cannot render a {kind} holding code cells")

    def _number(self, figtype: str, node: nodes.Element) -> str:
        ids = node.get("ids") or [""]
        number = self.fignumbers.get(figtype, {}).get(ids[0], ())
        return ".".join(map(str, number))

    def _blocks(self, children: list[nodes.Node]) -> str:
        parts = [b for c in children if (b := self._block(c)) is not None]
        return "\n\n".join(parts)

    def _block(self, node: nodes.Node) -> str | None:
        """Markdown of a block element that holds no code cell (``None``: nothing to show)."""
        if isinstance(node, (nodes.target, nodes.comment, nodes.substitution_definition)):
            return None
        if isinstance(node, nodes.paragraph):
            return self._inline(node)
        if isinstance(node, nodes.section):
            title = node.next_node(nodes.title)
            body = [c for c in node.children if c is not title]
            return self._blocks(body)
        if isinstance(node, nodes.math_block):
            return self._math_block(node)
        if isinstance(node, nodes.literal_block):
            language = node.get("language", "")
            language = "python" if language in ("ipython3", "ipython") else language
            return f"```{language}\n{node.astext()}\n```"
        if isinstance(node, (nodes.bullet_list, nodes.enumerated_list)):
            return self._list(node)
        if isinstance(node, nodes.table):
            return self._table(node)
        if isinstance(node, nodes.figure):
            return self._figure(node)
        if isinstance(node, nodes.image):
            return self._image(node)
        if isinstance(node, nodes.rubric):
            return f"**{self._inline(node)}**"
        if isinstance(node, nodes.raw):
            return node.astext() if node.get("format") == "html" else None
        if isinstance(node, nodes.block_quote):
            return "\n".join(
                "> " + ln if ln else ">" for ln in self._blocks(node.children).split("\n")
            )
        if isinstance(node, nodes.definition_list):
            items = []
            for item in node.children:
                term = item.next_node(nodes.term)
                definition = item.next_node(nodes.definition)
                items.append(f"**{self._inline(term)}**\n: {self._blocks(definition.children)}")
            return "\n\n".join(items)
        if isinstance(node, nodes.transition):
            return "---"
        if isinstance(node, nodes.Element) and (
            "sphinx_proof" in _kind(node)
            or "sphinx_exercise" in _kind(node)
            or node.get("design_component") == "dropdown"
            or _kind(node).endswith("dropdown_main")
            or isinstance(node, nodes.Admonition)
        ):
            header, body, _ = self._header(node)
            text = self._blocks(body)
            quoted = "\n".join("> " + ln if ln else ">" for ln in text.split("\n"))
            return header + "\n\n" + quoted if text else header
        if isinstance(node, (nodes.container, nodes.compound)):
            if node.get("nb_element", "").startswith("mime_bundle") or node.get("nb_element"):
                return self._output_block(node)
            return self._blocks(node.children)
        raise PlainMarkdownError(
            f"{self.docname}: no plain-Markdown form for {_kind(node)} in {_kind(node.parent)}"
        )

    def _output_block(self, node: nodes.Element) -> str | None:
        """A glued output shown in the prose (an image, a table, a text)."""
        images = list(node.findall(nodes.image))
        if images:
            return "\n\n".join(self._image(i) for i in images)
        raws = [r for r in node.findall(nodes.raw) if r.get("format") == "html"]
        if raws:
            return "\n".join(r.astext() for r in raws)
        text = node.astext().strip()
        return f"```\n{text}\n```" if text else None

    def _math_block(self, node: nodes.Element) -> str:
        latex = node.astext().strip()
        number = self._number("displaymath", node) if node.get("ids") else ""
        if not number and node.get("number"):
            number = str(node["number"])
        tag = f" \\tag{{{number}}}" if number else ""
        return f"$$\n{latex}{tag}\n$$"

    def _list(self, node: nodes.Element) -> str:
        ordered = isinstance(node, nodes.enumerated_list)
        out = []
        for i, item in enumerate(node.children, start=1):
            marker = f"{i}. " if ordered else "- "
            body = self._blocks(item.children).split("\n")
            pad = " " * len(marker)
            out.append(marker + body[0])
            out += [pad + ln if ln else "" for ln in body[1:]]
        return "\n".join(out)

    def _table(self, node: nodes.Element) -> str:
        rows = []
        header_rows = 0
        for part in node.findall(lambda n: isinstance(n, (nodes.thead, nodes.tbody))):
            for row in part.children:
                cells = [self._blocks(e.children).replace("\n", " ") for e in row.children]
                rows.append("| " + " | ".join(cells) + " |")
                header_rows += isinstance(part, nodes.thead)
        if not rows:
            return ""
        ncols = rows[0].count(" | ") + 1
        rule = "|" + "---|" * ncols
        at = header_rows if header_rows else 0
        if at == 0:  # Markdown needs a header row
            rows.insert(0, "|" + " |" * ncols)
            at = 1
        rows.insert(at, rule)
        title = node.next_node(nodes.title)
        caption = ""
        if title is not None and title.parent is node:
            number = self._number("table", node)
            label = f"Table {number}. " if number else ""
            caption = f"*{label}{self._inline(title)}*\n\n"
        return caption + "\n".join(rows)

    def _figure(self, node: nodes.Element) -> str:
        images = [self._image(i) for i in node.findall(nodes.image)]
        caption = node.next_node(nodes.caption)
        text = ""
        if caption is not None:
            number = self._number("figure", node)
            label = f"**Fig. {number}.** " if number else ""
            text = label + self._inline(caption)
        return "\n\n".join([*images, text]) if text else "\n\n".join(images)

    def _image(self, node: nodes.Element) -> str:
        uri = node.get("candidates", {}).get("*") or node["uri"]
        if re.match(r"https?://", uri):
            return f"![{_image_alt(node.get('alt', ''))}]({uri})"
        path = Path(uri) if Path(uri).is_absolute() else self.srcdir / uri
        if not path.exists():
            raise PlainMarkdownError(f"{self.docname}: image {uri} not found")
        mime = {
            ".png": "image/png",
            ".jpg": "image/jpeg",
            ".jpeg": "image/jpeg",
            ".svg": "image/svg+xml",
            ".gif": "image/gif",
        }.get(path.suffix.lower())
        if mime is None:
            raise PlainMarkdownError(f"{self.docname}: image type of {uri} is not supported")
        self._images += 1
        name = f"figure{self._images}{path.suffix.lower()}"
        data = path.read_bytes()
        self._attachments[name] = {mime: base64.b64encode(data).decode("ascii")}
        return f"![{_image_alt(node.get('alt', 'figure'))}](attachment:{name})"

    # -- inline ----------------------------------------------------------------------
    def _inline(self, node: nodes.Node) -> str:
        if isinstance(node, nodes.Text):
            return _escape(node.astext()).replace("\n", " ")
        if isinstance(node, nodes.math):
            return f"${node.astext()}$"
        if isinstance(node, nodes.literal):
            text = node.astext()
            fence = "``" if "`" in text else "`"
            return f"{fence}{text}{fence}"
        if isinstance(node, nodes.emphasis):
            return f"*{self._inline_children(node).strip()}*"
        if isinstance(node, nodes.strong):
            return f"**{self._inline_children(node).strip()}**"
        if isinstance(node, nodes.reference):
            return self._link(node)
        if isinstance(node, (nodes.target, nodes.comment, nodes.substitution_definition)):
            return self._inline_children(node) if isinstance(node, nodes.target) else ""
        if isinstance(node, nodes.image):
            return self._image(node)
        if isinstance(node, nodes.raw):  # inline HTML, but not the theme's icons
            html = node.astext() if node.get("format") == "html" else ""
            return "" if html.lstrip().startswith("<svg") else html
        if isinstance(node, nodes.footnote_reference):
            return f"[{node.astext()}]"
        if isinstance(node, nodes.Element) and node.get("nb_element"):
            return self._inline_children(node)  # a glued inline value
        if isinstance(node, (nodes.inline, nodes.title, nodes.caption, nodes.TextElement)):
            return self._inline_children(node)
        if isinstance(node, (addnodes.pending_xref, nodes.Element)) and not isinstance(
            node, (nodes.Structural, nodes.Body)
        ):
            return self._inline_children(node)
        raise PlainMarkdownError(f"{self.docname}: no inline form for {_kind(node)}")

    def _inline_children(self, node: nodes.Element) -> str:
        return "".join(self._inline(c) for c in node.children)

    def _link(self, node: nodes.Element) -> str:
        text = self._inline_children(node).strip() or _escape(node.get("refuri", ""))
        if node.get("refuri"):
            url = urljoin(self.page_url, node["refuri"])  # relative links into the book
        elif node.get("refid"):
            url = f"{self.page_url}#{node['refid']}"
        else:
            return text
        return f"[{text}]({url})"


def executed_cells(notebook: dict[str, Any], cache_path: str | None) -> dict[str, Any]:
    """The notebook with the outputs of its cached execution merged in (when cached)."""
    import nbformat

    nb = nbformat.from_dict(notebook)
    if cache_path:
        from jupyter_cache import get_cache

        try:
            _, nb = get_cache(cache_path).merge_match_into_notebook(nb)
        except KeyError:
            pass
    return nb


def _visible_outputs(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """The outputs a reader sees: no glue records, streams merged, tagged removals applied."""
    tags = set(cell.get("metadata", {}).get("tags", []))
    if "remove-output" in tags:
        return []
    out: list[dict[str, Any]] = []
    for output in cell.get("outputs", []):
        if "scrapbook" in output.get("metadata", {}):
            continue
        if output["output_type"] == "stream":
            if f"remove-{output['name']}" in tags:
                continue
            last = out[-1] if out else None
            if last and last["output_type"] == "stream" and last["name"] == output["name"]:
                last["text"] = "".join(last["text"]) + "".join(output["text"])
                continue
        out.append(dict(output))
    return out


def _code_cell(cell: dict[str, Any], with_outputs: bool) -> dict[str, Any]:
    tags = [t for t in cell.get("metadata", {}).get("tags", []) if t != "remove-cell"]
    return {
        "cell_type": "code",
        "execution_count": cell.get("execution_count") if with_outputs else None,
        "metadata": {"tags": tags} if tags else {},
        "outputs": _visible_outputs(cell) if with_outputs else [],
        "source": "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"],
    }


def setup_source(app: Sphinx, commit: str | None) -> str:
    """The set-up cell, pinned to ``commit`` (left at ``main`` outside git)."""
    text = (Path(app.srcdir) / app.config.ccmc_setup_cell_file).read_text(encoding="utf-8")
    if commit:
        text = re.sub(r'^REF = "[^"]*"', f'REF = "{commit}"', text, count=1, flags=re.M)
    return text.rstrip() + "\n"


def commit_of(root: Path) -> str | None:
    """The checked-out commit of ``root`` (``None`` outside git)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def plain_notebook(
    app: Sphinx, doctree: nodes.document, docname: str, commit: str | None
) -> dict[str, Any] | None:
    """The reader's notebook of ``docname`` (``None`` for a page that is not a notebook),
    its set-up cell pinned to ``commit`` (the one that builds the pages)."""
    env = app.env
    source = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    if not source.exists():
        return None
    raw = json.loads(source.read_text(encoding="utf-8"))
    nb = executed_cells(raw, getattr(app.config, "nb_execution_cache_path", None))
    code = {
        i: _code_cell(c, with_outputs=True)
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code"
    }
    fignumbers = env.toc_fignumbers.get(docname, {})
    exercise_numbers: dict[str, str] = {}
    registry = getattr(env, "sphinx_exercise_registry", {})
    for label, info in registry.items():
        if str(info.get("type", "")).startswith("exercise"):
            number = env.toc_fignumbers.get(info.get("docname"), {}).get("exercise", {})
            exercise_numbers[label] = ".".join(map(str, number.get(label, ())))
    base = app.config.html_baseurl.rstrip("/") + "/"
    writer = NotebookWriter(
        docname, code, fignumbers, base + docname + ".html", Path(app.srcdir), exercise_numbers
    )
    lines = raw.get("metadata", {}).get("source_map", [])
    for index, cell in enumerate(raw["cells"]):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and NOTEBOOK_ONLY_TAG in tags:
            line = lines[index] if index < len(lines) else 0
            writer.pending.append((line, _code_cell(cell, with_outputs=False)))
    cells = writer.render(doctree)
    setup = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {"tags": [SETUP_TAG]},
        "outputs": [],
        "source": setup_source(app, commit),
    }
    # The kernel's own description (ipykernel's), so that opening the notebook in Jupyter
    # does not rewrite its metadata and mark it modified.
    metadata = {
        "kernelspec": {
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "name": "python3",
        },
        "language_info": dict(nb.get("metadata", {}).get("language_info", {"name": "python"})),
        "ccmc_lite": {"page": base + docname + ".html", "commit": commit},
    }
    cells = [setup, *cells]
    for k, cell in enumerate(cells):
        cell["id"] = f"c{k:03d}"
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
