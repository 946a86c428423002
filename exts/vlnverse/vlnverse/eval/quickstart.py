"""``vlnverse quickstart``: the whole pipeline on the shipped scenes in a few minutes on a CPU.

It generates a small episode set per task on a couple of scenes of one split, evaluates every
(agent, collision mode, task) combination of ``tasks/eval/quickstart.yaml`` with RGB-D sensors,
prints one metrics table and writes, under ``--out``:

- ``episodes/<task>/`` — the generated episode dataset per task (shared by every run);
- ``<task>__<agent>__<mode>/`` — one resumable eval run folder each (see ``runner``);
- ``summary.json`` — every run's aggregates; ``report.html`` — one self-contained report.

Re-running the same command resumes: finished episodes are not run again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import load_config, require
from ..core.io import claim_output_dir, folder_lock, write_json_atomic
from ..paths import tasks_dir
from .config import EvalConfig, ReportConfig
from ..run.setup import EpisodeSource, NamedSpec, RenderConfig, SensorConfig


@dataclass
class QuickstartConfig:
    """What the quickstart evaluates (``tasks/eval/quickstart.yaml``)."""

    scenes: Any = "val_unseen"
    max_scenes: int = 2
    tasks: list[str] = field(default_factory=lambda: ["fine_grained", "coarse_grained"])
    episodes_per_scene: int = 3
    agents: list[NamedSpec] = field(default_factory=lambda: [NamedSpec("oracle"), NamedSpec("random")])
    collision_modes: list[str] = field(default_factory=lambda: ["strict", "telhop"])
    sensors: list[SensorConfig] = field(default_factory=lambda: [
        SensorConfig(name="rgb", kind="rgb", width=128, height=128), SensorConfig(name="depth", kind="depth", width=128, height=128)])
    max_steps: int | None = None
    seed: int = 0
    report: ReportConfig = field(default_factory=lambda: ReportConfig(max_episodes=3))
    render: RenderConfig = field(default_factory=RenderConfig)
    #: agent name → ``{tasks: [...], collision_modes: [...]}``: the combinations it runs (default all)
    only: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: the instruction language every task's episodes are generated in (``tasks.instructions.languages``;
    #: the shipped checkpoints are trained on ``v2``)
    language: str = "v1"

    def validate(self) -> None:
        """Non-empty lists and positive counts; a known ``language``; ``only`` names configured agents,
        tasks and modes."""
        from ..tasks.instructions.languages import language_overrides

        language_overrides(self.language, field="language")
        require(self.max_scenes > 0, "max_scenes", f"got {self.max_scenes}", "a positive integer")
        require(self.episodes_per_scene > 0, "episodes_per_scene", f"got {self.episodes_per_scene}", "a positive integer")
        for name in ("tasks", "agents", "collision_modes", "sensors"):
            require(len(getattr(self, name)) > 0, name, "empty", "at least one entry")
        require(isinstance(self.only, dict), "only", f"got {self.only!r}", "a mapping agent name -> {tasks, collision_modes}")
        agents = [a.name for a in self.agents]
        for agent, rule in self.only.items():
            require(agent in agents, f"only.{agent}", "not an agent of 'agents'", f"one of {agents}")
            require(isinstance(rule, dict) and set(rule) <= {"tasks", "collision_modes"}, f"only.{agent}",
                    f"got {rule!r}", "a mapping with tasks and/or collision_modes")
            for key, allowed in (("tasks", self.tasks), ("collision_modes", self.collision_modes)):
                values = rule.get(key, allowed)
                require(isinstance(values, list) and values and set(values) <= set(allowed), f"only.{agent}.{key}",
                        f"got {values!r}", f"a non-empty subset of {list(allowed)}")

    def runs(self, agent: str, task: str, mode: str) -> bool:
        """Whether ``agent`` runs ``task`` under ``mode`` (``only``)."""
        rule = self.only.get(agent, {})
        return task in rule.get("tasks", [task]) and mode in rule.get("collision_modes", [mode])


def default_config_path() -> Path:
    """``tasks/eval/quickstart.yaml``."""
    return tasks_dir() / "eval" / "quickstart.yaml"


def run_quickstart(out: str | Path = "runs/quickstart", **kwargs: Any) -> dict:
    """Generate episodes, run every (task, agent, mode) combination, write the combined summary and
    report. ``out`` must be new, empty or a quickstart folder and is locked for the run (a second
    quickstart on it is refused). Keyword arguments: see ``run_quickstart_locked``."""
    out = claim_output_dir(out, command="quickstart")
    with folder_lock(out):
        return run_quickstart_locked(out, **kwargs)


def run_quickstart_locked(out: Path, *, episodes_per_scene: int | None = None, config: str | Path | None = None,
                          progress: bool = True, print_summary: bool = True, quality: str | None = None,
                          objects: str | None = None) -> dict:
    """``run_quickstart``'s body, for a caller holding ``out``'s lock; ``quality`` and ``objects``
    override the config's ``render.quality`` and ``render.objects``."""
    from .report import write_report
    from ..run.episodes import generate_episodes
    from ..run.summary import print_table
    from ..tasks.instructions.languages import language_overrides
    from .runner import run_eval

    path = Path(config) if config else default_config_path()
    qs = load_config(QuickstartConfig, path) if path.is_file() else QuickstartConfig()
    if episodes_per_scene is not None:
        require(episodes_per_scene > 0, "--episodes", f"got {episodes_per_scene}", "a positive integer")
        qs.episodes_per_scene = episodes_per_scene
    if quality is not None or objects is not None:
        qs.render = RenderConfig(quality or qs.render.quality, objects or qs.render.objects)
        qs.render.validate()
    # 1. episodes per task, generated once and shared by every run (kept for resume)
    _check_generation(out, qs)
    episode_dirs = {}
    for task in qs.tasks:
        folder = out / "episodes" / task
        if not (folder / "summary.json").is_file():
            generate_episodes(task, qs.scenes, qs.episodes_per_scene, qs.seed, folder, max_scenes=qs.max_scenes,
                              progress=progress, overrides=language_overrides(qs.language))
        episode_dirs[task] = folder
    # 2. every combination as one resumable eval run
    runs, rows = [], []
    agents = []
    for agent in qs.agents:
        missing = _missing_requirement(agent)
        if missing:
            print(f"quickstart: skipping agent '{agent.name}': {missing}")
        else:
            agents.append(agent)
    for task in qs.tasks:
        for agent in agents:
            for mode in qs.collision_modes:
                if not qs.runs(agent.name, task, mode):
                    continue
                name = f"{task}__{agent.name}__{mode}"
                cfg = EvalConfig(agent=agent, task=task, episodes=EpisodeSource(path=str(episode_dirs[task])),
                                 collision_mode=mode, sensors=list(qs.sensors), max_steps=qs.max_steps, seed=qs.seed,
                                 out=str(out / name), report=qs.report, render=qs.render)
                cfg.validate()
                summary = run_eval(cfg, progress=progress, print_summary=False)
                records = _load_records(out / name)
                for r in records:
                    r["_dir"] = name
                runs.append((f"{agent.name} / {mode} / {task}", summary, records))
                rows.extend(((key.split("/")[0], agent.name, mode), agg) for key, agg in summary["by_task"].items())
    combined = {"runs": {label: {"run": s["run"], "overall": s["overall"]} for label, s, _ in runs},
                "config": str(path)}
    write_json_atomic(out / "summary.json", combined)
    write_report(out / "report.html", runs, base_dir=out, title="vlnverse quickstart")
    if print_summary:
        print_table(rows, title="vlnverse quickstart")
        print(f"wrote {out / 'summary.json'} and {out / 'report.html'}")
    return combined


def _check_generation(out: Path, qs: QuickstartConfig) -> None:
    """Record what ``out/episodes`` is generated from (``generation.json``: scenes, counts, seed,
    language); a resumed folder whose episodes were generated otherwise is a one-line
    ``ConfigError`` naming the setting (its runs would mix episodes)."""
    import json

    from ..core.errors import ConfigError

    made = {"scenes": qs.scenes, "max_scenes": qs.max_scenes, "episodes_per_scene": qs.episodes_per_scene,
            "seed": qs.seed, "language": qs.language}
    record = out / "episodes" / "generation.json"
    if record.is_file():
        before = json.loads(record.read_text(encoding="utf-8"))
        changed = [k for k in made if before.get(k, "v1" if k == "language" else None) != made[k]]
        if changed:
            raise ConfigError(f"{out} holds episodes generated with {changed[0]} {before.get(changed[0])!r}, "
                              f"this run asks for {made[changed[0]]!r}", field=changed[0],
                              expected="the same setting, or a new --out")
    elif (out / "episodes").is_dir() and qs.language != "v1":
        raise ConfigError(f"{out} holds episodes generated before the language was recorded (version 1)",
                          field="language", expected="v1 for this folder, or a new --out")
    write_json_atomic(record, made)


def _missing_requirement(agent: NamedSpec) -> str | None:
    """Why ``agent`` cannot run in this environment (a learned policy needs torch), else None."""
    import importlib.util

    if agent.name == "policy" and importlib.util.find_spec("torch") is None:
        return "the learned policy needs torch (python3 -m pip install torch==2.13.0 -e '.[learn]')"
    return None


def _load_records(run_dir: Path) -> list[dict]:
    from .folder import EPISODES_FILE
    from ..run.records import read_finished

    return read_finished(run_dir / EPISODES_FILE)
