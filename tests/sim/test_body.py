"""Body presets: the camera must sit inside the body's height range (issue: presets validate on load)."""
from __future__ import annotations

import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.sim.body import list_bodies, load_body


def test_camera_above_the_body_is_rejected(tmp_path):
    bad = tmp_path / "tall_camera.yaml"
    bad.write_text("name: tall_camera\nheight: 0.88\nradius: 0.18\ncamera_height: 1.0\n")
    with pytest.raises(ConfigError, match="camera_height") as err:
        load_body(bad)
    assert str(bad) in str(err.value)


def test_camera_at_the_top_of_the_body_and_every_preset_load(tmp_path):
    ok = tmp_path / "top_camera.yaml"
    ok.write_text("name: top_camera\nheight: 0.88\nradius: 0.18\ncamera_height: 0.88\n")
    assert load_body(ok).camera_height == pytest.approx(0.88)
    for name in list_bodies():
        body = load_body(name)
        assert 0.0 < body.camera_height <= body.height
