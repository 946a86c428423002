"""The agent body is one core type: its preset file, its defaults and every layer's defaults agree."""
from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from vlnverse.core.body import DEFAULT_BODY, R2R_CE, AgentBody, as_body, load_body
from vlnverse.core.errors import ConfigError


def test_the_default_preset_file_is_the_default_body():
    preset = load_body(DEFAULT_BODY)
    assert dataclasses.replace(preset, description="") == dataclasses.replace(R2R_CE, description="")
    assert as_body(None) == preset and as_body(preset) is preset and as_body("stretch").name == "stretch"
    import vlnverse.sim.body as sim_body  # the simulator layer re-exports the one definition

    assert sim_body.AgentBody is AgentBody and sim_body.load_body is load_body


def test_step_height_is_validated_against_the_body_height(tmp_path):
    bad = tmp_path / "tall_step.yaml"
    bad.write_text("name: tall_step\nheight: 0.35\nradius: 0.17\ncamera_height: 0.3\nstep_height: 0.4\n")
    with pytest.raises(ConfigError, match="step_height") as err:
        load_body(bad)
    assert str(bad) in str(err.value)


def test_every_layer_defaults_to_the_core_body():
    from vlnverse.scenes.occupancy import build_occupancy_map
    from vlnverse.scenes.procgen import REACHABILITY_RADIUS
    from vlnverse.sim.api import make_simulator
    from vlnverse.tasks.base import TaskConfig

    params = inspect.signature(build_occupancy_map).parameters
    assert params["agent_height"].default == R2R_CE.height and params["step_height"].default == R2R_CE.step_height
    assert REACHABILITY_RADIUS == R2R_CE.radius
    assert inspect.signature(make_simulator).parameters["body"].default == DEFAULT_BODY
    assert TaskConfig(task_type="x").body == DEFAULT_BODY


@pytest.mark.filterwarnings("ignore:.*no rooms recorded")
def test_maps_follow_the_body_step_height():
    """A 0.2 m high step blocks the default body (step height 0.15 m) but not one stepping 0.25 m."""
    from vlnverse.scenes.description import Geom, SceneDescription
    from vlnverse.scenes.maps import compute_scene_maps

    def box(label, centre, half):
        t = np.eye(4)
        t[:3, 3] = centre
        return Geom("box", t, np.array(half, dtype=float), label=label)

    desc = SceneDescription("step_room", [box("floor", (2, 2, -0.05), (2, 2, 0.05)), box("step", (2, 2, 0.1), (0.5, 0.5, 0.1))])
    low = compute_scene_maps(desc, R2R_CE, cache=False)
    high = compute_scene_maps(desc, dataclasses.replace(R2R_CE, step_height=0.25), cache=False)
    centre = np.array([[2.0, 2.0]])
    assert not low.occupancy.is_free(centre)[0] and high.occupancy.is_free(centre)[0]
