"""The package is layered: checked on the import graph derived from the source of every module.

Layer order (lowest first; a module may import its own top-level unit or a unit of a LOWER layer,
never a sibling of its own layer nor anything above):

    core (+ the ``vlnverse.paths`` alias of ``core.paths``, the root package's ``__version__``)
    → engines (the parallel engines that run ``core.jobs``) → scenes → sim → tasks → run → eval
    → learn | study | results → benchmarks | kit | cli
    → extension (Kit's entry point) | __main__ → kit_tests

Both module-level imports and imports inside functions count (a lazy import is still a
dependency); registrations by name (``Registry.register_lazy("name", "vlnverse.x")``, backend
strings) are not imports and are how a lower layer names a plug-in that lives above it.

``run`` is the episode kernel (rollout, collision modes, scoring, metrics, agents, episode sourcing,
records and summaries): it imports neither ``eval`` nor ``learn``, and ``learn`` imports nothing
of ``eval`` though ``eval`` sits below it (``FORBIDDEN``): training needs only the kernel.

Also: no import cycle between modules (``KNOWN_CYCLES`` is empty); nothing
imports Isaac Sim at module level outside the Kit boundary; only ``vlnverse.learn`` imports torch.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import vlnverse

PACKAGE = Path(vlnverse.__file__).parent

#: Top-level units by layer, lowest first (see the module docstring).
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(s.split()) for s in (
    "__init__ core deps", "engines", "scenes", "sim", "tasks", "run", "eval", "learn study results", "benchmarks kit cli",
    "extension __main__", "kit_tests"))
#: Top-level modules that are another unit's public name.
ALIASES = {"paths": "core"}   # vlnverse.paths re-exports vlnverse.core.paths
#: Import cycles (strongly connected module sets) allowed: none (the last one, tasks.base ↔ the task
#: types ↔ tasks.instructions, went with issue 29: the registries name the task types' folders lazily).
KNOWN_CYCLES: tuple[frozenset[str], ...] = ()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("vlnverse",) + (parts[:-1] if parts[-1] == "__init__" else parts))


def _imports(path: Path, source: str | None = None) -> set[str]:
    """Absolute names imported anywhere in ``path`` (module level and inside functions; relative
    imports resolved; ``from x import y`` gives ``x`` and ``x.y``)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    names = set()
    text = path.read_text(encoding="utf-8") if source is None else source
    for node in ast.walk(ast.parse(text)):
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


def import_graph() -> dict[str, set[str]]:
    """Module → the package modules it imports (every ``vlnverse`` module, names resolved to modules)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for module, path in files.items():
        targets = set()
        for name in _imports(path):
            while name.startswith("vlnverse") and name not in files and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in files and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def unit(module: str) -> str:
    """Top-level unit of a module (``vlnverse.eval.mllm.agents`` → ``eval``; the root → ``__init__``)."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    return ALIASES.get(name, name)


def layer_violations(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """``"a -> b"`` for every import of a unit that is not strictly lower than the importer's."""
    level = {u: i for i, group in enumerate(layers) for u in group}
    out = []
    for module, targets in graph.items():
        for target in targets:
            a, b = unit(module), unit(target)
            if a == b:
                continue
            if a not in level or b not in level:
                out.append(f"{module} -> {target} (unit not in LAYERS)")
            elif level[b] >= level[a]:
                out.append(f"{module} -> {target}")
    return sorted(out)


#: (importer unit, imported unit) pairs that are refused whatever the layer order says
FORBIDDEN = (("learn", "eval"), ("run", "eval"), ("run", "learn"))


def forbidden_imports(graph: dict[str, set[str]], forbidden=FORBIDDEN) -> list[str]:
    """``"a -> b"`` for every import of a unit that ``forbidden`` refuses to the importer's unit."""
    return sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts if (unit(m), unit(t)) in forbidden)


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on.discard(w)
                scc.add(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(frozenset(scc))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def new_cycles(graph: dict[str, set[str]], known=KNOWN_CYCLES) -> list[list[str]]:
    """Cycles that are not within one recorded cycle."""
    return [sorted(c) for c in cycles(graph) if not any(c <= k for k in known)]


# -- the checks on the real package ---------------------------------------------------------------


def test_every_unit_of_the_package_has_a_layer():
    level = {u for group in LAYERS for u in group}
    assert {unit(m) for m in import_graph()} <= level


def test_the_whole_layer_order_holds():
    assert layer_violations(import_graph()) == []


def test_learn_needs_only_the_episode_kernel_and_the_kernel_nothing_above_it():
    """``learn`` imports nothing of ``eval``; ``run`` imports neither ``eval`` nor ``learn`` (issue 56)."""
    assert forbidden_imports(import_graph()) == []


def test_checker_reports_planted_forbidden_imports():
    graph = import_graph()
    graph["vlnverse.learn.trainer"] = graph["vlnverse.learn.trainer"] | {"vlnverse.eval.runner"}
    graph["vlnverse.run.rollout"] = graph["vlnverse.run.rollout"] | {"vlnverse.eval.config", "vlnverse.learn.agent"}
    assert forbidden_imports(graph) == ["vlnverse.learn.trainer -> vlnverse.eval.runner",
                                        "vlnverse.run.rollout -> vlnverse.eval.config",
                                        "vlnverse.run.rollout -> vlnverse.learn.agent"]
    assert "vlnverse.run.rollout -> vlnverse.eval.config" in layer_violations(graph)   # below eval, too


def test_no_import_cycle():
    assert KNOWN_CYCLES == ()
    assert cycles(import_graph()) == []


def test_the_named_circles_are_gone():
    """The circles issue 29 names: eval ↔ learn, eval.agents ↔ eval.mllm.agents, rollout ↔ scoring,
    core.body → paths → core; the Isaac backend no longer reaches into the MuJoCo backend."""
    graph = import_graph()
    found = cycles(graph)
    for pair in (("vlnverse.run.chat_models", "vlnverse.learn.vlm"), ("vlnverse.run.agents", "vlnverse.eval.mllm.agents"),
                 ("vlnverse.run.rollout", "vlnverse.run.scoring"), ("vlnverse.run.models", "vlnverse.run.chat_models")):
        assert not any(set(pair) <= c for c in found), pair
    assert not any(unit(t) != "core" for t in graph["vlnverse.core.body"])
    assert not [t for m in graph if m.startswith("vlnverse.sim.isaac") for t in graph[m]
                if t.startswith("vlnverse.sim.mujoco")]


#: generic evaluation modules that reach the MLLM agents' chat models only through the agent's hook
#: (``Agent.chat_models``): they import nothing of ``vlnverse.eval.mllm`` (issue 56)
MLLM_FREE = ("vlnverse.eval.runner", "vlnverse.eval.folder", "vlnverse.eval.scene_job", "vlnverse.eval.visuals",
             "vlnverse.run.agents", "vlnverse.run.generation", "vlnverse.run.rollout")


def mllm_imports(graph: dict[str, set[str]], modules=MLLM_FREE) -> list[str]:
    """``"a -> b"`` for every import of ``vlnverse.eval.mllm`` by one of ``modules``."""
    return sorted(f"{m} -> {t}" for m in modules for t in graph.get(m, ()) if t.startswith("vlnverse.eval.mllm"))


def test_the_generic_runner_imports_nothing_of_the_mllm_agents():
    graph = import_graph()
    assert mllm_imports(graph) == []
    planted = dict(graph, **{"vlnverse.eval.runner": graph["vlnverse.eval.runner"] | {"vlnverse.eval.mllm.agents"}})
    assert mllm_imports(planted) == ["vlnverse.eval.runner -> vlnverse.eval.mllm.agents"]


def test_kit_only_code_lives_in_the_kit_package():
    """Only vlnverse.kit, the manifest's entry point and Kit's tests import omni / carb (anywhere in
    the file), and nothing below the Kit boundary imports vlnverse.kit."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        if unit(module) in ("kit", "extension", "kit_tests"):
            continue
        offenders += [f"{module}: {n}" for n in _imports(path) if n.split(".")[0] in ("omni", "carb")]
    assert offenders == []
    graph = import_graph()
    assert [m for m, ts in graph.items() if unit(m) not in ("kit", "extension", "kit_tests")
            and any(unit(t) == "kit" for t in ts)] == []


def test_lazily_registered_plugins_resolve_to_their_modules():
    """The names eval registers lazily (so that it imports nothing above it) are the ones the
    modules register."""
    from vlnverse.run.agents import AGENTS, VLN_MME
    from vlnverse.eval.mllm.agents import VARIANTS
    from vlnverse.run.models import MODELS

    assert AGENTS.tagged(VLN_MME) == sorted(VARIANTS) and len(VARIANTS) == 8
    for name in VARIANTS:
        assert AGENTS.get(name).__module__ == "vlnverse.eval.mllm.agents"
    for name, module in (("roam", "roam"), ("som", "roam"), ("mv_dualvln", "pixel_goal")):
        assert AGENTS.get(name).__module__ == f"vlnverse.eval.{module}"
    for name in ("openai", "ollama", "scripted"):
        assert MODELS.get(name).__module__ == "vlnverse.run.chat_models"
    assert MODELS._lazy["transformers"] == "vlnverse.learn.vlm"   # resolving it imports torch: not here


def test_parallel_engines_are_named_in_core_and_live_above_it():
    """``core.jobs`` (the job model) names the built-in engines lazily and imports none of them; each
    resolves to its own module of ``vlnverse.engines`` (a layer above core, below everything else)."""
    from vlnverse.core.jobs import ENGINES

    graph = import_graph()
    assert not [t for t in graph["vlnverse.core.jobs"] if unit(t) != "core"]
    assert ENGINES._lazy == {"local": "vlnverse.engines.local", "ray": "vlnverse.engines.ray"}
    for name in ("local", "ray"):
        assert ENGINES.get(name).__module__ == f"vlnverse.engines.{name}"


#: the policies' own modules: the generic bench reaches a policy only through the registry and its hooks
POLICY_MODULES = ("vlnverse.learn.gama", "vlnverse.learn.hnr", "vlnverse.learn.vlnbert", "vlnverse.learn.rdp")


def policy_imports(graph: dict[str, set[str]], prefix: str = "vlnverse.benchmarks.train") -> list[str]:
    """``"a -> b"`` for every import of a policy's own module by a module under ``prefix``."""
    return sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith(prefix) for t in ts
                  if t.startswith(POLICY_MODULES))


def test_the_training_bench_knows_no_policy_by_name():
    """``bench train`` gets GAMA's expert usage from the policy's ``multitask_report`` hook (issue 56)."""
    graph = import_graph()
    assert policy_imports(graph) == []
    planted = dict(graph, **{"vlnverse.benchmarks.train.evaluation": {"vlnverse.learn.gama"}})
    assert policy_imports(planted) == ["vlnverse.benchmarks.train.evaluation -> vlnverse.learn.gama"]


def test_built_in_task_types_are_the_folders_that_register_them():
    """Each folder of ``tasks/types`` is a built-in task type, found on disk (no name list): its
    package registers the task type named like the folder (its generator module), its template set
    and its default config (``config.yaml`` beside it); the registries name them without importing
    them (the task types import the registries)."""
    from vlnverse.tasks.instructions.template_sets import TEMPLATES
    from vlnverse.tasks.registry import TASKS, builtin_task_types

    types_dir = (PACKAGE / "tasks" / "types").resolve()
    folders = sorted(p.parent.name for p in types_dir.glob("*/__init__.py"))
    assert list(builtin_task_types()) == folders and len(folders) == 8 and "goals" not in folders
    assert list(builtin_task_types(having="templates")) == folders
    graph = import_graph()
    assert not [t for t in graph["vlnverse.tasks.registry"] | graph["vlnverse.tasks.instructions.template_sets"]
                if t.startswith("vlnverse.tasks.types")]
    for name, package in builtin_task_types().items():
        assert TASKS._lazy[name] == TEMPLATES._lazy[name] == package
        assert graph[package] == {f"{package}.generator", f"{package}.templates"}
        cls = TASKS.get(name)
        assert cls.__module__ == f"{package}.generator" and cls.name == name
        assert cls.config_file == types_dir / name / "config.yaml" and cls.config_file.is_file()
        assert TEMPLATES.get(name).task_type == name and len(TEMPLATES.get(name)) > 0


def test_a_plugin_cannot_take_a_built_in_task_name_even_before_it_loads():
    from vlnverse.tasks.registry import TASKS, register_task

    loaded = TASKS._items.pop("object_goal", None)   # as in a process that has not used it yet
    try:
        with pytest.raises(ValueError, match="task 'object_goal' is already registered"):
            register_task("object_goal")(type("Mine", (), {}))
        assert "object_goal" not in TASKS._items
    finally:
        if loaded is not None:
            TASKS._items["object_goal"] = loaded
    assert TASKS.get("object_goal").__module__ == "vlnverse.tasks.types.object_goal.generator"


# -- the checker itself fails on planted faults ----------------------------------------------------


def test_checker_reports_a_planted_upward_import():
    graph = import_graph()
    graph["vlnverse.core.geometry"] = graph["vlnverse.core.geometry"] | {"vlnverse.run.metrics"}
    graph["vlnverse.learn.vocab"] = graph["vlnverse.learn.vocab"] | {"vlnverse.study.log"}   # sibling layer
    assert layer_violations(graph) == ["vlnverse.core.geometry -> vlnverse.run.metrics",
                                       "vlnverse.learn.vocab -> vlnverse.study.log"]


def test_checker_reports_a_planted_cycle_and_a_grown_known_one():
    synthetic = {"vlnverse.sim.a": {"vlnverse.sim.b"}, "vlnverse.sim.b": {"vlnverse.sim.c"},
                 "vlnverse.sim.c": {"vlnverse.sim.a"}, "vlnverse.sim.d": {"vlnverse.sim.a"}}
    assert cycles(synthetic) == [frozenset({"vlnverse.sim.a", "vlnverse.sim.b", "vlnverse.sim.c"})]
    assert new_cycles(synthetic, known=(frozenset({"vlnverse.sim.a", "vlnverse.sim.b"}),)) == [
        ["vlnverse.sim.a", "vlnverse.sim.b", "vlnverse.sim.c"]]
    assert new_cycles(synthetic, known=(frozenset({"vlnverse.sim.a", "vlnverse.sim.b", "vlnverse.sim.c"}),)) == []


def test_function_level_and_relative_imports_are_counted():
    source = "import numpy\n\ndef f():\n    from ...learn import trainer\n    from ..metrics import ndtw\n"
    names = _imports(PACKAGE / "eval" / "mllm" / "agents.py", source)
    assert {"vlnverse.learn.trainer", "vlnverse.eval.metrics.ndtw", "numpy"} <= names
    assert "vlnverse.core.errors" in _imports(PACKAGE / "core" / "body.py")


@pytest.mark.parametrize("module,target", [("vlnverse.scenes.maps", "vlnverse.paths"),
                                           ("vlnverse.tasks.base", "vlnverse")])
def test_aliases_and_the_root_sit_at_the_bottom(module, target):
    assert layer_violations({module: {target}}) == []


# -- Isaac Sim and torch ---------------------------------------------------------------------------


#: Modules only Kit imports (listed in config/extension.toml), allowed their Kit base classes at module level.
KIT_ONLY = {"extension.py": {"omni.ext"}, "kit_tests/test_extension.py": {"omni.kit.test"}}


def test_no_module_level_isaac_import():
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = {a.name for n in top for a in n.names} | {getattr(n, "module", None) or "" for n in top}
        names -= KIT_ONLY.get(path.relative_to(PACKAGE).as_posix(), set())
        assert not any(n.split(".")[0] in ("isaacsim", "omni", "carb") for n in names), path


def test_task_and_evaluation_layers_use_only_the_backend_neutral_simulator_api():
    graph = import_graph()
    offenders = [f"{m} -> {t}" for m, ts in graph.items() if unit(m) in ("scenes", "tasks", "run", "eval") for t in ts
                 if t.startswith(("vlnverse.sim.mujoco", "vlnverse.sim.isaac"))]
    offenders += [f"{_module_name(p)}: {n}" for p in PACKAGE.rglob("*.py") if unit(_module_name(p)) in ("scenes", "tasks", "run", "eval")
                  for n in _imports(p) if n.split(".")[0] in ("mujoco", "isaacsim", "omni")]
    assert offenders == []


def test_only_the_learning_layer_imports_torch():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "learn":
            continue
        offenders += [f"{rel}: {n}" for n in _imports(path) if n.split(".")[0] in ("torch", "torchvision", "tensorboard")]
    assert offenders == []


def test_learning_layer_entry_points_do_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, gymnasium, vlnverse.learn, vlnverse.learn.cli, vlnverse.learn.agent, vlnverse.learn.config, "
            "vlnverse.learn.gym_env, vlnverse.cli; vlnverse.cli.build_parser(); "
            "assert 'vlnverse/VLN-v0' in gymnasium.registry; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr


def test_results_reads_results_files_only_and_only_the_commands_above_import_it():
    """vlnverse.results (``results compare`` / ``results page``) builds on core statistics, the task
    layer and the eval run's file readers, nothing that trains or simulates; only the bench
    commands (their tables' paired comparisons) import it."""
    graph = import_graph()
    allowed = {"core", "tasks", "results"}
    used = {t for m, ts in graph.items() if unit(m) == "results" for t in ts if unit(t) not in allowed}
    assert used <= {"vlnverse.eval.folder", "vlnverse.run.records", "vlnverse.run.summary"}, used
    importers = {unit(m) for m, ts in graph.items() if unit(m) != "results" and any(unit(t) == "results" for t in ts)}
    assert importers <= {"benchmarks", "cli"}, importers
