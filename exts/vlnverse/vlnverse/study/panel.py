"""The in-GUI study panel of the Isaac Sim extension: a human study session inside Isaac Sim.

:class:`StudyPanelController` is the panel without any UI toolkit: pick an episode file, a scene in
it and a body, load them, then consent → instruction → keyboard driving → Enter, exactly as the
browser study runs — it drives the same :class:`vlnverse.study.session.ParticipantDriver` (unthreaded,
pumped from Kit's update loop on the main thread where PhysX steps) and writes the same files
(``DIR/participants/<pid>/<episode>.csv`` every 50 ms, ``<episode>.json`` at the end). The
simulator backend is ``isaac`` inside Isaac Sim (the keys drive the PhysX body).

:class:`StudyPanelWindow` is its ``omni.ui`` face (built by the extension's ``on_startup``); every
Omniverse import happens inside its methods. Not run on Isaac Sim yet: see ``docs/isaac.md``.
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


class StudyPanelWindow:  # pragma: no cover - needs omni.ui (Isaac Sim)
    """The ``omni.ui`` window of :class:`StudyPanelController` (created by the extension on startup)."""

    TITLE = "VLNVerse study"

    def __init__(self) -> None:
        import carb.input
        import omni.appwindow
        import omni.kit.app
        import omni.ui as ui

        from ..sim.body import list_bodies

        self._ui = ui
        self.controller = StudyPanelController(backend="isaac", on_message=self._message)
        self._popup = None
        self.window = ui.Window(self.TITLE, width=420, height=360)
        with self.window.frame:
            with ui.VStack(spacing=4):
                self._episodes = self._row("Episode file", "")
                with ui.HStack(height=22):
                    ui.Label("Scene", width=110)
                    self._scene = ui.StringField()
                    ui.Button("Scenes", width=70, clicked_fn=self._list_scenes)
                bodies = list_bodies()
                with ui.HStack(height=22):
                    ui.Label("Body", width=110)
                    self._body = ui.ComboBox(0, *bodies)
                self._bodies = bodies
                self._pid = self._row("Participant id", "")
                self._out = self._row("Output folder", str(Path.cwd() / "study"))
                self._roots = self._row("Scene roots", "")
                ui.Button("Load", height=28, clicked_fn=self._load)
                self._status = ui.Label("", word_wrap=True)
        keyboard = omni.appwindow.get_default_app_window().get_keyboard()
        self._input = carb.input.acquire_input_interface()
        self._keyboard = keyboard
        self._key_sub = self._input.subscribe_to_keyboard_events(keyboard, self._on_key)
        self._update_sub = omni.kit.app.get_app().get_update_event_stream().create_subscription_to_pop(
            lambda _e: self.controller.update(), name="vlnverse study panel")

    def _row(self, label: str, value: str) -> Any:
        ui = self._ui
        with ui.HStack(height=22):
            ui.Label(label, width=110)
            field = ui.StringField()
            field.model.set_value(value)
        return field

    def _list_scenes(self) -> None:
        try:
            self._status.text = "Scenes: " + ", ".join(scenes_in(self._episodes.model.get_value_as_string()))
        except Exception as exc:  # noqa: BLE001 - shown in the panel
            self._status.text = str(exc)

    def _load(self) -> None:
        try:
            body = self._bodies[self._body.model.get_item_value_model().as_int]
            self.controller.load(self._episodes.model.get_value_as_string(), self._scene.model.get_value_as_string(),
                                 body, self._out.model.get_value_as_string(), self._pid.model.get_value_as_string(),
                                 scene_root=self._roots.model.get_value_as_string() or None)
        except Exception as exc:  # noqa: BLE001 - one line in the panel
            self._status.text = str(exc)

    def _on_key(self, event, *_args) -> bool:
        import carb.input

        kinds = carb.input.KeyboardEventType
        if event.type in (kinds.KEY_PRESS, kinds.KEY_REPEAT, kinds.KEY_RELEASE):
            self.controller.key(event.input.name, event.type != kinds.KEY_RELEASE)
        return True

    def _show_popup(self, title: str, text: str, button: str, action: Callable[[], None],
                    other: tuple[str, Callable[[], None]] | None = None) -> None:
        ui = self._ui
        self._popup = ui.Window(title, width=460, height=240,
                                flags=ui.WINDOW_FLAGS_MODAL | ui.WINDOW_FLAGS_NO_RESIZE)

        def press(fn: Callable[[], None]) -> Callable[[], None]:
            def pressed() -> None:
                self._popup.visible = False
                fn()
            return pressed

        with self._popup.frame:
            with ui.VStack(spacing=8):
                ui.Label(text, word_wrap=True)
                ui.Button(button, height=30, clicked_fn=press(action))
                if other is not None:
                    ui.Button(other[0], height=30, clicked_fn=press(other[1]))

    def _message(self, msg: dict) -> None:
        kind = msg.get("type")
        if kind == "consent":
            self._show_popup(msg["title"], msg["text"], "I agree", self.controller.agree)
        elif kind == "confirm":
            self._show_popup("Finish?", msg["question"], "Yes, I am at the goal", lambda: self.controller.confirm(True),
                             ("No, keep driving", lambda: self.controller.confirm(False)))
        elif kind == "episode":
            head = ("Practice episode (not scored)" if msg.get("practice") else f"Episode {msg['index']} of {msg['total']}") \
                + (" (resumed)" if msg["resumed"] else "")
            self._show_popup(head, msg["instruction"] or "(no instruction)",
                             "Start (W/A/S/D or arrows drive, Q/E look, Enter ends)", self.controller.begin)
        elif kind == "complete":
            self._status.text = f"Study complete: {msg['done']} of {msg['total']} episodes."
        elif kind == "error":
            self._status.text = msg["message"]
        elif kind == "episode_end":
            self._status.text = f"Episode {msg['episode_id']} ended ({msg['termination']})."

    def destroy(self) -> None:
        """Unsubscribe, end the session and close the windows."""
        self._key_sub = self._input.unsubscribe_to_keyboard_events(self._keyboard, self._key_sub) and None
        self._update_sub = None
        self.controller.close()
        if self._popup is not None:
            self._popup.destroy()
        self.window.destroy()
