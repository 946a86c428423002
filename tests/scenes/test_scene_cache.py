"""The parsed-scene disk cache (``scenes.scene_cache``): a cached load equals the USD parse exactly
(types, dtypes, bytes), is keyed by the file's content and the reader, is written atomically,
never unpickles, survives a damaged file, and keeps no parse that warned."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from vlnverse.core.cache_key import content_digest
from vlnverse.core.paths import scenes_dir
from vlnverse.scenes import scene_cache, usd_read
from vlnverse.scenes.description import scene_content_hash

pytest.importorskip("pxr")

HOME = scenes_dir() / "home_0001.usd"
OTHER = scenes_dir() / "home_0002.usd"


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("VLNVERSE_SCENE_CACHE", raising=False)
    usd_read.clear_cache()
    yield tmp_path / "cache" / "scenes_parsed"
    usd_read.clear_cache()


def assert_same(a, b, where="desc"):
    """Equal values of the same types; arrays of the same dtype, shape and bytes; floats by repr."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b) and a.tobytes() == b.tobytes(), where
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, float):
        assert repr(a) == repr(b), where
    else:
        assert a == b, where


def parse(path, monkeypatch):
    """``load_scene`` with the disk cache off (the USD read)."""
    monkeypatch.setenv("VLNVERSE_SCENE_CACHE", "0")
    usd_read.clear_cache()
    try:
        return usd_read.load_scene(path)
    finally:
        monkeypatch.delenv("VLNVERSE_SCENE_CACHE")
        usd_read.clear_cache()


def test_a_cached_load_equals_the_usd_parse_exactly(cache_home, monkeypatch):
    ref = parse(HOME, monkeypatch)
    first = usd_read.load_scene(HOME)  # parses and stores
    files = list(cache_home.glob("*.npz"))
    assert len(files) == 1
    usd_read.clear_cache()
    called = []
    monkeypatch.setattr(usd_read, "_read_stage", lambda path: called.append(path))
    cached = usd_read.load_scene(HOME)  # from the disk cache: the USD is not read
    assert called == []
    assert_same(ref, first)
    assert_same(ref, cached)
    assert scene_content_hash(cached) == scene_content_hash(ref)
    assert len(cached.geoms) > 50 and any(g.vertices is not None for g in cached.geoms)
    cached.geoms[0].transform[0, 3] += 1.0  # every array is the caller's own copy
    usd_read.clear_cache()
    assert_same(ref, usd_read.load_scene(HOME))


def test_keyed_by_the_file_content_and_the_reader(cache_home, tmp_path, monkeypatch):
    scene = tmp_path / "scene.usd"
    shutil.copyfile(HOME, scene)
    a = usd_read.load_scene(scene)
    shutil.copyfile(OTHER, scene)  # the same path, another content: parsed again
    usd_read.clear_cache()
    b = usd_read.load_scene(scene)
    assert scene_content_hash(b) == scene_content_hash(parse(OTHER, monkeypatch)) != scene_content_hash(a)
    assert len(list(cache_home.glob("*.npz"))) == 2
    assert b.source_path == str(scene)
    # another reader version: another file, the old one is not used
    old = scene_cache.cache_file(content_digest(scene.read_bytes()))
    monkeypatch.setattr(scene_cache, "SCENE_CACHE_VERSION", scene_cache.SCENE_CACHE_VERSION + 1)
    new = scene_cache.cache_file(content_digest(scene.read_bytes()))
    assert new != old and not new.exists()
    usd_read.clear_cache()
    usd_read.load_scene(scene)
    assert new.is_file()


def test_writes_are_atomic(cache_home, monkeypatch):
    desc = parse(HOME, monkeypatch)

    real = Path.write_bytes

    def torn(self, data):  # a crash half-way through the write
        real(self, data[:100])
        raise OSError("disk full")

    with monkeypatch.context() as m:
        m.setattr(Path, "write_bytes", torn)
        assert scene_cache.store("ab" * 20, desc) is None
    assert list(cache_home.iterdir()) == []  # neither the file nor a temp file is left
    path = scene_cache.store("ab" * 20, desc)
    assert [p.name for p in cache_home.iterdir()] == [path.name]
    assert_same(desc, scene_cache.load("ab" * 20))


def test_never_unpickles_and_survives_a_damaged_file(cache_home, monkeypatch):
    ref = parse(HOME, monkeypatch)
    key = content_digest(HOME.read_bytes())
    path = scene_cache.cache_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    ran = []

    class Payload:
        def __reduce__(self):
            return (ran.append, ("unpickled",))

    with open(path, "wb") as f:  # a planted file with a pickled object in it
        np.savez(f, doc=np.array([Payload()], dtype=object))
    assert scene_cache.load(key) is None and ran == []
    got = usd_read.load_scene(HOME)  # read from the USD again and the file rewritten
    assert ran == []
    assert_same(ref, got)
    with np.load(path, allow_pickle=False) as z:
        assert all(z[k].dtype != object for k in z.files)
    path.write_bytes(path.read_bytes()[:1000])  # truncated
    usd_read.clear_cache()
    assert_same(ref, usd_read.load_scene(HOME))
    assert scene_cache.load(key) is not None


def test_parses_that_warned_are_not_kept(cache_home, tmp_path):
    from test_unlabelled_stage import write_unlabelled_stage

    path = write_unlabelled_stage(tmp_path / "stage.usda")
    for _ in range(2):  # the warnings on every process's first load, as without the cache
        usd_read.clear_cache()
        with pytest.warns(usd_read.SceneLoadWarning, match="without semantic labels"):
            usd_read.load_scene(path)
    assert not cache_home.exists() or list(cache_home.iterdir()) == []


def test_the_cache_can_be_turned_off(cache_home, monkeypatch):
    monkeypatch.setenv("VLNVERSE_SCENE_CACHE", "off")
    usd_read.load_scene(HOME)
    assert not cache_home.exists()


@pytest.mark.gl
def test_frames_are_byte_identical_with_and_without_the_cache(cache_home, monkeypatch):
    try:
        from vlnverse.sim.mujoco.gl import import_mujoco

        mujoco = import_mujoco()
        mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>"),
                        8, 8).close()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no OpenGL context: {exc}")
    from vlnverse.sim import AgentPose, make_simulator
    from vlnverse.sim.sensors import CameraSpec, PanoramaSpec

    spec = PanoramaSpec(name="p", views=1, modalities=("rgb", "depth"),
                        camera=CameraSpec(name="d", kind="depth", width=48, height=48, hfov_deg=90.0))
    frames = []
    usd_read.load_scene(HOME)  # stored
    for desc in (parse(HOME, monkeypatch), usd_read.load_scene(HOME)):
        sim = make_simulator(desc, sensors=[])
        try:
            lo, hi = desc.rooms[0].polygon.min(axis=0), desc.rooms[0].polygon.max(axis=0)
            out = []
            for k in range(6):
                x, y = lo + (hi - lo) * (0.3 + 0.08 * k)
                got = sim.render_at(AgentPose(float(x), float(y), 1.1 * k), spec)
                out.append({n: np.array(v) for n, v in got.items()})
            frames.append(out)
        finally:
            sim.close()
    for a, b in zip(*frames):
        for n in a:
            assert a[n].tobytes() == b[n].tobytes(), n
    assert frames[0][0]["p_rgb"].std() > 0
