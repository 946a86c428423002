"""Stored navigable bounds: the evaluation driver checks episode bounds without loading a scene
that any process has loaded before (``vlnverse.tasks.base.scene_navigable_bounds``)."""
from __future__ import annotations

import pytest


def test_bounds_are_stored_by_loading_and_read_back_without_loading(tmp_path, monkeypatch):
    import vlnverse.tasks.base as base
    from vlnverse.core.body import load_body
    from vlnverse.tasks.dataset import resolve_scene_paths

    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path))
    scene = resolve_scene_paths("all")[0]
    body = load_body("r2r_ce")
    base._CONTEXT_CACHE.clear()
    ctx = base.load_scene_context(scene, body, 0.05)
    expected = base.navigable_bounds(ctx.maps)
    lo, hi = expected
    assert hi[0] - lo[0] > 2 and hi[1] - lo[1] > 2  # a home, metres
    assert len(list((tmp_path / "scene_bounds").glob("*.json"))) == 1

    def no_loading(*args, **kwargs):
        raise AssertionError("the scene was loaded")

    monkeypatch.setattr(base, "load_scene_context", no_loading)
    assert base.scene_navigable_bounds(scene, body, 0.05) == expected
    with pytest.raises(AssertionError, match="was loaded"):  # another resolution: not stored, loads
        base.scene_navigable_bounds(scene, body, 0.1)
