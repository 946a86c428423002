"""The Isaac Sim study panel's session logic without Isaac Sim: ``StudyPanelController`` drives the
browser study's own ``ParticipantDriver`` (unthreaded, pumped as Kit's update loop would) on the
MuJoCo backend and writes the same CSV/JSON files; the extension module imports Omniverse only
through its lazy path."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from vlnverse.study import session
from vlnverse.study.log import COLUMNS, read_episode_end, read_rows, safe_name
from vlnverse.study.panel import StudyPanelController, scenes_in

from study_helpers import assert_t_is_driving_time

EXT = Path(__file__).resolve().parents[2] / "exts" / "vlnverse"


def _pump_until(ctl: StudyPanelController, ok, what: str, timeout: float = 120.0) -> None:
    """Pump as Kit's update loop would until ``ok()``: waits on what the session did, never on a
    duration tuned to an idle machine (the timeout only ends a hung run)."""
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"{what}: not done within {timeout:.0f} s"
        ctl.update()
        time.sleep(0.002)


def test_panel_runs_a_study_session_with_the_browser_studys_driver(study_episodes, tmp_path, monkeypatch):
    made = []
    real = session.ParticipantDriver

    class Recording(real):  # the panel must use the browser study's driver class itself
        def __init__(self, *a, **kw):
            made.append(kw)
            super().__init__(*a, **kw)

    monkeypatch.setattr(session, "ParticipantDriver", Recording)
    messages = []
    ctl = StudyPanelController(backend="mujoco", on_message=messages.append)
    scene = scenes_in(study_episodes)[0]
    consent = ctl.load(study_episodes, scene, "r2r_ce", tmp_path / "study", "p01")
    assert consent["type"] == "consent" and consent["text"]
    assert made and made[0]["threaded"] is False and made[0]["backend"] == "mujoco"
    first = ctl.agree()
    assert first["type"] == "episode" and first["index"] == 1 and first["instruction"]
    folder = tmp_path / "study" / "participants" / "p01"
    eid = first["episode_id"]
    csv_path = folder / f"{safe_name(eid)}.csv"

    def logged(action=None):
        rows = read_rows(csv_path, strict=True) if csv_path.is_file() else []
        return [r for r in rows if action is None or r.action == action]

    def confirms():
        return [m["type"] for m in messages].count("confirm")

    ctl.begin()
    _pump_until(ctl, lambda: logged(), "the episode loaded and logging")
    ctl.key("W", True)
    _pump_until(ctl, lambda: len(logged("forward")) >= 10, "10 rows of W held")
    ctl.key("W", False)
    _pump_until(ctl, lambda: logged()[-1].action == "idle", "an idle row after W released")
    ctl.key("ENTER", True)  # asks "Are you at the goal?"; a second Enter does not answer
    ctl.key("ENTER", True)
    _pump_until(ctl, lambda: confirms() >= 1, "the goal question asked")
    rows_before = len(logged())
    _pump_until(ctl, lambda: len(logged()) >= rows_before + 2, "two more rows while the question is open")
    assert confirms() == 1 and read_episode_end(folder, eid) is None
    ctl.confirm(False)  # keep driving
    rows_before = len(logged())
    _pump_until(ctl, lambda: len(logged()) >= rows_before + 2, "two more rows after 'keep driving'")
    assert read_episode_end(folder, eid) is None
    ctl.key("ENTER", True)
    ctl.confirm(True)
    _pump_until(ctl, lambda: read_episode_end(folder, eid) is not None, "the episode ended by the confirmed Enter")
    assert csv_path.read_text(encoding="utf-8").splitlines()[0] == ",".join(COLUMNS)
    rows = read_rows(csv_path)
    assert len(rows) >= 10
    # t is the measured driving time: it rises with the server's wall clock, never drifting from it
    assert_t_is_driving_time(rows)
    assert any(r.action == "forward" for r in rows)
    driven = [r for r in rows if r.action == "forward"]
    moved = ((rows[-1].x - rows[0].x) ** 2 + (rows[-1].y - rows[0].y) ** 2) ** 0.5
    assert driven and moved > 0.05  # the held key drove the body through physics
    end = read_episode_end(folder, eid)
    assert end is not None and end["termination"] == "stop" and end["collision_mode"] == "strict"
    kinds = [m["type"] for m in messages]
    assert kinds[:2] == ["consent", "episode"] and "episode_end" in kinds
    assert messages[-1]["type"] in ("episode", "complete") and messages[-1].get("episode_id") != eid
    ctl.close()
    assert ctl.driver is None


def test_panel_rejects_a_scene_without_episodes(study_episodes, tmp_path):
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="no episode on scene 'nowhere'"):
        StudyPanelController(backend="mujoco").load(study_episodes, "nowhere", None, tmp_path, "p01")


def test_extension_entry_point_imports_omniverse_only_lazily():
    code = ("import sys\n"
            "import vlnverse, vlnverse.study.panel, vlnverse.sim.isaac\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('omni', 'carb', 'isaacsim')]\n"
            "try:\n    import vlnverse.extension\nexcept ModuleNotFoundError as exc:\n    print(exc.name)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300,
                         env={"PYTHONPATH": str(EXT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "omni"  # only Kit (which provides omni.ext) imports the entry point
