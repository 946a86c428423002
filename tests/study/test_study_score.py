"""``vlnverse study score``: recorded CSVs scored with the evaluation's metrics; malformed ones counted."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from vlnverse.study.assign import StudyStore
from vlnverse.study.config import StudyConfig
from vlnverse.study.log import EpisodeLog, LogRow, write_episode_end
from vlnverse.study.score import resample_by_arc_length, score_study


def _drive(store, pid, episode, xy, termination="stop"):
    """Log a trajectory through ``xy`` at 0.5 m/s, one row per 50 ms, and end it."""
    pts = resample_by_arc_length(np.asarray(xy, float), 0.025)
    log = EpisodeLog(store.folder(pid) / f"{episode.episode_id}.csv")
    for i, (x, y) in enumerate(pts):
        log.write(LogRow(0.05 * i, 1e9 + 0.05 * i, x, y, 0.0, 0.0, "forward", False))
    log.close()
    if termination:
        write_episode_end(store.folder(pid), episode.episode_id, termination=termination, collision_mode="strict")
    return pts


def test_resample_by_arc_length():
    out = resample_by_arc_length(np.array([[0, 0], [1, 0], [1, 0.5]]), 0.25)
    assert np.allclose(out, [[0, 0], [0.25, 0], [0.5, 0], [0.75, 0], [1, 0], [1, 0.25], [1, 0.5]])
    assert resample_by_arc_length(np.array([[2.0, 3.0], [2.0, 3.0]]), 0.25).tolist() == [[2.0, 3.0]]


def test_human_row_mean_and_spread_over_participants(tmp_path, study_episodes, capsys):
    store = StudyStore(tmp_path, StudyConfig(), study_episodes)
    ep = store.episodes[store.order[0]]
    ref = np.asarray(ep.reference_path)[:, :2]
    driven = _drive(store, "P1", ep, ref)                                # follows the reference, stops at the goal
    _drive(store, "P2", ep, [ref[0], ref[0] + [0.01, 0.0]])       # stops at the start
    _drive(store, "P3", ep, ref, termination=None)                # tab closed, never ended: unfinished
    bad = store.folder("P4") / f"{ep.episode_id}.csv"
    bad.parent.mkdir(parents=True)
    bad.write_text("t,wall_time,x,y,yaw,pitch,action,collided\n0.0,1,nan,2,0,0,idle,0\n0.05,1,1,2,0,0,idle,0\n")
    write_episode_end(bad.parent, ep.episode_id, termination="stop", collision_mode="strict")

    summary = score_study(tmp_path)
    out, err = capsys.readouterr()
    assert "skipped malformed" in err and str(bad) in err
    assert summary["skipped"]["malformed"] == 1 and summary["skipped"]["unfinished"] == 1
    row = summary["human"][f"{ep.task_type}/strict"]
    assert row["participants"] == 2
    assert row["per_participant"]["P1"]["SR"] == 1.0 and row["per_participant"]["P2"]["SR"] == 0.0
    assert row["mean"]["SR"] == 0.5 and row["std"]["SR"] == 0.5
    length = float(np.sum(np.linalg.norm(np.diff(driven, axis=0), axis=1)))  # the logged path's length
    assert row["per_participant"]["P1"]["TL"] == pytest.approx(length, abs=1e-3)
    assert row["per_participant"]["P1"]["SPL"] == pytest.approx(1.0, abs=1e-3)
    assert row["per_participant"]["P1"]["nDTW"] > 0.95
    assert row["per_participant"]["P1"]["NE"] < 0.1
    assert row["per_participant"]["P2"]["NE"] == pytest.approx(ep.geodesic_distance, rel=0.1)
    assert "vlnverse study score" in out and "human" in out
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["human"][f"{ep.task_type}/strict"]["mean"]["SR"] == 0.5
    assert len((tmp_path / "human_episodes.jsonl").read_text().splitlines()) == 2


def test_score_refuses_a_folder_that_is_not_a_study(tmp_path):
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="not a study folder"):
        score_study(tmp_path)


def test_study_config_example_loads_and_bad_values_name_the_field(tmp_path):
    from vlnverse.core.errors import ConfigError
    from vlnverse.paths import tasks_dir
    from vlnverse.study.config import load_study_config

    cfg = load_study_config(tasks_dir() / "study" / "example.yaml")
    assert cfg.episodes_per_participant == 50 and "no personal data" in cfg.consent_text
    bad = tmp_path / "bad.yaml"
    bad.write_text("episodes_per_participant: 0\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: episodes_per_participant: got 0 \(expected an integer >= 1\)"):
        load_study_config(bad)
    bad.write_text("collision_mode: graph\n")
    with pytest.raises(ConfigError, match="collision_mode"):
        load_study_config(bad)


def test_assignment_is_balanced_seeded_and_avoids_seen_scenes(tmp_path, study_episodes):
    store = StudyStore(tmp_path, StudyConfig(episodes_per_participant=2, seed=1), study_episodes)
    store.consent("A")  # only consented participants count in the balancing
    a, b = store.assignment("A")["episodes"], store.assignment("B")["episodes"]
    assert len(a) == 2 and len(b) == 2
    assert len(set(a) | set(b)) == 3  # the least-assigned episodes go first: 3 episodes, 4 slots
    again = StudyStore(tmp_path / "other", StudyConfig(episodes_per_participant=2, seed=1), study_episodes)
    assert again.assignment("A")["episodes"] == a  # same seed and id, same draw
    more = store.extend("A")  # a new batch comes only from scenes A has not seen (none left here)
    assert more["episodes"] == a


def test_driver_closes_its_simulator_when_idle(tmp_path, study_episodes):
    import time

    from vlnverse.study.session import ParticipantDriver

    store = StudyStore(tmp_path, StudyConfig(idle_timeout_s=0.5), study_episodes)
    events, frames = [], []
    driver = ParticipantDriver(store, "IDLE1", on_frame=frames.append, on_event=events.append)
    driver.start(store.current("IDLE1"))
    deadline = time.monotonic() + 60
    while not events and time.monotonic() < deadline:
        time.sleep(0.05)
    assert events[0]["type"] == "ready" and frames and frames[0][:2] == b"\xff\xd8"  # a JPEG
    driver.pause()
    driver.join(120)  # returns as soon as the thread ends (idle 0.5 s); the limit only ends a hang
    assert not driver.alive and driver._sim is None  # idle: thread ended, simulator closed
