"""The ``omni.ui`` window of the in-GUI study panel (Kit-only: built by the extension's ``on_startup``).

The session logic, with no UI toolkit, is :class:`vlnverse.study.panel.StudyPanelController`; every
Omniverse import happens inside this window's methods. Not run on Isaac Sim yet: see ``docs/isaac.md``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..study.panel import StudyPanelController, scenes_in


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
