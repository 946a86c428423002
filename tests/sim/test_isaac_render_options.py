"""The Isaac backend takes the render options every backend takes (``quality``, ``objects``):
``objects="meshes"`` authors the render meshes (and the baked surfaces' light-mapped meshes)
visual-only and hides the collision primitives they draw; checked against the recording fake of Omniverse and the stage read back with usd-core."""
from __future__ import annotations

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.scenes.object_meshes import render_meshes
from vlnverse.scenes.procgen import generate_home
from vlnverse.scenes.usd_conventions import BAKED_LIGHT_ROOT
from vlnverse.sim import CameraSpec
from vlnverse.sim.api import ControlConfig
from vlnverse.sim.body import load_body
from vlnverse.sim.isaac.adapter import IsaacAdapter
from vlnverse.sim.isaac.backend import IsaacSimulator

from isaac_fake import FakeOmniverse


def _sim(scene, fake, tmp_path, **kw):
    adapter = IsaacAdapter(importer=fake.import_module)
    adapter.start(headless=True, running=False)
    return IsaacSimulator(scene, load_body("r2r_ce"), sensors=[CameraSpec("instance", "instance", 8, 6, 90.0)],
                          control=ControlConfig(), adapter=adapter, stage_dir=tmp_path, **kw)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """Home 11; its baked light (``objects="meshes"``) goes to a fresh cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("VLNVERSE_CACHE", str(tmp_path_factory.mktemp("cache")))
    yield generate_home(11)
    mp.undo()


def test_objects_meshes_authors_visual_only_meshes_and_hides_their_primitives(home, tmp_path):
    from pxr import Usd, UsdGeom, UsdPhysics

    meshes = render_meshes(home)
    fake = FakeOmniverse(room=6.0)
    with _sim(home, fake, tmp_path, quality="high", objects="meshes") as sim:
        layout = sim.layout
        renders = {p: i for p, i in layout.visuals.items() if not p.startswith(BAKED_LIGHT_ROOT + "/")}
        baked = layout.visuals.keys() - renders.keys()  # the baked surfaces' meshes (test_isaac_stage.py)
        assert {info.instance for info in renders.values()} == set(meshes)
        assert len(renders) == sum(len(parts) for parts in meshes.values())
        assert {layout.visuals[p].label for p in baked} == {"wall", "floor", "ceiling", "rug"}
        labels = [c[2]["labels"][0] for c in fake.calls if c[0] == "add_labels"]  # colliders and render meshes
        assert len(labels) == len(layout.colliders) + len(layout.visuals)
        assert sorted(labels) == sorted(i.label for i in [*layout.colliders.values(), *layout.visuals.values()])
        # a segmentation id on a render mesh maps back to its object's instance
        vpath, vinfo = next(iter(renders.items()))
        data = np.zeros((6, 8), np.uint32)
        data[:, 4:] = 5
        fake.instance = {"data": data, "info": {"idToLabels": {"0": "BACKGROUND", "5": vpath}}}
        obs = sim.reset(sim.pose)
        assert set(np.unique(obs["instance"][:, 4:])) == {vinfo.instance}
        # and one on a wall's light-mapped mesh (or a light subset of a render mesh) to its own
        wpath = next(p for p in sorted(baked) if layout.visuals[p].label == "wall")
        subset = f"{vpath}/light_045"
        data[:, :4] = 7
        fake.instance = {"data": data, "info": {"idToLabels": {"0": "BACKGROUND", "5": subset, "7": wpath}}}
        obs = sim.reset(sim.pose)
        assert set(np.unique(obs["instance"][:, :4])) == {layout.visuals[wpath].instance} != {vinfo.instance}
        assert set(np.unique(obs["instance"][:, 4:])) == {vinfo.instance}
        stage = Usd.Stage.Open(layout.usd_path)
        movable_meshed = {iid for iid in meshes if iid in layout.objects}
        assert movable_meshed, "the home has movable objects with render meshes"
        for path, info in renders.items():
            prim = stage.GetPrimAtPath(path)
            assert prim.IsA(UsdGeom.Mesh) and not prim.HasAPI(UsdPhysics.CollisionAPI)
            if info.instance in layout.objects:  # moves with its rigid body
                assert path.startswith(layout.objects[info.instance] + "/")
        meshed_geoms = {gi for o in home.objects if o.instance_id in meshes for gi in o.geom_indices}
        baked_geoms = {int(p.rsplit("_", 1)[1]) for p in baked}
        hidden = [p for p, c in layout.colliders.items()
                  if UsdGeom.Imageable(stage.GetPrimAtPath(p)).GetPurposeAttr().Get() == UsdGeom.Tokens.guide]
        assert len(hidden) == sum(1 for gi in meshed_geoms | baked_geoms if home.geoms[gi].collides)
        assert all(layout.colliders[p].instance in meshes or int(p.rsplit("_", 1)[1]) in baked_geoms for p in hidden)
        # the world transform of a render mesh is the one the generator placed it at
        iid = next(iter(movable_meshed))
        path = next(p for p, i in renders.items() if i.instance == iid)
        k = int(path.rsplit("_", 1)[1])
        world = UsdGeom.Xformable(stage.GetPrimAtPath(path)).ComputeLocalToWorldTransform(Usd.TimeCode.Default())
        assert np.allclose(np.array(world).T, meshes[iid][k].transform, atol=1e-5)


def test_primitives_default_authors_no_render_meshes(home, tmp_path):
    with _sim(home, FakeOmniverse(room=6.0), tmp_path, quality="fast") as sim:
        assert sim.layout.visuals == {}


@pytest.mark.parametrize("kw, field", [({"quality": "ultra"}, "quality"), ({"objects": "nurbs"}, "objects")])
def test_bad_render_options_are_one_config_error_naming_the_field(home, tmp_path, kw, field):
    with pytest.raises(ConfigError, match=f"{field}: got") as err:
        _sim(home, FakeOmniverse(room=6.0), tmp_path, **kw)
    assert "one of" in str(err.value)
