"""What an episode runs under, as config files write it: the episode source, the camera rig, the
render options and the registry names with parameters (agent, model, policy) that eval and train
configs share.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any

from ..core.config import require
from ..core.errors import ConfigError
from ..sim.sensors import CONFIG_CAMERA_FIELDS, CameraSpec


@dataclass
class NamedSpec:
    """A registry name plus constructor parameters (``agent``, ``model``)."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """The name must be non-empty."""
        require(bool(self.name.strip()), "name", "empty", "a registered name")


@dataclass
class GenerateSpec:
    """Generate episodes on the fly: ``task`` (default: the config's task) on ``scenes`` (a split
    name, ``all``, scene ids or paths) with ``episodes_per_scene`` each, seeded."""

    scenes: Any = "val_unseen"
    episodes_per_scene: int = 5
    seed: int = 0
    task: str | None = None
    max_scenes: int | None = None

    def validate(self) -> None:
        """Counts must be positive; ``scenes`` a string or a list of strings."""
        require(0 < self.episodes_per_scene <= 10_000, "episodes_per_scene", f"got {self.episodes_per_scene}",
                "an integer in 1..10000")
        require(0 <= self.seed < 2 ** 63, "seed", f"got {self.seed}", "an integer in 0..2**63-1")
        require(isinstance(self.scenes, str) or (isinstance(self.scenes, list) and self.scenes
                                                 and all(isinstance(s, str) for s in self.scenes)),
                "scenes", f"got {self.scenes!r}", "a split name, 'all', or a list of scene ids/paths")
        require(self.max_scenes is None or self.max_scenes > 0, "max_scenes", f"got {self.max_scenes}",
                "a positive integer or null")


@dataclass
class EpisodeSource:
    """Where the episodes come from: ``path`` (JSONL file or folder) or ``generate``."""

    path: str | None = None
    generate: GenerateSpec | None = None

    def validate(self) -> None:
        """Exactly one of ``path`` / ``generate``."""
        require((self.path is None) != (self.generate is None), "path/generate",
                "both or neither given", "exactly one of 'path' or 'generate'")


class _CameraEntry:
    """Methods of ``SensorConfig`` (its fields are ``CameraSpec``'s, see below)."""

    def validate(self) -> None:
        """The camera's own checks (``CameraSpec.validate``: name, kind, image size, FoV and depth
        range within ``vlnverse.sim.sensors``' limits)."""
        self.to_spec().validate()

    def to_spec(self) -> CameraSpec:
        """The simulator's ``CameraSpec`` (its other fields at their defaults)."""
        return CameraSpec(**{f.name: getattr(self, f.name) for f in fields(self)})


def _camera_entry_fields() -> list[tuple]:
    spec = {f.name: f for f in fields(CameraSpec)}
    return [(n, spec[n].type) if n == "name" else (n, spec[n].type, field(default=spec[n].default))
            for n in CONFIG_CAMERA_FIELDS]


#: A pinhole camera as a config file writes it (``sensors:`` of eval and train configs, a policy
#: checkpoint's rig): the ``CameraSpec`` fields ``CONFIG_CAMERA_FIELDS`` (``name`` required), with
#: ``CameraSpec``'s types, defaults and checks; ``to_spec()`` gives the ``CameraSpec``.
SensorConfig = make_dataclass("SensorConfig", _camera_entry_fields(), bases=(_CameraEntry,),
                              namespace={"__module__": __name__, "__doc__": "A config file's camera: the ``CameraSpec`` fields "
                                         "``CONFIG_CAMERA_FIELDS`` (``name`` required); ``to_spec()`` gives the camera."})


def sensor_config(data: Any, *, field: str = "sensors", file: Any = None) -> Any:
    """A ``SensorConfig`` from a mapping (a config entry or a checkpoint's rig entry), validated;
    a ``SensorConfig`` is returned as is. Errors name ``file`` and ``<field>.<key>``."""
    from ..core.config import from_dict

    if isinstance(data, SensorConfig):
        return data
    if not isinstance(data, dict):
        raise ConfigError(f"got {data!r}", field=field, file=file,
                          expected=f"a mapping with keys from {list(CONFIG_CAMERA_FIELDS)}")
    return from_dict(SensorConfig, data, file=file, prefix=field)


@dataclass
class RenderConfig:
    """Rendering options: ``quality`` = fast | default | high (``vlnverse.sim.types.RENDER_QUALITIES``);
    ``objects`` = primitives | meshes (``vlnverse.scenes.object_meshes.OBJECT_STYLES``: ``meshes`` draws
    objects with detailed render meshes and baked light, physics unchanged)."""

    quality: str = "default"
    objects: str = "primitives"

    def validate(self) -> None:
        """Quality must name a preset, objects an object style."""
        from ..scenes.object_meshes import OBJECT_STYLES
        from ..sim.types import RENDER_QUALITIES

        require(self.quality in RENDER_QUALITIES, "quality", f"got {self.quality!r}",
                "one of " + ", ".join(RENDER_QUALITIES))
        require(self.objects in OBJECT_STYLES, "objects", f"got {self.objects!r}",
                "one of " + ", ".join(OBJECT_STYLES))

    def sim_options(self) -> dict[str, str]:
        """The ``make_simulator`` options these settings give (``objects`` only when not the default,
        so backends without the option keep working with the default)."""
        return {"quality": self.quality, **({} if self.objects == "primitives" else {"objects": self.objects})}

    def is_default(self) -> bool:
        """Whether these are the simulator's defaults (``default`` quality, ``primitives`` objects)."""
        return (self.quality, self.objects) == ("default", "primitives")

    def options(self) -> dict[str, str]:
        """``sim_options()``, empty for the defaults: what the learning layer passes to every
        simulator it makes (so runs with the default render are the ones from before the option)."""
        return {} if self.is_default() else self.sim_options()

    def key(self) -> dict[str, str] | None:
        """``{quality, objects}`` for a cache key, None for the defaults (keys of default renders stay
        as they were before render settings existed)."""
        return None if self.is_default() else {"quality": self.quality, "objects": self.objects}

    def label(self) -> str:
        """``QUALITY:OBJECTS`` (the form ``parse`` reads)."""
        return f"{self.quality}:{self.objects}"

    @classmethod
    def parse(cls, value: Any, field: str = "render") -> "RenderConfig":
        """A validated ``RenderConfig`` from a mapping, another ``RenderConfig``, None (the defaults) or
        a ``QUALITY:OBJECTS`` / ``QUALITY`` string; a bad one is a ``ConfigError`` naming ``field``."""
        from ..core.config import from_dict, validate

        if isinstance(value, cls):
            validate(value, prefix=field)
            return value
        if isinstance(value, str):
            parts = value.split(":")
            if len(parts) > 2 or not all(p.strip() for p in parts):
                raise ConfigError(f"got {value!r}", field=field, expected="QUALITY[:OBJECTS], e.g. default:meshes")
            value = {"quality": parts[0].strip(), **({"objects": parts[1].strip()} if len(parts) == 2 else {})}
        return from_dict(cls, {} if value is None else value, prefix=field)


@dataclass
class EpisodeSetup:
    """What every episode of a run is played under: the ``task`` (its config, ``tasks/types/<task>/config.yaml``,
    gives unset ``body``, ``max_steps`` and ``success_distance``), the collision mode and its
    per-mode parameters (``mode_params``, keyed by mode name), the camera rig (``sensors``), the
    simulator ``backend`` and the ``render`` options.

    ``EvalConfig`` and ``TrainConfig`` are setups with more fields (they extend this class, so
    their YAML files keep these fields at the top level, validated by each config's ``validate``);
    :meth:`of` takes the setup out of either, and :func:`vlnverse.run.evaluation.evaluate` runs
    episodes under one."""

    task: str
    collision_mode: str = "strict"
    #: per-mode parameters, e.g. ``{strict: {displacement_threshold: 0.1}}``; only the selected mode's entry is used
    mode_params: dict[str, Any] = field(default_factory=dict)
    sensors: list[SensorConfig] = field(default_factory=lambda: [
        SensorConfig(name="rgb", kind="rgb"), SensorConfig(name="depth", kind="depth")])
    body: str | None = None
    max_steps: int | None = None
    success_distance: float | None = None
    backend: str = "auto"
    #: how every simulator of the run draws (``quality`` fast | default | high, ``objects`` primitives | meshes)
    render: RenderConfig = field(default_factory=RenderConfig)
    #: the instruction language of the episodes the run generates (``generate`` blocks, generated
    #: homes, a benchmark's held-out split re-instructed): ``v1`` (the shipped data's), ``v2`` or
    #: ``v2-split`` (``tasks.instructions.languages``); episode files are read as they are
    language: str = "v1"

    @classmethod
    def of(cls, config: "EpisodeSetup", **changes: Any) -> "EpisodeSetup":
        """The setup fields of ``config`` (an eval or train config, or a setup) as a setup of their
        own (deep copies), with ``changes`` (e.g. another ``task``)."""
        import copy

        values = {f.name: copy.deepcopy(getattr(config, f.name)) for f in fields(cls)}
        return cls(**{**values, **changes})

    def language_overrides(self) -> dict[str, Any]:
        """The task ``params`` overrides that generate ``language`` (``{}`` for ``v1``); an unknown
        name is a ``ConfigError`` naming the field."""
        from ..tasks.instructions.languages import language_overrides

        return language_overrides(self.language, field="language")

    def sensor_specs(self) -> list[CameraSpec]:
        """The simulator's ``CameraSpec`` list."""
        return [s.to_spec() for s in self.sensors]

    def selected_mode_params(self) -> dict[str, Any]:
        """The parameters of the selected collision mode (``mode_params.<collision_mode>``)."""
        return dict(self.mode_params.get(self.collision_mode) or {})
