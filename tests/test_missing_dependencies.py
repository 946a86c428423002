"""A missing third-party package is one line from the CLI naming it and the extra that installs it
(exit status 2), never a traceback: the CLI runs in a subprocess whose imports of the named
packages fail as if they were not installed (a finder first on ``sys.meta_path``)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vlnverse.deps import ELSEWHERE, PACKAGES, missing_dependency_message

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "exts" / "vlnverse"

# argv[1]: comma-separated top-level modules to hide; the rest: the vlnverse command line
_WITHOUT = r"""
import importlib.abc, sys
hidden = set(sys.argv[1].split(","))
for name in [m for m in sys.modules if m.partition(".")[0] in hidden]:
    del sys.modules[name]
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
sys.argv = ["vlnverse", *sys.argv[2:]]
from vlnverse.cli import main
sys.exit(main())
"""


def _cli_without(hidden: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(EXT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", _WITHOUT, hidden, *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("hidden, argv, expect", [
    ("torch", ["train", "cma_fine_grained", "out=run"], ["vlnverse train needs torch", "'vlnverse[learn]'"]),
    ("fastapi", ["study", "serve", "--episodes", "e.jsonl", "--out", "study"], ["fastapi is not installed",
                                                                               "'vlnverse[study]'"]),
    ("numpy", ["scenes", "info", "home_0012"], ["numpy is not installed", "core requirement", "pip install vlnverse"]),
    ("pxr", ["scenes", "info", "home_0012"], ["usd-core is not installed", "core requirement"]),
    ("mujoco", ["sim", "info"], ["mujoco is not installed", "core requirement"]),
])
def test_a_missing_package_is_one_line_naming_it_and_its_extra(hidden, argv, expect, tmp_path):
    run = _cli_without(hidden, *argv, cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and run.stderr.count("\n") == 1, run.stderr[-3000:]
    assert run.stderr.startswith("vlnverse: error: ")
    for text in expect:
        assert text in run.stderr, run.stderr


def test_commands_that_do_not_need_gymnasium_or_torch_run_without_them(tmp_path):
    """``vlnverse.learn`` is imported to build the parser: it needs neither (the gym env registers
    itself only when gymnasium is installed)."""
    run = _cli_without("gymnasium,torch", "sim", "info", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "body r2r_ce" in run.stdout


def test_a_missing_module_of_the_toolkit_itself_is_a_bug_with_its_traceback():
    assert missing_dependency_message("vlnverse.nothing_here") is None and missing_dependency_message(None) is None
    assert missing_dependency_message("torch._C").startswith("torch is not installed (module 'torch._C' not found")
    assert "Isaac Sim" in missing_dependency_message("omni.kit.app")
    assert missing_dependency_message("left_pad") == "module 'left_pad' not found: install the package that provides it"


def test_the_table_agrees_with_setup_py():
    """Each extra named in ``vlnverse.deps`` installs that package; each core entry is a requirement."""
    import setuptools  # noqa: F401  (first: provides distutils)
    from distutils.core import run_setup

    cwd = os.getcwd()
    try:
        dist = run_setup(str(ROOT / "setup.py"), stop_after="init")
    finally:
        os.chdir(cwd)

    def names(requirements):
        return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}

    for module, (package, extra) in PACKAGES.items():
        wanted = names(dist.install_requires) if extra is None else names(dist.extras_require[extra])
        assert package.lower() in wanted, (module, package, extra)
    core = names(dist.install_requires)
    assert core <= {p.lower() for p, extra in PACKAGES.values() if extra is None}  # every core requirement is named
    assert not set(ELSEWHERE) & set(PACKAGES)
