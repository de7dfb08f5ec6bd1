"""Numbers and figures from the chapters' code into the book's prose (the build only).

The book quotes computed values in its text with myst-nb's *glue* mechanism: a code cell
records a value under a name, and the prose pastes it (``{glue:text}`name:.3f```). The cells
that glue are build-only (tagged ``remove-cell``): they are left out of every notebook a
reader gets (downloaded, Colab, Binder, student), so the package never sees them and readers'
code never imports this module. The chapters call :func:`glue` from here instead of
``myst_nb.glue`` because the tests execute each chapter in the reader's environment, where
myst-nb (a build dependency) is not installed.

* **Inside the book build** (the environment variable ``CCMC_BOOK_BUILD`` is ``1``; the book's
  Sphinx extension and the chapter tests set it), :func:`glue` writes exactly the output that
  ``myst_nb.glue`` writes, so the build pastes the value into the prose.
* **Anywhere else** (e.g. a chapter's MyST source opened with Jupytext in the repository) it
  shows the value when ``display=True``, and a figure even when ``display=False``.

Every number or string glued in this process is also kept, by name, in a registry
(:func:`glued_values`): a chapter run at the ``paper`` profile stores it as a snapshot
(:mod:`tools.snapshots`), and the book-profile page compares its own values with that
snapshot.
"""

from __future__ import annotations

import numbers
import os
from typing import Any

from ccmc_lite.core.validation import check_bool

__all__ = ["BOOK_BUILD_ENV", "glue", "glued_values"]

#: Set to ``1`` while the book is built (by the book's Sphinx extension and the tests).
BOOK_BUILD_ENV = "CCMC_BOOK_BUILD"
_GLUE_PREFIX = "application/papermill.record/"  # myst_nb.ext.glue.GLUE_PREFIX


def _in_book_build() -> bool:
    """True while the book is being built (``$CCMC_BOOK_BUILD`` is ``1``)."""
    return os.environ.get(BOOK_BUILD_ENV, "").strip() == "1"


_GLUED: dict[str, bool | int | float | str] = {}  # name -> plain scalar, in glue order


def _plain_scalar(value: Any) -> bool | int | float | str | None:
    """``value`` as a plain Python bool, int, float or str; ``None`` for anything else."""
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)  # a 0-d numpy array or torch tensor
    if callable(item) and getattr(value, "ndim", None) == 0:
        return _plain_scalar(item())
    return None


def glued_values() -> dict[str, bool | int | float | str]:
    """The numbers and strings glued so far in this process: ``name -> value`` (a copy).

    Figures and other objects are not kept. A name glued twice keeps its last value.
    """
    return dict(_GLUED)


def _is_figure(value: Any) -> bool:
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - matplotlib is a runtime dependency
        return False
    return isinstance(value, Figure)


def glue(name: str, value: Any, display: bool = True) -> None:
    """Record ``value`` under ``name`` for the book's prose; show it where that helps.

    Parameters
    ----------
    name : str
        The glue key the prose refers to, e.g. ``"p2c3-steps-per-s"``.
    value : object
        A number, a string, a figure or anything IPython can display.
    display : bool
        Also show the value under the cell (as ``myst_nb.glue``).

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    ValueError
        If ``name`` is empty or contains white space.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string; got {type(name).__name__}")
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"name must be a non-empty string without spaces; got {name!r}")
    check_bool("display", display)
    scalar = _plain_scalar(value)
    if scalar is not None:
        _GLUED[name] = scalar
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    if not _in_book_build():
        if display or _is_figure(value):
            ipy_display(value)
        return
    mimebundle, metadata = format_display_data(value)
    prefix = "" if display else _GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + k: v for k, v in mimebundle.items()}, raw=True, metadata=metadata)
