"""The in-GUI study panel of the Isaac Sim extension: a human study session inside Isaac Sim.

:class:`StudyPanelController` is the panel without any UI toolkit: pick an episode file, a scene in
it and a body, load them, then consent → instruction → keyboard driving → Enter, exactly as the
browser study runs — it drives the same :class:`vlnverse.study.session.ParticipantDriver` (unthreaded,
pumped from Kit's update loop on the main thread where PhysX steps) and writes the same files
(``DIR/participants/<pid>/<episode>.csv`` every 50 ms, ``<episode>.json`` at the end). The
simulator backend is ``isaac`` inside Isaac Sim (the keys drive the PhysX body).

:class:`vlnverse.kit.panel.StudyPanelWindow` is its ``omni.ui`` face (Kit-only code lives in
:mod:`vlnverse.kit`). Not run on Isaac Sim yet: see ``docs/isaac.md``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

#: Keyboard key names (carb.input.KeyboardInput member names) → the study's key names.
KEY_MAP = {"W": "forward", "UP": "forward", "S": "back", "DOWN": "back", "A": "left", "LEFT": "left",
           "D": "right", "RIGHT": "right", "Q": "look_up", "E": "look_down"}
#: Keys that end the episode (the participant's STOP).
END_KEYS = ("ENTER", "NUMPAD_ENTER")


def scenes_in(episodes_file: str | Path) -> list[str]:
    """Scene ids of the episodes in ``episodes_file``, in first-seen order."""
    from ..tasks.episode import load_episodes

    return list(dict.fromkeys(e.scene_id for e in load_episodes(Path(episodes_file))))


class StudyPanelController:
    """The panel's session logic (see module doc). ``on_message(dict)`` receives what the page
    would get (``consent``, ``episode``, ``episode_end``, ``complete``, ``error``); ``on_frame``
    the first-person JPEGs."""

    def __init__(self, *, backend: str = "isaac", on_message: Callable[[dict], None] = lambda m: None,
                 on_frame: Callable[[bytes], None] = lambda b: None):
        self.backend, self.on_message, self.on_frame = backend, on_message, on_frame
        self.store = self.driver = None
        self.pid: str | None = None
        self.episode_id: str | None = None
        self.held: set[str] = set()
        self.confirming = False  # Enter was pressed: waiting for the answer to "Are you at the goal?"

    def load(self, episodes_file: str | Path, scene_id: str, body: str | None, out: str | Path, participant: str,
             config: str | Path | None = None, scene_root: Any = None) -> dict:
        """Load the study: the episodes of ``scene_id`` from ``episodes_file`` (saved into ``out``),
        ``body`` (default: the config's or the task's), participant ``participant``. Scenes are
        found in ``scene_root`` (folders, or one ``os.pathsep``-separated list), the episode file's
        folder and the shipped scenes, as ``vlnverse eval`` finds them. Returns the ``consent`` message."""
        from ..core.errors import ConfigError
        from ..tasks.episode import load_episodes, save_episodes
        from .assign import StudyStore
        from .config import load_study_config
        from .log import check_participant_id
        from .session import ParticipantDriver

        self.close()
        pid = check_participant_id(participant)
        episodes = [e for e in load_episodes(Path(episodes_file)) if e.scene_id == scene_id]
        if not episodes:
            raise ConfigError(f"no episode on scene '{scene_id}'", file=episodes_file, field="scene_id",
                              expected=f"one of {scenes_in(episodes_file)}")
        cfg = load_study_config(config)
        if body:
            cfg.body = body
        source = Path(out) / f"panel_{scene_id}.jsonl"
        source.parent.mkdir(parents=True, exist_ok=True)
        save_episodes(source, episodes)
        from ..tasks.scene_roots import root_args

        src = Path(episodes_file)
        roots = root_args(scene_root) + [src if src.is_dir() else src.parent]  # the copy in ``out`` keeps portable paths
        self.store = StudyStore(out, cfg, source, scene_root=roots)
        self.pid = pid
        self.driver = ParticipantDriver(self.store, pid, on_frame=self.on_frame, on_event=self._event,
                                        threaded=False, backend=self.backend)
        msg = {"type": "consent", "title": cfg.title, "text": cfg.consent_text}
        self.on_message(msg)
        return msg

    def agree(self) -> dict:
        """The participant agreed: record consent and return the first episode's message (instruction pop-up)."""
        from .session import episode_message

        self.store.consent(self.pid)
        msg = episode_message(self.store, self.pid)
        self.episode_id = msg.get("episode_id")
        self.on_message(msg)
        return msg

    def begin(self) -> None:
        """Close the instruction pop-up and start (or resume) driving the current episode."""
        if self.episode_id is not None:
            self.driver.start(self.episode_id)

    def key(self, name: str, pressed: bool) -> None:
        """A keyboard event (``carb.input.KeyboardInput`` member name): held keys drive; Enter asks
        "Are you at the goal?" (a ``confirm`` message; :meth:`confirm` answers it), as the browser does."""
        if name in END_KEYS:
            if pressed and self.episode_id is not None and not self.confirming:
                self.confirming = True
                self.held.clear()
                self.driver.keys = frozenset()
                self.on_message({"type": "confirm", "question": "Are you at the goal?"})
            return
        key = KEY_MAP.get(name)
        if key is None or self.confirming:
            return
        (self.held.add if pressed else self.held.discard)(key)
        self.driver.keys = frozenset(self.held)

    def confirm(self, at_goal: bool) -> None:
        """The answer to "Are you at the goal?": yes ends the episode (the STOP), no goes on driving."""
        self.confirming = False
        if at_goal and self.episode_id is not None:
            self.driver.finish(self.episode_id, "stop")

    def update(self) -> None:
        """Call every Kit update: runs the driver's commands and its 50 ms tick when due."""
        if self.driver is not None:
            self.driver.pump()

    def _event(self, event: dict) -> None:
        from .session import episode_message

        self.on_message(event)
        if event.get("type") == "episode_end":
            self.held.clear()
            self.driver.keys = frozenset()
            msg = episode_message(self.store, self.pid)
            self.episode_id = msg.get("episode_id")
            self.on_message(msg)

    def close(self) -> None:
        """End the session (the CSV keeps every logged row) and close the simulator."""
        if self.driver is not None:
            self.driver.pause()
            self.driver.close()
            self.driver.pump()
            self.driver = None
