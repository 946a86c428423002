"""The three layers stay decoupled: checked on the import statements of the package source.

* the simulator layer (``vlnverse.sim``) knows nothing about tasks or evaluation;
* the environment layer (``vlnverse.scenes``) knows nothing about the simulator, tasks or
  evaluation (the agent body is a core type, ``vlnverse.core.body``);
* the task layer (``vlnverse.tasks``) never imports a backend (``vlnverse.sim.mujoco``, MuJoCo,
  Isaac Sim) — it may only use the backend-neutral ``vlnverse.sim`` API;
* nothing imports Isaac Sim at module level.
"""
from __future__ import annotations

import ast
from pathlib import Path

import vlnverse

PACKAGE = Path(vlnverse.__file__).parent


def _imports(path: Path) -> set[str]:
    """Absolute module names imported by ``path`` (relative imports resolved)."""
    module = "vlnverse." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def _layer_imports(layer: str) -> dict[str, set[str]]:
    return {str(p.relative_to(PACKAGE)): _imports(p) for p in (PACKAGE / layer).rglob("*.py")}


def _offenders(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(f"{file}: {name}" for file, names in _layer_imports(layer).items() for name in names
                  if any(name == f or name.startswith(f + ".") for f in forbidden))


def test_resolver_sees_relative_imports():
    assert "vlnverse.core.errors" in _imports(PACKAGE / "core" / "body.py")
    assert "vlnverse.core.body.AgentBody" in _imports(PACKAGE / "sim" / "body.py")


def test_simulator_layer_knows_no_tasks_or_evaluation():
    assert _offenders("sim", ("vlnverse.tasks", "vlnverse.eval", "vlnverse.study")) == []


def test_environment_layer_knows_no_backend_tasks_or_evaluation():
    assert _offenders("scenes", ("vlnverse.sim", "vlnverse.tasks", "vlnverse.eval", "mujoco")) == []


def test_task_layer_never_imports_a_backend():
    assert _offenders("tasks", ("vlnverse.sim.mujoco", "mujoco", "isaacsim", "omni", "vlnverse.eval")) == []


#: Modules only Kit imports (listed in config/extension.toml), allowed their Kit base classes at module level.
KIT_ONLY = {"extension.py": {"omni.ext"}, "kit_tests/test_extension.py": {"omni.kit.test"}}


def test_no_module_level_isaac_import():
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = {a.name for n in top for a in n.names} | {getattr(n, "module", None) or "" for n in top}
        names -= KIT_ONLY.get(path.relative_to(PACKAGE).as_posix(), set())
        assert not any(n.split(".")[0] in ("isaacsim", "omni") for n in names), path


def test_evaluation_uses_only_the_backend_neutral_simulator_api():
    assert _offenders("eval", ("vlnverse.sim.mujoco", "mujoco", "isaacsim", "omni")) == []
