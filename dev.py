#!/usr/bin/env python3
"""Project tasks for ccmc_lite. Needs only Python >= 3.10 (3.11 recommended) and this repo.

    python3 dev.py book     build the whole book into _build/html (executes every chapter)
    python3 dev.py test     lint (see ``lint``) and every test: unit, property, minimum
                            versions, chapters and student notebooks in a reader's environment,
                            -W build, browser, Binder landing (the tests create
                            _build/venvs/{reader,floor,binder})
    python3 dev.py bench    run the benchmark scripts and write benchmarks/results.json
    python3 dev.py paper-runs [NAMES]  re-run experiments at the papers' settings (stored files)
    python3 dev.py paper-chapters [CHAPTERS]  run chapters at the paper profile (stored snapshots)
    python3 dev.py gpu-runs [NAMES]  on a CUDA machine: stored sweeps re-run on the GPU, and
                            the Fig. 4 grid's step timed there (files shipped with the package)
    python3 dev.py fmt [--check]  format the chapters' code cells (ruff, 88 columns)
    python3 dev.py lint     ruff, ruff format, the chapters' code cells and mypy: the first
                            step of ``test`` (and the pre-commit hooks)
    python3 dev.py student  student notebooks (no solutions, no outputs) from the built book's
                            published notebooks to student_notebooks/ (standard library only)
    python3 dev.py lock     re-pin requirements/lock.txt from the current .venv
    python3 dev.py env      only create/refresh .venv (the other commands do it first)

Each command but ``student`` first makes sure ``.venv`` exists and matches ``requirements/lock.txt``
(exact pins) and ``pyproject.toml``; it is created or refreshed when either changes.
Extra arguments after ``test`` go to pytest, e.g. ``python3 dev.py test -m "not chapter"``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
LOCK = ROOT / "requirements" / "lock.txt"
STAMP = VENV / ".ccmc-lock-stamp"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"


def say(msg: str) -> None:
    print(f"[dev] {msg}", flush=True)


def run(cmd: list[str | Path], **kwargs) -> None:
    say("$ " + " ".join(str(c) for c in cmd))
    subprocess.run([str(c) for c in cmd], check=True, cwd=kwargs.pop("cwd", ROOT), **kwargs)


def allocator_env() -> dict[str, str]:
    """glibc's allocator settings for batched training, as environment variables.

    One copy, in ``tools/allocator.py`` (standard library only, so it loads before any
    environment exists): dev.py exports them so that every process it starts has them from
    its first allocation. They change no number, only speed; a value already in the
    environment wins.
    """
    spec = importlib.util.spec_from_file_location(
        "_ccmc_allocator", ROOT / "tools" / "allocator.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.ALLOCATOR_ENV)


def export_allocator_env() -> None:
    """Give every process dev.py starts (kernels, workers, tests) the allocator settings.

    Linux only; a setting already in the environment is kept.
    """
    if sys.platform.startswith("linux"):
        for key, value in allocator_env().items():
            os.environ.setdefault(key, value)


#: Where dev.py's commands keep Python's byte-code caches (PYTHONPYCACHEPREFIX).
PYCACHE = ROOT / "_build" / "pycache"
#: Set by dev.py beside its prefix, so a nested dev.py (the benchmarks' cold run in a
#: fresh clone) takes its own checkout's prefix instead of inheriting this one.
PYCACHE_MARK = "CCMC_PYCACHE_FROM_DEV"


def use_bytecode_cache() -> None:
    """Let every process the command starts read and write byte-code caches, under _build.

    The wheels are installed ``--no-compile`` (see ``ensure_env``), so Python compiles each
    module the first time it is imported and caches the result. With
    ``PYTHONDONTWRITEBYTECODE`` set, as on the 2-core build VMs, nothing was cached and
    every process compiled every module it imported again: a notebook kernel spent 10 s of
    CPU importing ccmc_lite, matplotlib, sympy and ipykernel instead of 3.5 s, and a test
    run starts over 40 kernels. The caches go to ``_build/pycache`` (``PYTHONPYCACHEPREFIX``),
    so nothing is written into the source tree or the environments. A prefix the caller
    set is kept.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if os.environ.get("PYTHONPYCACHEPREFIX") and not os.environ.get(PYCACHE_MARK):
        return
    os.environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    os.environ[PYCACHE_MARK] = "1"


def _stamp() -> str:
    h = hashlib.sha256()
    for f in (LOCK, ROOT / "pyproject.toml"):
        h.update(f.read_bytes())
    h.update(sys.version.encode())
    return h.hexdigest()


def lock_pin(name: str) -> str | None:
    """``name==version`` from the lock file, or None if it pins no such package."""
    for line in LOCK.read_text().splitlines():
        if line.lower().startswith(f"{name.lower()}=="):
            return line.strip()
    return None


def install_pinned(python: Path, args: list[str | Path]) -> None:
    """Install ``args`` (requirements) into ``python``'s environment with uv, else pip.

    uv (pinned in the lock, installed by pip into the same environment) installs the
    lock's ~130 packages with ~9 s of CPU where pip spends ~45 s (2-core build VM, cold
    caches both); ``python3 dev.py test`` runs on a CPU-bound machine, so that is time saved.
    torch is installed by pip before this is called: pip finds the CPU wheel on local disk
    where the machine's pip configuration points at one, uv would not look there (and
    leaves the installed torch alone, as it satisfies the pin). The reader's environment of
    the tests stays a plain ``pip install`` (that is what it tests). If uv cannot be
    installed or fails, pip does the work.
    """
    pip = [python, "-m", "pip", "--disable-pip-version-check"]
    uv_pin = lock_pin("uv")
    if uv_pin and os.environ.get("CCMC_INSTALLER", "uv") == "uv":
        try:
            run([*pip, "install", "-q", "--no-compile", uv_pin])
            # --system-certs: the platform's certificates, which pip uses too (a proxy's CA)
            uv = [python, "-m", "uv", "pip", "install", "-q", "--system-certs"]
            run([*uv, "--python", python, *args])
            return
        except subprocess.CalledProcessError:
            say("uv failed: installing with pip instead")
    run([*pip, "install", "-q", "--no-compile", *args])


def ensure_env() -> None:
    """Create or refresh .venv from the lock file (exact pins) and install the package."""
    if sys.version_info < (3, 10):  # noqa: UP036 (dev.py must explain itself on old Pythons)
        sys.exit(f"[dev] Python >= 3.10 is required; this is {sys.version.split()[0]}")
    want = _stamp()
    if STAMP.exists() and STAMP.read_text().strip() == want and PY.exists():
        return
    start = time.perf_counter()
    if not PY.exists():
        say(f"creating {VENV.relative_to(ROOT)}")
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    pip = [PY, "-m", "pip", "--disable-pip-version-check"]
    # torch first, on its own: pip takes the CPU wheel from the local disk where there is one.
    torch_pin = lock_pin("torch")
    if torch_pin is None:
        sys.exit(f"[dev] {LOCK.relative_to(ROOT)} pins no torch")
    # --no-compile: pip would byte-compile every module of every wheel (torch alone: 40 s
    # instead of 10 s on the 2-core build VM); Python compiles what is imported, once.
    run([*pip, "install", "-q", "--no-compile", torch_pin])
    install_pinned(PY, ["-r", LOCK])
    run([*pip, "install", "-q", "--no-deps", "--no-build-isolation", "-e", ROOT])
    run([*pip, "check"])
    STAMP.write_text(want)
    say(f"environment ready in {time.perf_counter() - start:.0f} s")


def ensure_chromium() -> str:
    """Debian's chromium for the browser test; installed with apt-get when missing.

    ``$CCMC_CHROMIUM`` may name another Chromium-based browser (e.g. on GitHub Actions).
    """
    preset = os.environ.get("CCMC_CHROMIUM", "")
    if preset and Path(preset).exists():
        return preset
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    say("chromium not found: installing Debian's chromium package")
    apt = ["apt-get"] if os.geteuid() == 0 else ["sudo", "-n", "apt-get"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        run([*apt, "update", "-q"], env=env)
        run(
            [
                *apt,
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "chromium",
                "fonts-dejavu-core",
            ],
            env=env,
        )
    except (subprocess.CalledProcessError, FileNotFoundError) as err:
        sys.exit(f"[dev] could not install chromium ({err}); install it and re-run")
    found = shutil.which("chromium")
    if not found:
        sys.exit("[dev] chromium is still missing after apt-get install")
    return found


def cmd_book(args: list[str]) -> None:
    ensure_env()
    start = time.perf_counter()
    run([BIN / "jupyter-book", "build", ".", "-W", "-n", "--keep-going", *args])
    say(f"book built in {time.perf_counter() - start:.0f} s: open _build/html/index.html")


def start_test_environments() -> subprocess.Popen:
    """Create the tests' environments (reader, Binder, floor) in a background process.

    They are pip installs that need only the standard library to drive, one core each, so
    they run beside ``.venv``'s install instead of after it; the tests wait for them
    (a file lock in ``tests/book_tools.py``) only if they are not ready yet. The log is
    ``_build/venvs/prepare.log``; if this fails, the tests retry and report the error.
    """
    log_path = ROOT / "_build" / "venvs" / "prepare.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    env.pop("VIRTUAL_ENV", None)
    with open(log_path, "w") as log:
        return subprocess.Popen(
            [sys.executable, "-c", "import book_tools; book_tools.prepare_environments()"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


#: The lint step of ``dev.py test`` (and of ``.pre-commit-config.yaml``): style, formatting,
#: the chapters' code cells and types. Each entry: name, command (run at the repository root).
LINT_STEPS: tuple[tuple[str, list[str | Path]], ...] = (
    ("ruff check", [BIN / "ruff", "check", "."]),
    ("ruff format", [BIN / "ruff", "format", "--check", "."]),
    ("chapters' code", [PY, "book/_ext/chapter_code.py", "--check"]),
    ("mypy", [PY, "-m", "mypy"]),
)


def lint(report: list[str] | None = None) -> list[str]:
    """Run every lint step (all of them, even after a failure); return the failed ones' names.

    A line per step, and a failed step's output, are printed, or appended to ``report``.
    """
    lines = [] if report is None else report
    failed = []
    for name, cmd in LINT_STEPS:
        done = subprocess.run(
            [str(c) for c in cmd], cwd=ROOT, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            failed.append(name)
            lines.append(done.stdout + done.stderr)
        lines.append(f"[dev] lint: {name}: {'failed' if done.returncode else 'clean'}")
        if report is None:
            print("\n".join(lines), flush=True)
            lines.clear()
    return failed


def cmd_lint(args: list[str]) -> None:
    ensure_env()
    if lint():
        sys.exit(1)


def cmd_test(args: list[str]) -> None:
    # The unit tests, two notebook kernels and the floor run share the machine's cores: one
    # torch/BLAS thread per process, as the kernels already have. Two threads in the pytest
    # process cost 23 s more CPU for the unit tests alone (163 s against 140 s of user time,
    # mypy included) and idle-spin beside busy kernels. An explicit setting is kept.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    background = start_test_environments()
    # apt-get's chromium beside pip's .venv: both mostly wait on the network and the disk
    chromium: list[str] = []
    apt = threading.Thread(target=lambda: chromium.append(ensure_chromium()), name="chromium")
    apt.start()
    ensure_env()
    apt.join()
    if not chromium:  # ensure_chromium exited (its message is printed): stop here too
        sys.exit("[dev] no chromium for the browser tests")
    os.environ["CCMC_CHROMIUM"] = chromium[0]
    start = time.perf_counter()
    failed: list[str] = []
    report: list[str] = []
    linting = threading.Thread(target=lambda: failed.extend(lint(report)), name="lint")
    linting.start()  # step 1, beside the tests: ruff, the chapters' code cells, mypy
    try:
        run([PY, "-m", "pytest", *args])  # step 2: every test
    finally:
        background.wait()
        linting.join()
        print("\n".join(report), flush=True)
    say(f"tests finished in {time.perf_counter() - start:.0f} s")
    if failed:
        sys.exit(f"[dev] lint failed: {', '.join(failed)}")


def cmd_bench(args: list[str]) -> None:
    ensure_env()
    run([PY, ROOT / "benchmarks" / "run_benchmarks.py", *args])


def cmd_paper_runs(args: list[str]) -> None:
    ensure_env()
    run([PY, "-m", "tools.paper_runs", *args])


def cmd_paper_chapters(args: list[str]) -> None:
    ensure_env()
    run([PY, "-m", "tools.paper_chapters", *args])


def cmd_gpu_runs(args: list[str]) -> None:
    ensure_env()
    run([PY, "-m", "tools.gpu_runs", *args])


def cmd_student(args: list[str]) -> None:
    # The standard library suffices: the student notebooks come from the built book's
    # published notebooks (build it first, or pass --published <folder>).
    run([sys.executable, ROOT / "book" / "_ext" / "booktools.py", *args])


def cmd_fmt(args: list[str]) -> None:
    ensure_env()
    run([PY, ROOT / "book" / "_ext" / "chapter_code.py", *args])


def cmd_env(args: list[str]) -> None:
    ensure_env()
    say(f"environment ready: {PY}")


def cmd_lock(args: list[str]) -> None:
    if not PY.exists():
        sys.exit("[dev] no .venv to lock; create one first")
    out = subprocess.run(
        [
            str(PY),
            "-m",
            "pip",
            "freeze",
            "--all",
            "--exclude-editable",
            "--disable-pip-version-check",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    pins = sorted(
        (
            line
            for line in out.splitlines()
            if "==" in line and not line.startswith(("-e", "pip=="))
        ),
        key=str.lower,
    )
    # "torch==2.13.0+cpu" -> "torch==2.13.0": the same pin matches the CPU wheel here and
    # the PyPI wheel elsewhere.
    pins = [p.split("+")[0] if p.lower().startswith("torch==") else p for p in pins]
    header = (
        "# Exact pins for the book build, the tests and CI (Python 3.11, CPU).\n"
        "# Generated by `python3 dev.py lock`; the package itself declares lower bounds\n"
        "# only (pyproject.toml). torch 2.13.0 is the CPU wheel on the build machines.\n"
    )
    LOCK.write_text(header + "\n".join(pins) + "\n")
    say(f"wrote {len(pins)} pins to {LOCK.relative_to(ROOT)}")


COMMANDS = {
    "book": cmd_book,
    "test": cmd_test,
    "bench": cmd_bench,
    "paper-runs": cmd_paper_runs,
    "paper-chapters": cmd_paper_chapters,
    "gpu-runs": cmd_gpu_runs,
    "student": cmd_student,
    "fmt": cmd_fmt,
    "lint": cmd_lint,
    "lock": cmd_lock,
    "env": cmd_env,
}


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in COMMANDS:
        print(__doc__)
        sys.exit(2 if argv else 0)
    export_allocator_env()
    use_bytecode_cache()  # inherited by every kernel, worker and test subprocess
    try:
        COMMANDS[argv[0]](argv[1:])
    except subprocess.CalledProcessError as err:
        sys.exit(err.returncode or 1)


if __name__ == "__main__":
    main(sys.argv[1:])
