"""The study config (YAML): consent text, workload, collision mode, controls and stream settings."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import from_dict, load_yaml, require
from ..run.setup import RenderConfig
from ..eval.config import fill_render_objects
from ..scenes.object_meshes import RECOGNISABLE_OBJECTS

DEFAULT_CONSENT = (
    "You are invited to take part in a navigation study. You will read short directions and drive a "
    "virtual robot through simulated homes with the keyboard. Only the participant id you enter and "
    "the robot's movements are recorded; no personal data is stored. You may stop at any time. "
    "By pressing 'I agree' you consent to take part."
)


#: how a study draws objects unless its config says otherwise: people must recognise the landmarks
#: the instructions name (the simulator's default, primitives, is what the learned policies saw)
STUDY_OBJECTS = RECOGNISABLE_OBJECTS


@dataclass
class StudyConfig:
    """Settings of one human study (``--config study.yaml``; every field optional).

    ``episodes_per_participant``: size of each participant's randomised subset (VLNVerse App. D:
    about 50). ``collision_mode``: ``strict`` or ``telhop``, the rules the runner applies.
    ``linear_speed`` (m/s) and ``angular_speed_deg`` (°/s) are the speeds a held key drives at
    (clipped to the body's limits); ``look_repeat_s`` is the interval between camera tilts while
    Q/E is held. ``log_interval_s`` is the logging and streaming period (50 ms in the paper).
    ``idle_timeout_s``: a participant's simulator is closed after this long without a connection.
    ``max_episode_s``: driving time after which an episode ends as ``max_steps``.
    ``practice_episodes``: episodes every participant drives first, flagged as practice and never
    scored — a number N (the first N episodes of the study's file) or a list of episode ids; they
    are left out of the assignment. ``pause_s``: the break screen between episodes (s).
    ``withdraw_data``: what happens to a participant's logs when they withdraw (``keep`` or
    ``delete``); the consent text shown says which (:meth:`consent_shown`). ``render``: the view's
    ``quality`` and ``objects`` (as an eval config's ``render``), ``objects`` by default
    ``STUDY_OBJECTS`` (meshes: detailed furniture with baked light).
    """

    title: str = "vlnverse navigation study"
    consent_text: str = DEFAULT_CONSENT
    episodes_per_participant: int = 50
    collision_mode: str = "strict"
    body: str | None = None
    seed: int = 0
    image_size: int = 224
    hfov_deg: float = 90.0
    jpeg_quality: int = 80
    log_interval_s: float = 0.05
    linear_speed: float = 0.5
    angular_speed_deg: float = 60.0
    allow_backward: bool = True
    look_repeat_s: float = 0.25
    idle_timeout_s: float = 300.0
    max_episode_s: float = 600.0
    practice_episodes: Any = 0
    pause_s: float = 3.0
    withdraw_data: str = "keep"
    render: RenderConfig = field(default_factory=lambda: RenderConfig(objects=STUDY_OBJECTS))

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the field for any invalid value."""
        require(isinstance(self.consent_text, str) and self.consent_text.strip() != "", "consent_text",
                "is empty", "the consent text shown before the study")
        require(self.episodes_per_participant >= 1, "episodes_per_participant",
                f"got {self.episodes_per_participant}", "an integer >= 1")
        require(self.collision_mode in ("strict", "telhop"), "collision_mode", f"got {self.collision_mode!r}",
                "strict or telhop")
        require(16 <= self.image_size <= 1024, "image_size", f"got {self.image_size}", "16..1024 pixels")
        require(0 < self.hfov_deg < 180, "hfov_deg", f"got {self.hfov_deg}", "0 < hfov_deg < 180")
        require(1 <= self.jpeg_quality <= 100, "jpeg_quality", f"got {self.jpeg_quality}", "1..100")
        for name in ("log_interval_s", "linear_speed", "angular_speed_deg", "look_repeat_s", "idle_timeout_s",
                     "max_episode_s"):
            value = float(getattr(self, name))
            require(math.isfinite(value) and value > 0, name, f"got {value}", "a positive number")
        require(0.01 <= self.log_interval_s <= 1.0, "log_interval_s", f"got {self.log_interval_s}", "0.01..1 s")
        p = self.practice_episodes
        require((isinstance(p, int) and not isinstance(p, bool) and p >= 0)
                or (isinstance(p, list) and all(isinstance(e, str) and e for e in p)),
                "practice_episodes", f"got {p!r}", "a number >= 0 or a list of episode ids")
        require(math.isfinite(float(self.pause_s)) and 0 <= self.pause_s <= 120, "pause_s", f"got {self.pause_s}",
                "0..120 s")
        require(self.withdraw_data in ("keep", "delete"), "withdraw_data", f"got {self.withdraw_data!r}",
                "keep or delete")

    def consent_shown(self) -> str:
        """The consent text with what withdrawing does to the participant's data."""
        fate = ("deleted" if self.withdraw_data == "delete" else
                "kept (only your id and the robot's movements) and may be used")
        return (f"{self.consent_text.rstrip()}\n\nYou can withdraw at any time with the 'Withdraw' button. "
                f"If you withdraw, the data recorded so far is {fate}, and your participant id cannot be used again.")


def load_study_config(path: str | Path | None) -> StudyConfig:
    """The study config at ``path`` (validated), or the defaults when ``path`` is None."""
    if path is None:
        return StudyConfig()
    from ..core.errors import ConfigError

    if not Path(path).is_file():
        raise ConfigError("study config not found", file=path, expected="an existing YAML file")
    data = load_yaml(path) or {}
    if isinstance(data, dict):
        fill_render_objects(data, STUDY_OBJECTS)  # ``render: {quality: high}`` keeps the study's objects
    return from_dict(StudyConfig, data, file=path)


def recorded_render(folder: str | Path) -> RenderConfig:
    """The ``RenderConfig`` a run or study folder recorded (``config.json`` / ``study.json``: its
    ``config.render``); the simulator's defaults (primitives) for folders written before the field
    existed, which is what they were drawn with."""
    import json

    for name in ("config.json", "study.json"):
        path = Path(folder) / name
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8")).get("config") or {}
            return from_dict(RenderConfig, data.get("render") or {}, file=path, prefix="config.render")
    return RenderConfig()
