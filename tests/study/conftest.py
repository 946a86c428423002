"""Fixtures for the study and viewer tests: a few real episodes on a shipped home (and copies
turned to face open floor or a wall), a headless Chromium (Debian's ``chromium`` through
Playwright), and a folder for screenshots."""
from __future__ import annotations

import dataclasses
import math
import os
import shutil
from pathlib import Path

import pytest

from study_helpers import study_episodes  # noqa: F401 (a session fixture)

CHROMIUM = os.environ.get("VLNVERSE_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory) -> Path:
    """Where screenshots go: ``$VLNVERSE_TEST_ARTIFACTS/study`` or a pytest temp folder."""
    root = os.environ.get("VLNVERSE_TEST_ARTIFACTS")
    folder = Path(root) / "study" if root else tmp_path_factory.mktemp("artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


#: Playwright's limit for a page action or wait (ms): it only ends a hung run, so it is generous
#: (Playwright's own default, 30 s, can pass by on a loaded machine while a scene loads).
PAGE_TIMEOUT_MS = 120_000


class _Browser:
    """The Chromium browser, whose new pages wait up to ``PAGE_TIMEOUT_MS`` by default."""

    def __init__(self, chromium):
        self._chromium = chromium

    def new_page(self, *args, **kwargs):
        page = self._chromium.new_page(*args, **kwargs)
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        return page

    def new_context(self, *args, **kwargs):
        """A browser profile of its own (its pages share storage) with the same default timeout."""
        context = self._chromium.new_context(*args, **kwargs)
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        return context

    def __getattr__(self, name):
        return getattr(self._chromium, name)


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium (pages with a generous default timeout); the tests skip (with the
    reason) when it cannot start."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright)")
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as pw:
        try:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                          args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        except Exception as exc:  # noqa: BLE001 - any launch failure is a reason to skip
            pytest.skip(f"Chromium did not start: {str(exc).splitlines()[0]}")
        yield _Browser(chromium)
        chromium.close()


@pytest.fixture(scope="session")
def headings(study_episodes, tmp_path_factory):
    """Episodes of the test home turned to face open floor (``free``: 3 s at 0.5 m/s without
    contact) and a wall (``wall``: the earliest contact), found by driving the simulator."""
    from vlnverse.sim import make_simulator
    from vlnverse.sim.body import load_body
    from vlnverse.sim.types import AgentPose, VelocityAction
    from vlnverse.tasks.base import load_scene_context, load_task_config
    from vlnverse.tasks.episode import load_episodes, save_episodes
    from vlnverse.tasks.scene_roots import resolve_episode_scenes, scene_roots

    episodes = resolve_episode_scenes(load_episodes(study_episodes), scene_roots(None, study_episodes.parent))
    ep = episodes[0]
    cfg = load_task_config(ep.task_type)
    body = load_body(cfg.body)
    ctx = load_scene_context(ep.scene_path, body, cfg.map_resolution)
    sim = make_simulator(ctx.desc, body, sensors=[])
    first_contact = {}
    try:
        for k in range(16):
            yaw = k * math.tau / 16
            sim.reset(AgentPose(float(ep.start_position[0]), float(ep.start_position[1]), yaw))
            first_contact[yaw] = 99
            for i in range(70):
                out = sim.step(VelocityAction(0.5, 0.0, 0.05))
                result = out[1] if isinstance(out, tuple) else out
                if result.collided:
                    first_contact[yaw] = i
                    break
    finally:
        sim.close()
    free = max(first_contact, key=first_contact.get)
    wall = min(first_contact, key=first_contact.get)
    assert first_contact[free] == 99 and first_contact[wall] < 40, first_contact
    folder = tmp_path_factory.mktemp("flow-episodes")
    out = {}
    for name, yaw in (("free", free), ("wall", wall)):
        path = folder / f"{name}.jsonl"
        portable = load_episodes(study_episodes)[0].scene_path  # relative to the shipped scenes
        save_episodes(path, [dataclasses.replace(ep, episode_id=f"{name}-0", start_yaw=float(yaw), scene_path=portable)])
        out[name] = path
    return out
