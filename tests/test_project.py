"""Project hygiene: dependencies, the README's two commands, CI entry point, style."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import tomllib
import yaml

from book_tools import ROOT, dev_module

# PyPI name -> names that satisfy it in a conda(-forge) environment.yml.
CONDA_NAMES = {
    "torch": {"pytorch", "pytorch-cpu"},
    "matplotlib": {"matplotlib", "matplotlib-base"},
}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_lists_every_runtime_dependency():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    listed: set[str] = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            listed |= {_name(d) for d in dep.get("pip", [])}
        else:
            listed.add(_name(dep))
    assert "conda-forge" in env["channels"]
    for req in _pyproject()["project"]["dependencies"]:
        name = _name(req)
        assert CONDA_NAMES.get(name, {name}) & listed, f"environment.yml lacks {name}"
    assert "pytorch-cpu" in listed, "Binder must get a CPU-only torch"
    assert "jupytext" in listed, "Binder opens MyST chapters through jupytext"


def test_package_declares_lower_bounds_only():
    project = _pyproject()["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    for req in reqs:
        assert "==" not in req, f"exact pin {req!r} belongs in requirements/lock.txt"
        assert ">=" in req, f"{req!r} should declare a lower bound"


def test_lock_file_pins_everything_exactly():
    lines = [
        line.strip()
        for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    pinned = {}
    for line in lines:
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.\-]+", line), f"not exact: {line!r}"
        name, version = line.split("==")
        pinned[name.lower().replace("_", "-")] = version
    project = _pyproject()["project"]
    needed = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        needed += extra
    for req in needed:
        assert _name(req) in pinned, f"{_name(req)} is not pinned in requirements/lock.txt"
    assert pinned["torch"] == "2.13.0"
    assert pinned["jupyter-book"].startswith("1."), "the book is Jupyter Book 1.x"
    # ipykernel 7.x intermittently leaves nbclient waiting forever for a reply (seen here
    # on chapters with widgets; ipython/ipykernel#1445, jupyter/nbclient#312): keep 6.x.
    assert pinned["ipykernel"].startswith("6."), "ipykernel 7 hangs notebook execution"


def _quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_readme_links_the_online_book_binder_and_the_pages_workflow():
    readme = (ROOT / "README.md").read_text()
    site = "https://ccmc-lite.github.io/ccmc_lite/"
    assert f"**Read online:** <{site}>" in readme
    assert "[![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/" in readme
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text()
    assert "python3 dev.py test" in workflow and "gh-pages" in workflow
    # The build's .jupyter/labconfig (Binder's settings on gh-pages) is a hidden folder.
    assert "include-hidden-files: true" in workflow


def test_publishing_workflow_caches_tests_pull_requests_and_limits_write_access():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1: on -> True
    assert "pull_request" in triggers and "push" in triggers
    assert workflow["permissions"] == {"contents": "read"}, "read-only unless a job says so"
    test, publish = workflow["jobs"]["test"], workflow["jobs"]["publish"]
    assert "permissions" not in test
    assert publish["permissions"] == {"contents": "write"}
    assert publish["needs"] == "test"
    assert "push" in publish["if"] and "refs/heads/main" in publish["if"]
    runs = [step.get("run", "") for step in test["steps"]]
    assert "python3 dev.py test" in runs
    caches = {step["with"]["key"]: step["with"]["path"] for step in test["steps"]
              if step.get("uses", "").startswith("actions/cache")}  # fmt: skip
    env_key = next(k for k, path in caches.items() if ".venv" in path)
    cache_key = next(k for k, path in caches.items() if ".jupyter_cache" in path)
    assert "requirements/" in env_key
    assert "lock.txt" in cache_key and "book/" in cache_key


def test_readme_has_exactly_two_commands_and_ci_runs_the_test_one():
    commands = _quickstart_commands()
    assert commands == ["python3 dev.py book", "python3 dev.py test"], commands
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 dev.py test" in ci
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111, ".ci/run must be executable"


def test_dev_py_usage_lists_the_commands():
    out = subprocess.run(
        [sys.executable, str(ROOT / "dev.py")], capture_output=True, text=True, check=True
    ).stdout
    for command in ("book", "test", "bench"):
        assert f"python3 dev.py {command}" in out
    bad = subprocess.run([sys.executable, str(ROOT / "dev.py"), "nope"], capture_output=True)
    assert bad.returncode == 2


def test_dev_py_installs_the_lock_with_uv_and_falls_back_to_pip(monkeypatch):
    """``install_pinned``: pip installs the lock's uv, uv installs the rest; pip alone when
    uv fails, when ``CCMC_INSTALLER=pip`` or when the lock pins no uv."""
    dev = dev_module()
    calls: list[list[str]] = []

    def fake_run(cmd, **kwargs):
        calls.append([str(c) for c in cmd])
        if "uv" in calls[-1][1:3] and fail_uv:
            raise subprocess.CalledProcessError(2, cmd)

    monkeypatch.setattr(dev, "run", fake_run)
    py = Path("/env/bin/python")
    uv_pin = dev.lock_pin("uv")
    assert uv_pin and uv_pin.startswith("uv=="), "the lock pins uv"
    assert dev.lock_pin("torch").startswith("torch==") and dev.lock_pin("no-such-package") is None

    def installers(env: str | None, fail: bool, pin: str | None = uv_pin) -> list[str]:
        nonlocal fail_uv
        fail_uv = fail
        calls.clear()
        monkeypatch.setattr(dev, "lock_pin", lambda name: pin if name == "uv" else None)
        if env is None:
            monkeypatch.delenv("CCMC_INSTALLER", raising=False)
        else:
            monkeypatch.setenv("CCMC_INSTALLER", env)
        dev.install_pinned(py, ["-r", "lock.txt"])
        return [" ".join(c[1:3]) + " " + c[-1] for c in calls]

    fail_uv = False
    assert installers(None, False) == [f"-m pip {uv_pin}", "-m uv lock.txt"]
    assert installers(None, True) == [f"-m pip {uv_pin}", "-m uv lock.txt", "-m pip lock.txt"]
    assert installers("pip", False) == ["-m pip lock.txt"]
    assert installers(None, False, pin=None) == ["-m pip lock.txt"]
    assert all(c[0] == str(py) for c in calls)


def test_dev_py_processes_cache_byte_code_under_build(monkeypatch):
    """dev.py's commands turn byte-code caching on, under ``_build/pycache`` of their checkout.

    Without it, on a machine that sets PYTHONDONTWRITEBYTECODE (the build VMs do) every kernel
    recompiled every module it imported; a caller's own prefix is kept, a parent dev.py's
    (the benchmarks' cold run in a fresh clone) is not.
    """
    dev = dev_module()
    ours = str(ROOT / "_build" / "pycache")
    cases = [
        ({"PYTHONDONTWRITEBYTECODE": "1"}, ours),
        ({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/elsewhere"}, "/elsewhere"),
        ({"PYTHONPYCACHEPREFIX": "/parent/_build/pycache", dev.PYCACHE_MARK: "1"}, ours),
    ]
    for before, prefix in cases:
        for key in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", dev.PYCACHE_MARK):
            monkeypatch.delenv(key, raising=False)
        for key, value in before.items():
            monkeypatch.setenv(key, value)
        dev.use_bytecode_cache()
        env = dict(os.environ)
        assert "PYTHONDONTWRITEBYTECODE" not in env, before
        assert env["PYTHONPYCACHEPREFIX"] == prefix, before
    # what a process started by dev.py sees
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; print(sys.flags.dont_write_bytecode, sys.pycache_prefix)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["0", ours]


def test_citations_quote_the_package_version():
    """CITATION.cff and the BibTeX entry on the book's front page cite the released version."""
    version = _pyproject()["project"]["version"]
    import ccmc_lite

    assert ccmc_lite.__version__ == version
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert str(cff["version"]) == version
    bibtex = re.search(r"Version ([0-9][0-9.]*)", (ROOT / "book" / "intro.md").read_text())
    assert bibtex is not None and bibtex.group(1) == version


def test_required_layout_exists():
    for name in (
        "book",
        "_config.yml",
        "_toc.yml",
        "ccmc_lite",
        "tests",
        "environment.yml",
        "README.md",
        "pyproject.toml",
        ".ci/run",
        "requirements/lock.txt",
        "benchmarks",
    ):
        assert (ROOT / name).exists(), name


def test_lint_step_checks_style_formatting_chapters_and_types():
    """``dev.py test`` lints first (beside the tests): ruff, ruff format, the chapters' code
    cells and mypy under pyproject's strict settings (an annotation on every function)."""
    dev = dev_module()
    names = [name for name, _ in dev.LINT_STEPS]
    assert names == ["ruff check", "ruff format", "chapters' code", "mypy"]
    commands = {name: " ".join(map(str, cmd)) for name, cmd in dev.LINT_STEPS}
    assert commands["ruff format"].endswith("format --check .")
    assert commands["mypy"].endswith("-m mypy")
    config = _pyproject()["tool"]["mypy"]
    assert config["disallow_untyped_defs"] and config["check_untyped_defs"]
    assert config["files"] == ["ccmc_lite", "tools"]


def test_lint_runs_every_step_and_names_the_ones_that_fail(monkeypatch):
    dev = dev_module()
    ok, bad = [sys.executable, "-c", "print('fine')"], [sys.executable, "-c", "exit('E999 x')"]
    monkeypatch.setattr(dev, "LINT_STEPS", (("first", bad), ("second", ok), ("third", bad)))
    report: list[str] = []
    assert dev.lint(report) == ["first", "third"]  # a failure does not stop the others
    assert "[dev] lint: second: clean" in report and any("E999 x" in r for r in report)


def test_pre_commit_hooks_are_the_lint_steps():
    dev = dev_module()
    hooks = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"]
    assert [h["name"] for h in hooks] == [name for name, _ in dev.LINT_STEPS]
    for hook, (_, cmd) in zip(hooks, dev.LINT_STEPS, strict=True):
        expected = " ".join(str(Path(c).relative_to(ROOT)) if str(c).startswith(str(ROOT))
                            else str(c) for c in cmd)  # fmt: skip
        assert hook["entry"] == expected, (hook["entry"], expected)
        assert hook["language"] == "system" and hook["pass_filenames"] is False


def test_every_part_is_in_the_api_page():
    api = (ROOT / "book" / "api.md").read_text()
    parts = sorted(p.name for p in (ROOT / "ccmc_lite").iterdir() if (p / "__init__.py").is_file())
    assert parts == ["ccmc", "core", "lens", "markov", "ngram", "stored", "teaching"]
    for part in parts:
        assert f"```{{api-part}} {part}\n```" in api, f"{part} is not in api.md"
