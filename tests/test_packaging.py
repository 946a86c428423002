"""Packaging: the Kit manifest as Kit reads it, one requirement list, resources found in a wheel install."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "exts" / "vlnverse"
MANIFEST = EXT / "config" / "extension.toml"

# Loads each [[python.module]] the way Kit does (extension folder on sys.path, import by name) with
# fake omni.ext / omni.kit.app / carb modules, finds the IExt subclasses, and starts them twice:
# once in an app lacking Isaac Sim's extensions, once with everything enabled.
_KIT_PROBE = r"""
import json, sys, types
ext_dir, modules, enabled = sys.argv[1], json.loads(sys.argv[2]), set(json.loads(sys.argv[3]))
sys.path.insert(0, ext_dir)
omni, omni_ext, kit, app_mod, carb = (types.ModuleType(n) for n in ("omni", "omni.ext", "omni.kit", "omni.kit.app", "carb"))
class IExt:
    def on_startup(self, ext_id): pass
    def on_shutdown(self): pass
omni_ext.IExt, omni.ext, omni.kit, kit.app = IExt, omni_ext, kit, app_mod
errors = []
carb.log_error, carb.log_info, carb.log_warn = errors.append, lambda m: None, lambda m: None
class Manager:
    def is_extension_enabled(self, name): return name in enabled
class App:
    def get_extension_manager(self): return Manager()
app_mod.get_app = lambda: App()
sys.modules.update({"omni": omni, "omni.ext": omni_ext, "omni.kit": kit, "omni.kit.app": app_mod, "carb": carb})
import importlib, inspect
found = []
for name in modules:
    module = importlib.import_module(name)
    found += [(name, module.__file__, cls) for _, cls in inspect.getmembers(module, inspect.isclass)
              if issubclass(cls, IExt) and cls is not IExt and cls.__module__ == module.__name__]
from vlnverse.sim.api import BACKENDS
results = []
for name, file, cls in found:
    ext = cls()
    ext.on_startup("vlnverse-0.1.0")
    results.append({"module": name, "file": file, "class": cls.__name__, "ready": ext.ready,
                    "errors": list(errors), "isaac": BACKENDS.get("isaac") if "isaac" in BACKENDS else None})
    ext.on_shutdown()
print(json.dumps({"modules": {n: importlib.import_module(n).__file__ for n in modules}, "results": results}))
"""


def _manifest() -> dict:
    with open(MANIFEST, "rb") as f:  # Kit's manifest is plain TOML
        return tomllib.load(f)


def _kit_probe(enabled: list[str]) -> dict:
    names = [m["name"] for m in _manifest()["python"]["module"]]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", _KIT_PROBE, str(EXT), json.dumps(names), json.dumps(enabled)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_manifest_follows_kits_convention():
    data = _manifest()
    assert (ROOT / "extension.toml").resolve() == MANIFEST.resolve()  # one source of truth
    pkg = data["package"]
    assert pkg["version"] and pkg["title"] and pkg["description"] and pkg["repository"].startswith("https://")
    assert (EXT / pkg["readme"]).is_file() and (EXT / pkg["changelog"]).is_file()
    assert "omni.kit.pipapi" in data["dependencies"]
    # every dependency optional: a bare Kit kernel loads the extension (tests/test_isaac_real.py)
    assert all(dep.get("optional") is True for dep in data["dependencies"].values())
    assert [m["name"] for m in data["python"]["module"]][0] == "vlnverse"
    for module in data["python"]["module"]:  # resolved under the extension folder, as Kit does
        rel = Path(*module["name"].split("."))
        assert (EXT / rel / "__init__.py").is_file() or (EXT / rel).with_suffix(".py").is_file(), module["name"]
    assert data["test"] and all("args" in t for t in data["test"])
    for pattern in data["test"][0]["pythonTests"]["include"]:  # the in-Kit test module exists
        assert (EXT / Path(*pattern.removesuffix(".*").split(".")) / "__init__.py").is_file()


def test_setup_py_installs_the_manifests_requirements():
    import setuptools  # noqa: F401  (first: provides distutils)
    from distutils.core import run_setup

    kit = _manifest()["python"]["pipapi"]["requirements"]
    standalone = _manifest()["vlnverse"]["standalone_requirements"]
    requirements = kit + standalone
    cwd = os.getcwd()
    try:
        dist = run_setup(str(ROOT / "setup.py"), stop_after="init")
    finally:
        os.chdir(cwd)
    assert dist.install_requires == requirements
    names = {r.split(">")[0].split("=")[0].lower() for r in requirements}
    assert names >= {"numpy", "pillow", "pyopengl", "usd-core"}
    # inside Kit the toolkit uses Kit's pxr: the list Kit pip-installs never pulls usd-core
    assert not any(r.lower().startswith("usd-core") for r in kit) and standalone == ["usd-core>=24.5"]
    assert dist.get_version() == _manifest()["package"]["version"]


def test_every_extra_the_readme_and_ci_install_exists():
    """`pip install -e '.[a,b]'` only warns on an unknown extra; a missing one silently drops packages."""
    import re
    import setuptools  # noqa: F401
    from distutils.core import run_setup

    cwd = os.getcwd()
    try:
        extras = set(run_setup(str(ROOT / "setup.py"), stop_after="init").extras_require)
    finally:
        os.chdir(cwd)
    named = set()
    for path in (ROOT / "README.md", ROOT / ".ci" / "run"):
        for group in re.findall(r"\.\[([a-z0-9_,]+)\]", path.read_text(encoding="utf-8")):
            named.update(group.split(","))
    assert {"test", "learn", "mllm"} <= named
    assert named <= extras, f"extras named but not defined in setup.py: {sorted(named - extras)}"


def test_extension_refuses_to_start_without_isaac_and_registers_the_backend_with_it():
    bare = _kit_probe(enabled=["omni.kit.pipapi"])
    assert bare["modules"]["vlnverse"] == str(EXT / "vlnverse" / "__init__.py")  # the extension folder's package
    [res] = bare["results"]
    assert res["class"] == "VLNVerseExtension" and res["module"] == "vlnverse.extension"
    # the backend name is always registered (building it without Isaac Sim fails with how to install it)
    assert res["ready"] is False and res["isaac"] == "vlnverse.sim.isaac:IsaacSimulator" and len(res["errors"]) == 1
    message = res["errors"][0]
    assert "\n" not in message and "not enabled" in message
    assert "omni.physx" in message and "isaacsim.core.api or omni.isaac.core" in message and "omni.usd" in message
    full = _kit_probe(enabled=["omni.kit.pipapi", "omni.usd", "omni.physx", "omni.isaac.core", "omni.ui"])
    [res] = full["results"]
    assert res["ready"] is True and res["errors"] == [] and res["isaac"] == "vlnverse.sim.isaac:IsaacSimulator"


def test_plain_import_never_touches_omniverse():
    code = "import sys, vlnverse, vlnverse.paths; print(any(m.split('.')[0] in ('omni', 'carb') for m in sys.modules))"
    env = dict(os.environ, PYTHONPATH=str(EXT))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "False", run.stdout + run.stderr


def test_missing_resource_is_named(tmp_path, monkeypatch):
    from vlnverse.paths import ResourceNotFoundError, resource_file, robots_dir, scenes_dir

    monkeypatch.setenv("VLNVERSE_HOME", str(tmp_path))
    with pytest.raises(ResourceNotFoundError, match=r"resource 'scenes_usd/' not found \(VLNVERSE_HOME is set\)"):
        scenes_dir()
    (tmp_path / "robots").mkdir()
    assert robots_dir() == tmp_path.resolve() / "robots"
    with pytest.raises(ResourceNotFoundError, match=r"resource 'robots/r2r_ce.yaml' not found"):
        resource_file("robots", "r2r_ce.yaml")


def _copy_source(dst: Path) -> Path:
    """The files a source distribution holds (MANIFEST.in), so the build never writes into the checkout."""
    dst.mkdir(parents=True)
    for name in ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(ROOT / name, dst / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("exts", "robots", "scenes_usd", "tasks"):
        shutil.copytree(ROOT / name, dst / name, ignore=ignore, symlinks=True)
    return dst


def _venv_seeing_this_environment(venv: Path, env: dict) -> Path:
    """A fresh venv whose site-packages lists this interpreter's site folders in a ``.pth`` file, so
    it imports the dependencies installed where the tests run (a user's venv, a system Python, CI)
    after its own packages. (``--system-site-packages`` would expose the base interpreter's
    packages instead of a venv's.) Their ``.pth`` files are not run: an editable install of the
    checkout stays out. Pip comes from this environment too. Returns the venv's ``python``."""
    import site

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, env=env, check=True, timeout=300).stdout.strip()
    folders = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    (Path(purelib) / "tests_parent_environment.pth").write_text(
        "".join(f"{f}\n" for f in dict.fromkeys(folders) if Path(f).is_dir()), encoding="utf-8")
    return python


def test_wheel_installs_and_runs_from_any_folder(tmp_path):
    """Build a wheel, install it (--no-deps) into a fresh venv that sees this environment's installed
    dependencies, and run `vlnverse scenes info` and a one-episode `vlnverse eval` from a folder
    outside the checkout."""
    src = _copy_source(tmp_path / "src")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VLNVERSE_HOME")}
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, env=env, cwd=tmp_path, timeout=300)
    [wheel] = list((tmp_path / "dist").glob("vlnverse-*.whl"))
    venv = tmp_path / "venv"
    python = _venv_seeing_this_environment(venv, env)
    command = venv / "bin" / "vlnverse"
    # --ignore-installed: this environment's own vlnverse (e.g. an editable install) is neither kept nor touched
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", str(wheel)],
                   check=True, env=env, timeout=300)
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = subprocess.run([str(python), "-c", "import vlnverse, vlnverse.paths as p, yaml, gymnasium; "
                            "print(vlnverse.__file__); print(p.scenes_dir()); print(yaml.__file__); "
                            "print(gymnasium.__file__)"], capture_output=True, text=True, env=env, cwd=work, timeout=300)
    assert where.returncode == 0, where.stderr
    package_file, scenes, *dependencies = where.stdout.split()
    assert Path(package_file).is_relative_to(venv) and Path(scenes).is_relative_to(venv)  # the wheel, not a checkout
    import gymnasium
    import yaml

    assert dependencies == [yaml.__file__, gymnasium.__file__]  # the packages of the interpreter running the tests
    shipped = subprocess.run([str(python), "-c", "import vlnverse.paths as p; "
                              "print((p.tasks_dir() / 'train' / 'cma_fine_grained.pt').stat().st_size)"],
                             capture_output=True, text=True, env=env, cwd=work, timeout=300)
    assert shipped.returncode == 0, shipped.stderr
    assert int(shipped.stdout) > 100_000  # the shipped CMA checkpoint travels in the wheel
    configs = subprocess.run([str(python), "-c", "from vlnverse.tasks.base import TASKS, builtin_task_types; "
                              "print(*(n for n in builtin_task_types() if TASKS.get(n).config_file.is_file()))"],
                             capture_output=True, text=True, env=env, cwd=work, timeout=300)
    assert configs.returncode == 0, configs.stderr
    checkout = sorted(p.parent.name for p in (ROOT / "exts/vlnverse/vlnverse/tasks/types").glob("*/config.yaml"))
    assert configs.stdout.split() == checkout and len(checkout) == 8  # each task type's default config travels too
    maps = subprocess.run([str(python), "-c", "import vlnverse.paths as p; "
                           "print(len(list((p.scenes_dir() / 'lightmaps' / 'home_0012').glob('*.png'))))"],
                          capture_output=True, text=True, env=env, cwd=work, timeout=300)
    assert maps.returncode == 0, maps.stderr
    assert int(maps.stdout) == len(list((ROOT / "scenes_usd" / "lightmaps" / "home_0012").glob("*.png"))) > 10
    listed = subprocess.run([str(command), "benchmark", "list"], capture_output=True, text=True, env=env, cwd=work,
                            timeout=300)
    assert listed.returncode == 0 and "proc-v1" in listed.stdout, listed.stderr  # the definitions travel in the wheel
    info = subprocess.run([str(command), "scenes", "info", "home_0012"], capture_output=True, text=True, env=env,
                          cwd=work, timeout=300)
    assert info.returncode == 0, info.stderr
    assert "home_0012" in info.stdout and "rooms" in info.stdout
    run = subprocess.run([str(command), "eval", "oracle_fine_grained_strict", "limit=1", "episodes.generate.max_scenes=1",
                          "episodes.generate.episodes_per_scene=1", "sensors=[]", "report.enabled=false",
                          "out=run", "--no-progress"], capture_output=True, text=True, env=env, cwd=work, timeout=300)
    assert run.returncode == 0, run.stderr
    overall = json.loads((work / "run" / "summary.json").read_text())["overall"]
    assert overall["episodes"] == 1 and overall["means"]["SR"] == 1.0
    episodes = (work / "run" / "input_episodes.jsonl").read_text()
    assert str(venv) not in episodes  # shipped scenes are named relative to their root
