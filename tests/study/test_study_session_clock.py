"""The study session on a deterministic clock: ``ParticipantDriver`` (unthreaded, as the Isaac Sim
panel pumps it) with its ``time`` replaced by a fake clock, so what it logs does not depend on the
machine's load. Held keys reach the configured speeds within 5 % over the logged driving time,
whether the updates come every 50 ms or late and irregular as on a loaded machine (the session
applies the keys over the time that really passed and carries what whole control ticks leave)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from vlnverse.study import session
from vlnverse.study.assign import StudyStore
from vlnverse.study.config import StudyConfig
from vlnverse.study.log import read_rows

from study_helpers import assert_t_is_driving_time


class FakeClock:
    """``perf_counter``/``time``/``sleep`` for the session module: time passes only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def time(self) -> float:
        return 1.7e9 + self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


@pytest.mark.parametrize("updates", ["every_50ms", "late_and_irregular"])
def test_configured_speeds_are_reached(headings, tmp_path, monkeypatch, updates):
    clock = FakeClock()
    monkeypatch.setattr(session, "time", SimpleNamespace(perf_counter=clock.perf_counter, time=clock.time,
                                                          sleep=clock.sleep))
    store = StudyStore(tmp_path / "study", StudyConfig(seed=1, image_size=32, linear_speed=0.5,
                                                        angular_speed_deg=60.0), headings["free"])
    eid = store.current("S01")
    driver = session.ParticipantDriver(store, "S01", on_frame=lambda data: None, on_event=lambda event: None,
                                       threaded=False, backend="mujoco")
    # the gaps between the owner's updates: 50 ms, or 50-150 ms drawn from a seeded generator
    rng = np.random.default_rng(0)
    gap = (lambda: 0.05) if updates == "every_50ms" else (lambda: float(rng.uniform(0.05, 0.15)))

    def drive(keys: frozenset, seconds: float) -> None:
        driver.keys = keys
        end = clock.now + seconds
        while clock.now < end:
            clock.now += gap()
            assert driver.pump()

    try:
        driver.start(eid)
        driver.pump()
        drive(frozenset({"forward"}), 2.5)
        drive(frozenset(), 1.0)
        drive(frozenset({"left"}), 1.8)
        drive(frozenset(), 1.0)
    finally:
        driver.close()
        driver.pump()
    rows = read_rows(store.folder("S01") / f"{eid}.csv")
    assert not any(r.collided for r in rows)
    assert_t_is_driving_time(rows, tolerance=1e-3)  # one clock: t and wall time agree to the rounding

    def steady(action, skip_s):  # rows of a held key once it has reached speed (acceleration limits)
        held = [r for r in rows if r.action == action]
        return [r for r in held if r.t >= held[0].t + skip_s]

    fwd = steady("forward", 0.4)
    speed = sum(math.hypot(b.x - a.x, b.y - a.y) for a, b in zip(fwd, fwd[1:])) / (fwd[-1].t - fwd[0].t)
    turn = steady("left", 0.3)
    rate = math.degrees(sum(math.remainder(b.yaw - a.yaw, math.tau) for a, b in zip(turn, turn[1:]))) / (
        turn[-1].t - turn[0].t)
    assert len(fwd) >= 10 and len(turn) >= 8, (len(fwd), len(turn))
    assert speed == pytest.approx(0.5, rel=0.05), speed
    assert rate == pytest.approx(60.0, rel=0.05), rate
