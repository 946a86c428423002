"""One content-addressed key scheme (namespace, version, key parts) for the caches."""
from __future__ import annotations

import pytest

from vlnverse.core.cache_key import content_key


def test_the_key_depends_on_namespace_version_and_every_part():
    base = content_key("maps", 3, "abc", 0.25, [1, 2], {"b": 1, "a": 2})
    assert base == content_key("maps", 3, "abc", 0.25, [1, 2], {"a": 2, "b": 1})   # dict order does not matter
    assert len(base) == 64 and int(base, 16) >= 0
    others = [content_key("bounds", 3, "abc", 0.25, [1, 2], {"b": 1, "a": 2}),
              content_key("maps", 4, "abc", 0.25, [1, 2], {"b": 1, "a": 2}),
              content_key("maps", 3, "abd", 0.25, [1, 2], {"b": 1, "a": 2}),
              content_key("maps", 3, "abc", 0.25 + 1e-12, [1, 2], {"b": 1, "a": 2}),
              content_key("maps", 3, "abc", 0.25, [2, 1], {"b": 1, "a": 2}),
              content_key("maps", 3, "abc", 0.25, [1, 2], {"b": 1, "a": 3}),
              content_key("maps", 3, "abc", 0.25, [1, 2])]
    assert len({base, *others}) == 8
    assert content_key("maps", 3, "abc", length=20) == content_key("maps", 3, "abc")[:20]


@pytest.mark.parametrize("namespace, version", [("", 1), ("maps", "1"), ("maps", True), ("maps", 1.0)])
def test_a_key_without_namespace_or_integer_version_is_refused(namespace, version):
    with pytest.raises(ValueError, match="namespace and an integer version"):
        content_key(namespace, version, "x")


def test_the_maps_and_bounds_caches_use_it(monkeypatch):
    """Bumping a cache's version moves its entries (so stale files are never read)."""
    from vlnverse.core.body import as_body
    from vlnverse.scenes import maps
    from vlnverse.scenes.description import SceneDescription
    from vlnverse.tasks import base

    desc = SceneDescription(scene_id="s")
    before = maps._cache_path(desc, 0.2, 1.5, 0.05, 0.1)
    monkeypatch.setattr(maps, "MAPS_VERSION", maps.MAPS_VERSION + 1)
    after = maps._cache_path(desc, 0.2, 1.5, 0.05, 0.1)
    assert before.parent == after.parent and before.name.startswith("s-") and before != after
    key = base._bounds_key("d" * 40, as_body("r2r_ce"), 0.05)
    monkeypatch.setattr(base, "BOUNDS_VERSION", base.BOUNDS_VERSION + 1)
    assert base._bounds_key("d" * 40, as_body("r2r_ce"), 0.05) != key and key.startswith("d" * 40 + "_")


def test_the_learning_and_response_caches_use_it(tmp_path, monkeypatch):
    """The learning caches' folders and the MLLM response cache are named by ``content_key``:
    a folder follows its namespace, version and key, and the same key finds the same folder."""
    from vlnverse.run.chat_models import ResponseCache
    from vlnverse.learn import cache

    key = {"task": "fine_grained", "seed": 3}
    folder = cache.keyed_folder(tmp_path, "datasets", key)
    assert folder == tmp_path / "datasets" / content_key("datasets", cache.CACHE_VERSION, key, length=12)
    assert cache.keyed_folder(tmp_path, "datasets", dict(reversed(key.items()))) == folder
    assert cache.keyed_folder(tmp_path, "homes", key).name != folder.name
    root, store, status = cache.keyed_store(tmp_path, "obs", key, what="observation")
    assert root.name == content_key("obs", cache.CACHE_VERSION, key, length=16) and status == "built"
    from vlnverse.core.errors import VLNVerseError

    with pytest.raises(VLNVerseError, match="observation cache .* cannot be reused after rank 0 built it \\(missing\\)"):
        cache.keyed_store(tmp_path, "obs", key, what="observation", build=False)
    monkeypatch.setattr(cache, "CACHE_VERSION", cache.CACHE_VERSION + 1)
    assert cache.keyed_folder(tmp_path, "datasets", key) != folder  # a new format never reads old folders
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert ResponseCache.key(request) == content_key("mllm_responses", ResponseCache.VERSION, request)
