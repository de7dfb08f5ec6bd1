"""Helpers shared by the book tests: the chapter list, the reader's environment, execution.

**The reader's environment.** Chapters and student notebooks are executed the way a reader
runs them: in a kernel of ``_build/venvs/reader``, a virtual environment that holds only
what ``pip install <this repository>`` installs (the runtime dependencies, at the versions
of ``requirements/lock.txt``) plus ``ipykernel`` to run notebooks — no myst-nb, no
jupytext, no book extras. :func:`ensure_reader_venv` creates it (a minute or two, cold) and
re-installs only the package when its sources change.

**One execution per chapter.** Each chapter is executed once, as its downloadable ``.ipynb``
(the book's set-up cell, then the chapter's cells as myst-nb reads them), and the result is
stored in the build's jupyter-cache under the key myst-nb looks up (the code cells and
their metadata without the set-up cell, and the kernelspec). The ``-W`` book build that runs
later in the same test session then renders from the cache instead of executing every
chapter a second time. Chapters run with ``CCMC_BOOK_BUILD=1`` so that glued values reach
the cache; student notebooks run without it, as a reader's notebook does.

**Training once per session.** The kernels start with the repository's replay cache
installed (``tools/replay.py``, an IPython extension that the kernel configuration in
:data:`KERNEL_CONFIG_DIR` loads; the notebooks do not see it) and ``CCMC_RESULT_CACHE`` at
``_build/result_cache`` (emptied when the pool starts): every training call
(:func:`ccmc_lite.train_runs`) and Part I's long simulations and fits
(``sample_trajectories``, ``fit_newton``) store their results there, and a later call with
the same fingerprint (arguments by value, the package's sources, library versions, thread
count and global random states) replays it. The pool runs all chapters before any student
notebook, so a student notebook (its chapter less the solutions) replays the training its
chapter did, and still executes every cell.

**Two kernels at a time, from the start.** :func:`start_pool` (called by ``conftest.py``
as soon as the tests are collected) executes the selected notebooks in a pool of
:data:`KERNELS` kernels (each limited to one thread for torch and BLAS), longest first,
while the unit tests run in the main process; each chapter test then waits for its own
notebook (:func:`notebook_result`). Otherwise the unit-test phase, one process, would
leave a core of a 2-core machine idle (``cold_ci_run_s`` in ``benchmarks/results.json``
is the measured effect). ``CCMC_TEST_EARLY_POOL=0`` starts the pool at the first chapter
test instead.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = ROOT / "_build"
HTML_DIR = BUILD_DIR / "html"
CACHE_DIR = BUILD_DIR / ".jupyter_cache"
CELL_TIMEOUT_S = 900
LOCK = ROOT / "requirements" / "lock.txt"
READER_VENV = BUILD_DIR / "venvs" / "reader"
#: Where the notebook kernels store and replay training results (``tools/replay.py``).
RESULT_CACHE_DIR = BUILD_DIR / "result_cache"
RESULT_CACHE_ENV = "CCMC_RESULT_CACHE"
#: The kernels' IPython directory: a configuration that installs the replay cache.
KERNEL_CONFIG_DIR = BUILD_DIR / "ipython"
_KERNEL_CONFIG = """\
# Written by tests/book_tools.py: the test session's kernels replay repeated computations
# from the result cache (tools/replay.py), loaded as an IPython extension: after the kernel
# has chosen matplotlib's inline backend, which importing the package here would pre-empt.
import sys
sys.path.append({root!r})
c.InteractiveShellApp.extensions = ["tools.replay"]
"""
KERNELS = int(os.environ.get("CCMC_TEST_KERNELS", "2"))
SETUP_SOURCE = (ROOT / "book" / "_colab_setup.py").read_text(encoding="utf-8")

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import booktools  # noqa: E402 (the standard library only: the floor test imports this too)

BOOK_BUILD_ENV = "CCMC_BOOK_BUILD"  # as ccmc_book.BOOK_BUILD_ENV and tools.gluing
SETUP_TAG = "ccmc-setup"  # as ccmc_book.SETUP_TAG


def toc_files() -> list[Path]:
    """Every source file listed in ``_toc.yml`` (root first), as absolute paths."""
    return [e.path for e in booktools.toc_entries(ROOT)]


def chapter_notebooks() -> list[Path]:
    """The executable pages of the book, in reading order."""
    return booktools.chapter_notebooks(ROOT)


def taught_chapters() -> list[Path]:
    """The chapters of Parts I-III and the closing chapter (each has exercises)."""
    return booktools.taught_chapters(ROOT)


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# --------------------------------------------------------------------------- environments


def venv_python(path: Path) -> Path:
    return path / ("Scripts" if os.name == "nt" else "bin") / "python"


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
    return h.hexdigest()


def project_metadata() -> str:
    """The parts of ``pyproject.toml`` that change what ``pip install`` does (not tool config)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python 3.10: every change to pyproject.toml counts
        return json.dumps({"project": {"dependencies": [text]}})
    data = tomllib.loads(text)
    keep = {
        "build-system": data.get("build-system"),
        "project": data.get("project"),
        "setuptools": data.get("tool", {}).get("setuptools"),
    }
    return json.dumps(keep, sort_keys=True)


def package_digest() -> str:
    """Hash of what ``pip install <repo>`` installs from this checkout."""
    files = sorted((ROOT / "ccmc_lite").rglob("*"))
    return _digest(
        project_metadata(),
        *(
            f"{rel(f)}\0".encode() + f.read_bytes()
            for f in files
            if f.is_file() and "__pycache__" not in f.parts
        ),
    )


def copy_package_source(dest: Path) -> Path:
    """What a ``git+https`` install sees: the package, its metadata and nothing else.

    Installing from a copy keeps setuptools' ``build/`` and ``*.egg-info`` out of the checkout.
    """
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "ccmc_lite", dest / "ccmc_lite", ignore=shutil.ignore_patterns("__pycache__")
    )
    return dest


def pip(python: Path, *args: str | Path) -> None:
    cmd = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


@functools.cache
def dev_module():
    """``dev.py`` as a module (standard library only): its installer and lock reader."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_ccmc_dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The reader, floor and Binder environments are built in background threads while
    # other tests run: their "[dev] $ ..." lines go to the real stderr, not into the
    # stdout that a test happens to be capturing at that moment.
    module.say = lambda msg: print(f"[dev] {msg}", file=sys.__stderr__, flush=True)
    return module


def lock_pin(name: str) -> str:
    pin = dev_module().lock_pin(name)
    if pin is None:
        raise LookupError(f"{name} is not pinned in {LOCK}")
    return pin


def install_package(python: Path, *pip_args: str) -> None:
    """``pip install <repo>`` (not editable) into ``python``'s environment."""
    with tempfile.TemporaryDirectory(prefix="ccmc-src-") as tmp:
        pip(
            python,
            "install",
            "--no-compile",
            "--force-reinstall",
            "--no-deps",
            copy_package_source(Path(tmp)),
        )


_READER_LOCK = threading.Lock()


@contextlib.contextmanager
def _venv_lock(name: str):
    """Hold ``_build/venvs/.<name>.lock`` (an ``flock``) while an environment is made or checked.

    ``dev.py test`` creates the environments in a second process while it installs
    ``.venv`` (see :func:`prepare_environments`); the tests then wait here for it instead of
    creating the same environment a second time. Without ``fcntl`` (Windows) only the
    threads of one process are kept apart.
    """
    path = BUILD_DIR / "venvs" / f".{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            import fcntl
        except ImportError:
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_reader_venv() -> Path:
    """The reader's environment (thread- and process-safe: the pool, the tests and
    ``dev.py``'s background set-up share it)."""
    with _READER_LOCK, _venv_lock("reader"):
        return _ensure_reader_venv()


def prepare_environments() -> None:
    """Create (or refresh) the reader's, Binder's and the floor's environments.

    ``python3 dev.py test`` runs this in a background process while it installs ``.venv``:
    each environment is a pip install of a minute or so on one core, so the set-up of
    both runs on both cores instead of the reader's delaying the first notebook.
    """
    ensure_binder_venv()  # the reader's first
    ensure_floor_venv()


def _ensure_reader_venv() -> Path:
    """The reader's environment: ``pip install -c requirements/lock.txt <repo>`` + ipykernel.

    Created when missing or when the lock file, the declared dependencies or this Python
    changed;
    when only the package's sources changed, just the package is re-installed. Returns the
    environment's Python. A kernelspec pointing at it lives in ``share/jupyter/kernels``.
    """
    python = venv_python(READER_VENV)
    env_stamp = READER_VENV / ".ccmc-env-stamp"
    pkg_stamp = READER_VENV / ".ccmc-package-stamp"
    deps = json.loads(project_metadata())["project"].get("dependencies", [])
    want_env = _digest(LOCK.read_bytes(), "\n".join(deps), sys.version)
    fresh = not (python.exists() and env_stamp.exists() and env_stamp.read_text() == want_env)
    if fresh:
        start = time.perf_counter()
        venv.EnvBuilder(with_pip=True, clear=True).create(READER_VENV)
        # torch first, on its own, exactly pinned: pip takes the CPU wheel from local disk
        # where there is one (see README), instead of resolving a multi-GB CUDA build.
        pip(python, "install", "--no-compile", "-c", LOCK, lock_pin("torch"))
        with tempfile.TemporaryDirectory(prefix="ccmc-src-") as tmp:
            src = copy_package_source(Path(tmp))
            pip(python, "install", "--no-compile", "-c", LOCK, src, lock_pin("ipykernel"))
        pip(python, "check")
        subprocess.run(
            [str(python), "-m", "ipykernel", "install", "--prefix", str(READER_VENV)],
            check=True,
            capture_output=True,
        )
        env_stamp.write_text(want_env)
        pkg_stamp.write_text(package_digest())
        (READER_VENV / ".ccmc-created-seconds").write_text(f"{time.perf_counter() - start:.1f}")
    elif not pkg_stamp.exists() or pkg_stamp.read_text() != package_digest():
        install_package(python)
        pkg_stamp.write_text(package_digest())
    return python


BINDER_VENV = BUILD_DIR / "venvs" / "binder"
BINDER_REQUIREMENTS = ROOT / "requirements" / "binder.txt"


def _purelib(python: Path) -> str:
    """The site-packages folder of the environment whose interpreter is ``python``."""
    return subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def ensure_binder_venv() -> Path:
    """JupyterLab as Binder runs it: the reader's environment + ``requirements/binder.txt``.

    To stay cheap it does not install torch & co. a second time: a ``.pth`` file puts the
    reader environment's ``site-packages`` on its path, and uv installs JupyterLab and its
    dependencies from its cache (as dev.py installs ``.venv``; pip spent about 40 s of CPU
    here). Binder itself installs with pip from ``environment.yml``; what this environment
    checks is JupyterLab's behaviour, not the installer. Returns the environment's Python;
    run JupyterLab with :func:`binder_env`.
    """
    reader = ensure_reader_venv()
    with _venv_lock("binder"):
        return _ensure_binder_venv(reader)


def _ensure_binder_venv(reader: Path) -> Path:
    python = venv_python(BINDER_VENV)
    stamp = BINDER_VENV / ".ccmc-env-stamp"
    want = _digest(
        (READER_VENV / ".ccmc-env-stamp").read_text(),
        BINDER_REQUIREMENTS.read_bytes(),
        LOCK.read_bytes(),
    )
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    venv.EnvBuilder(with_pip=True, clear=True).create(BINDER_VENV)
    Path(_purelib(python), "ccmc_reader_env.pth").write_text(_purelib(reader) + "\n")
    dev_module().install_pinned(python, ["-c", LOCK, "-r", BINDER_REQUIREMENTS])
    stamp.write_text(want)
    return python


def binder_env(home: Path) -> dict[str, str]:
    """Environment for JupyterLab: ``$HOME`` is the repository (as on Binder)."""
    env = reader_env(book_build=False)
    for key in list(env):
        if key.startswith("JUPYTER"):
            del env[key]
    env["HOME"] = str(home)
    # The reader environment's share/jupyter: its labextensions (ipywidgets) and kernel.
    env["JUPYTER_PATH"] = str(READER_VENV / "share" / "jupyter")
    return env


def reader_kernel_manager_class():
    """An ``AsyncKernelManager`` whose ``python3`` kernel is the reader environment's."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    kernels = READER_VENV / "share" / "jupyter" / "kernels"

    class ReaderKernelManager(AsyncKernelManager):
        @default("kernel_spec_manager")
        def _reader_specs(self):
            return KernelSpecManager(kernel_dirs=[str(kernels)], ensure_native_kernel=False)

    return ReaderKernelManager


def reader_env(book_build: bool) -> dict[str, str]:
    """The kernel's environment: the caller's, less anything pointing at this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", BOOK_BUILD_ENV)}
    env.pop("VIRTUAL_ENV", None)
    # Two kernels share the machine: one thread each for torch and BLAS.
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if book_build:
        env[BOOK_BUILD_ENV] = "1"  # glue() records values for the build's cache
    return env


# --------------------------------------------------------------------------- execution


class NotebookFailed(AssertionError):
    """A cell raised: the message names the notebook, the cell and the error."""


@dataclass
class ExecutedNotebook:
    name: str
    path: Path
    seconds: float
    notebook: object  # nbformat.NotebookNode
    error: str | None = None
    extra: dict = field(default_factory=dict)

    def check(self) -> ExecutedNotebook:
        if self.error:
            raise NotebookFailed(self.error)
        return self

    def code_cells(self):
        return [c for c in self.notebook.cells if c.cell_type == "code"]  # type: ignore[attr-defined]

    def stream_text(self, name: str) -> str:
        out = []
        for cell in self.code_cells():
            for o in cell.get("outputs", []):
                if o.get("output_type") == "stream" and o.get("name") == name:
                    out.append(o.get("text", ""))
        return "".join(out)


def cell_text(cell) -> str:
    """Everything a cell showed as text: streams and ``text/plain`` results."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif o.get("output_type") in ("execute_result", "display_data"):
            parts.append(o.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def setup_cell():
    import nbformat

    cell = nbformat.v4.new_code_cell(SETUP_SOURCE.rstrip() + "\n")
    cell.metadata["tags"] = [SETUP_TAG]
    return cell


def downloadable_notebook(path: Path):
    """The chapter as the book's download button gives it: set-up cell + myst-nb's cells."""
    from myst_nb.core.read import myst_nb_reader_plugin

    nb = myst_nb_reader_plugin(str(path))
    return nb, _with_setup(nb)


def _with_setup(nb):
    out = copy.deepcopy(nb)
    out.cells.insert(0, setup_cell())
    return out


#: Niceness of the student notebooks' kernels. They run beside the chapters and the book
#: build, which decide when the session ends: students take only the CPU left over.
STUDENT_NICENESS = 19


def lower_priority(pid: int, niceness: int) -> None:
    """Give process ``pid`` the CPU only when others leave it: its nice value and, where
    Linux groups processes by session (``/proc/sys/kernel/sched_autogroup_enabled``), its
    session's. A kernel runs in a session of its own, and between sessions the scheduler
    shares the CPU equally whatever the processes' nice values: without the second step a
    niced kernel still takes a share equal to the book build's."""
    os.setpriority(os.PRIO_PROCESS, pid, niceness)
    try:
        if os.getsid(pid) == os.getsid(0):
            return  # our own session: its group holds the build too
        Path(f"/proc/{pid}/autogroup").write_text(str(niceness))
    except OSError:  # no autogroups (other kernels, macOS) or not permitted: nice alone
        pass


def replaying_ipython_dir() -> Path:
    """An IPython directory whose kernel configuration installs ``tools/replay.py``."""
    config = KERNEL_CONFIG_DIR / "profile_default" / "ipython_kernel_config.py"
    text = _KERNEL_CONFIG.format(root=str(ROOT))
    if not config.exists() or config.read_text(encoding="utf-8") != text:
        config.parent.mkdir(parents=True, exist_ok=True)
        partial = config.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
        partial.write_text(text, encoding="utf-8")
        partial.replace(config)  # atomic: a kernel starting beside never reads half of it
    return KERNEL_CONFIG_DIR


def execute_in_reader_kernel(
    nb, name: str, cwd: Path, book_build: bool, niceness: int = 0
) -> ExecutedNotebook:
    """Run ``nb`` top to bottom in the reader environment's kernel (in place); a positive
    ``niceness`` lowers the kernel process's CPU priority."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    booktools.patch_kernel_polling()  # as the build does
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        allow_errors=False,
        record_timing=False,  # as myst-nb: timing metadata would change the cache hash
        kernel_name="python3",
        kernel_manager_class=reader_kernel_manager_class(),
        resources={"metadata": {"path": str(cwd)}},
    )
    if niceness:

        def renice(notebook) -> None:  # nbclient's hook once the kernel is up
            process = getattr(client.km.provisioner, "process", None)
            if process is not None:
                lower_priority(process.pid, niceness)

        client.on_notebook_start = renice
    start = time.perf_counter()
    error = None
    env = reader_env(book_build)
    env[RESULT_CACHE_ENV] = str(RESULT_CACHE_DIR)  # see start_pool
    env["IPYTHONDIR"] = str(replaying_ipython_dir())
    try:
        client.execute(env=env)
    except CellExecutionError as err:
        index = next(
            (i for i, c in enumerate(nb.cells) if c.cell_type == "code" and _has_error(c)), None
        )
        where = f"cell {index}" if index is not None else "a cell"
        source = nb.cells[index].source if index is not None else ""
        error = f"{name}: {where} failed in the reader's environment:\n{source}\n---\n{err}"
    except Exception as err:  # kernel died, timeout, ...
        error = f"{name}: execution stopped in the reader's environment: {err!r}"
    return ExecutedNotebook(name, cwd, time.perf_counter() - start, nb, error)


def _has_error(cell) -> bool:
    return any(o.get("output_type") == "error" for o in cell.get("outputs", []))


_CACHE_WRITE_LOCK = threading.Lock()


def execute_chapter(path: Path) -> ExecutedNotebook:
    """Execute a chapter's downloadable notebook in the reader's kernel; cache it for the build.

    The cached notebook is the one myst-nb reads from the source (the set-up cell and its
    outputs are dropped and execution counts shifted back), so the build finds it.
    """
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    source_nb, download = downloadable_notebook(path)
    done = execute_in_reader_kernel(download, rel(path), path.parent, book_build=True)
    if done.error:
        return done
    cached = copy.deepcopy(source_nb)
    for key in ("language_info", "widgets"):  # what myst-nb merges from the cache
        if key in download.metadata:  # (the widgets' state is what the pages embed)
            cached.metadata[key] = copy.deepcopy(download.metadata[key])
    for target, ran in zip(cached.cells, download.cells[1:], strict=True):
        if target.cell_type != "code":
            continue
        target.outputs = copy.deepcopy(ran.outputs)
        target.execution_count = ran.execution_count - 1 if ran.execution_count else None
        for o in target.outputs:
            if o.get("execution_count"):
                o["execution_count"] -= 1
    CACHE_DIR.parent.mkdir(parents=True, exist_ok=True)
    # One writer at a time: jupyter-cache's pruning after a write lists the records to keep
    # and the records to delete in two queries, so a record that another kernel's thread
    # adds in between is deleted before its notebook is written (KeyError, seen once when
    # two chapters finished together).
    with _CACHE_WRITE_LOCK:
        cache = get_cache(str(CACHE_DIR))
        cache.cache_notebook_bundle(
            CacheBundleIn(cached, str(path), data={"execution_seconds": done.seconds}),
            check_validity=False,
            overwrite=True,
        )
    done.extra["cached"] = cached
    return done


#: Cells hidden on the page but kept in the reader's notebooks (``plain_notebooks``).
NOTEBOOK_ONLY_TAG = booktools.NOTEBOOK_ONLY_TAG


def shown_cells(chapter: Path, solutions: bool = True) -> list:
    """The cells of a chapter that its published notebook keeps, from the source, in order.

    Those are the cells the page shows and the ``notebook-only`` ones (not the other
    ``remove-cell`` cells); with ``solutions=False``, less the solutions, as in the student
    notebook. The build writes the published notebooks from the resolved pages; the tests
    execute these cells before the build exists, and check after it that the code cells
    are the same (``tests/book/test_published_notebooks.py``).
    """
    import jupytext

    text = chapter.read_text(encoding="utf-8")
    if not solutions:
        text = booktools.strip_solutions(text)
    nb = jupytext.reads(text, fmt="md:myst")
    return [
        c
        for c in nb.cells
        if "remove-cell" not in (tags := c.metadata.get("tags", [])) or NOTEBOOK_ONLY_TAG in tags
    ]


def student_notebook(chapter: Path, out_dir: Path) -> Path:
    """A taught chapter's student notebook as a student runs it: the set-up cell, then the
    cells of :func:`shown_cells` without solutions; no outputs."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [setup_cell(), *shown_cells(chapter, solutions=False)]
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{booktools.student_name(rel(chapter.with_suffix('')))}.ipynb"
    nbformat.write(nb, str(target))
    return target


def execute_student(chapter: Path) -> ExecutedNotebook:
    import nbformat

    out_dir = BUILD_DIR / "student_notebooks"
    target = student_notebook(chapter, out_dir)
    nb = nbformat.read(str(target), as_version=4)
    name = f"student notebook {rel(target)} (from {rel(chapter)})"
    return execute_in_reader_kernel(
        nb, name, chapter.parent, book_build=False, niceness=STUDENT_NICENESS
    )


# --------------------------------------------------------------------------- the job pool

#: Filled by conftest.py after collection: (kind, path) of every selected notebook test.
SELECTED: list[tuple[str, Path]] = []
_POOL: dict[tuple[str, Path], concurrent.futures.Future] = {}
_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None
_STUDENT_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None
_JOBS = {"chapter": execute_chapter, "student": execute_student}


def _chapter_seconds(path: Path) -> float:
    """The chapter's measured run time (``benchmarks/results.json``), 0 if none."""
    results = ROOT / "benchmarks" / "results.json"
    if not results.exists():
        return 0.0
    data = json.loads(results.read_text())
    return float(data.get(f"chapter_book_s[{rel(path)}]", 0.0) or 0.0)


#: When each pool job and the book build ran, in seconds since the pool started: written
#: to ``_build/pool_timeline.json`` at the end of the session (where the tests' time goes).
TIMELINE: list[dict[str, object]] = []
_T0 = time.perf_counter()
_T0_WALL = time.time()


def _mark(kind: str, name: str, start: float) -> None:
    end = time.perf_counter()
    TIMELINE.append(
        {"kind": kind, "name": name, "start": round(start - _T0, 1), "end": round(end - _T0, 1)}
    )


def _run_job(kind: str, path: Path) -> ExecutedNotebook:
    ensure_reader_venv()  # once (locked); the first job of the pool creates it
    chapter = _POOL.get(("chapter", path))
    if kind == "student" and chapter is not None:
        # Its chapter may still run: wait for the training results it stores.
        concurrent.futures.wait([chapter])
    start = time.perf_counter()
    try:
        return _JOBS[kind](path)
    finally:
        _mark(kind, rel(path), start)


def start_pool(extra: tuple[str, Path] | None = None) -> None:
    """Submit every selected notebook (and ``extra``) that is not yet queued, longest first.

    Chapters run ``KERNELS`` at a time, longest first (shortest tail). Student notebooks
    have lanes of their own, as many, at the lowest priority (:data:`STUDENT_NICENESS`):
    each starts once its chapter has run (it replays that chapter's training from the
    result cache), in the chapters' order, and takes only the CPU the chapters, the unit
    tests and the book build leave.
    """
    global _EXECUTOR, _STUDENT_EXECUTOR
    if _EXECUTOR is None:
        shutil.rmtree(RESULT_CACHE_DIR, ignore_errors=True)  # replays come from this session only
        _EXECUTOR = concurrent.futures.ThreadPoolExecutor(KERNELS, "ccmc-kernel")
        _STUDENT_EXECUTOR = concurrent.futures.ThreadPoolExecutor(KERNELS, "ccmc-student")
    assert _STUDENT_EXECUTOR is not None
    jobs = [k for k in SELECTED if k not in _POOL]
    if extra is not None and extra not in _POOL and extra not in jobs:
        jobs.append(extra)
    jobs.sort(key=lambda k: -_chapter_seconds(k[1]))  # a student notebook in its chapter's place
    for job in jobs:
        executor = _STUDENT_EXECUTOR if job[0] == "student" else _EXECUTOR
        _POOL[job] = executor.submit(_run_job, *job)
    if BUILD_WANTED:
        chapters = [f for (kind, _), f in _POOL.items() if kind == "chapter"]
        for future in chapters:
            future.add_done_callback(lambda _f, c=chapters: _build_when_done(c))


# --------------------------------------------------------------------------- the book build

#: Set by conftest.py when a selected test needs the built book.
BUILD_WANTED = False
_BUILD: dict[str, subprocess.Popen] = {}
_BUILD_LOCK = threading.Lock()


def start_book_build() -> subprocess.Popen:
    """Start the book's ``-W -n`` build in the background once (log: ``_build/build.log``).

    The build renders the chapters from the cache their test runs fill, so it starts as
    soon as every chapter has run (the student notebooks may still be running: they do not
    write that cache), or when a test first needs it.
    """
    with _BUILD_LOCK:
        if "proc" not in _BUILD:
            jb = Path(sys.executable).with_name("jupyter-book")
            BUILD_DIR.mkdir(exist_ok=True)
            with (BUILD_DIR / "build.log").open("w") as log:
                proc = subprocess.Popen(
                    [str(jb), "build", str(ROOT), "-W", "-n", "--keep-going"],
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            proc.started_at = time.time()  # type: ignore[attr-defined]  # older files: stale
            _BUILD["proc"] = proc
        return _BUILD["proc"]


def _build_when_done(chapters: list[concurrent.futures.Future]) -> None:
    if all(f.done() for f in chapters) and not any(
        f.exception() or f.result().error for f in chapters
    ):
        start_book_build()


def stop_book_build() -> None:
    proc = _BUILD.get("proc")
    if proc is not None and proc.poll() is None:  # the session ended before anything waited
        proc.kill()
        proc.wait()


def notebook_result(kind: str, path: Path) -> ExecutedNotebook:
    """The executed notebook ``(kind, path)``; starts the pool if it is not running yet."""
    key = (kind, path)
    if key not in _POOL:
        start_pool(extra=key)
    return _POOL[key].result()


def shutdown_pool() -> None:
    for executor in (_EXECUTOR, _STUDENT_EXECUTOR):
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
    proc = _BUILD.get("proc")
    if proc is not None and proc.poll() is not None and hasattr(proc, "started_at"):
        ended = getattr(proc, "ended_at", time.time())  # when a test first had it
        start, end = proc.started_at - _T0_WALL, ended - _T0_WALL
        TIMELINE.append({"kind": "build", "name": "jupyter-book build", "start": round(start, 1),
                         "end": round(end, 1)})  # fmt: skip
    if TIMELINE:
        BUILD_DIR.mkdir(exist_ok=True)
        ordered = sorted(TIMELINE, key=lambda e: e["start"])  # type: ignore[arg-type, return-value]
        (BUILD_DIR / "pool_timeline.json").write_text(json.dumps(ordered, indent=1))


# --------------------------------------------------------------------------- the floor

FLOOR_VENV = BUILD_DIR / "venvs" / "floor"
#: Test tooling the floor run needs, at the lock's versions (not runtime dependencies).
FLOOR_TOOLS = ("pytest", "pytest-timeout", "hypothesis", "pyyaml", "jupytext", "nbclient")
#: Where the floor cannot be the declared bound, what is installed instead, and why.
FLOOR_EXCEPTIONS = {
    "torch": (
        "the lock's CPU build: PyPI serves torch for Linux only as CUDA builds of several GB "
        "(too slow for CI), and the machines here reach no other index. Set "
        "CCMC_FLOOR_TORCH=bound (with a CPU index in PIP_EXTRA_INDEX_URL) to test the bound."
    ),
}


def runtime_bounds() -> dict[str, str]:
    """``{name: lower bound}`` of every runtime dependency in ``pyproject.toml``."""
    import re

    deps = json.loads(project_metadata())["project"]["dependencies"]
    bounds = {}
    for dep in deps:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)\s*", dep)
        if not m:
            raise ValueError(f"runtime dependency {dep!r} is not of the form name>=version")
        bounds[m.group(1).lower()] = m.group(2)
    return bounds


def _version_key(version: str) -> tuple:
    import re

    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0]))


def floor_requirements(exception_requires: dict[str, str] | None = None) -> list[str]:
    """Each runtime dependency pinned at its lower bound (see :data:`FLOOR_EXCEPTIONS`).

    ``exception_requires`` (``{name: minimum}``) are what the installed exceptions require of
    the other dependencies (torch 2.13 needs a newer sympy than torch 2.1): such a floor is
    raised to that minimum, since no environment can have both.
    """
    raised = exception_requires or {}
    reqs = []
    for name, bound in runtime_bounds().items():
        if name in FLOOR_EXCEPTIONS and os.environ.get(f"CCMC_FLOOR_{name.upper()}") != "bound":
            reqs.append(lock_pin(name))
        elif name in raised and _version_key(raised[name]) > _version_key(bound):
            reqs.append(f"{name}=={raised[name]}")
        else:
            reqs.append(f"{name}=={bound}")
    return reqs


def _minimums_required_by(python: Path, package: str) -> dict[str, str]:
    """``{dependency: minimum}`` from an installed package's metadata (``name>=x`` parts)."""
    code = f"import importlib.metadata as m, json;print(json.dumps(m.requires({package!r}) or []))"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    import re

    found = {}
    for req in json.loads(out.stdout):
        if ";" in req and "extra" in req.split(";", 1)[1]:
            continue
        m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[.*?\])?\s*([^;]*)", req)
        if not m:
            continue
        low = re.search(r"(?:>=|==)\s*([0-9][^,\s]*)", m.group(2))
        if low:
            found[m.group(1).lower()] = low.group(1)
    return found


def ensure_floor_venv() -> Path:
    """``_build/venvs/floor``: runtime dependencies at their lower bounds + test tooling.

    Keyed on the bounds, the tooling pins and this Python: re-created only when one changes.
    The package itself is not installed: the floor run imports it from this checkout.
    The floors actually installed are written to ``floor.json`` in the environment.
    """
    with _venv_lock("floor"):
        return _ensure_floor_venv()


def _ensure_floor_venv() -> Path:
    python = venv_python(FLOOR_VENV)
    stamp = FLOOR_VENV / ".ccmc-env-stamp"
    tools = [lock_pin(t) for t in FLOOR_TOOLS]
    want = _digest(*floor_requirements(), *tools, sys.version)
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    start = time.perf_counter()
    venv.EnvBuilder(with_pip=True, clear=True).create(FLOOR_VENV)
    exceptions = [r for r in floor_requirements() if r.split("==")[0] in FLOOR_EXCEPTIONS]
    raised: dict[str, str] = {}
    for req in exceptions:  # alone first (torch: the CPU build from local disk)
        pip(python, "install", "--no-compile", "--no-deps", req)
        raised.update(_minimums_required_by(python, req.split("==")[0]))
    reqs = floor_requirements(raised)
    # With uv, as dev.py installs .venv (pip took 40 s of CPU here, resolving ipywidgets
    # 7's old dependencies, against uv's few seconds); the reader's environment is pip's.
    dev_module().install_pinned(python, [*reqs, *tools, lock_pin("ipykernel")])
    pip(python, "check")
    subprocess.run(
        [str(python), "-m", "ipykernel", "install", "--prefix", str(FLOOR_VENV)],
        check=True,
        capture_output=True,
    )
    (FLOOR_VENV / "floor.json").write_text(json.dumps(reqs, indent=1))
    stamp.write_text(want)
    (FLOOR_VENV / ".ccmc-created-seconds").write_text(f"{time.perf_counter() - start:.1f}")
    return python


def floor_env() -> dict[str, str]:
    env = reader_env(book_build=False)
    env["PYTHONPATH"] = str(ROOT)  # the package from this checkout, its dependencies at the floor
    env["HYPOTHESIS_PROFILE"] = "floor"
    env["JUPYTER_PATH"] = str(FLOOR_VENV / "share" / "jupyter")  # its python3 kernel
    return env
