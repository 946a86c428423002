"""OpenUSD ↔ ``SceneDescription``: write our homes as Isaac-Sim-ready stages, read any stage back.

The public face of three modules, one concept each: ``usd_conventions`` (format version, suffixes,
attribute names), ``usd_write`` (``write_usd``: the layout is documented there and in
``docs/scenes.md``) and ``usd_read`` (``load_scene``: any stage, Y-up or in other units, labels from
UsdSemantics, the legacy ``Semantics`` schema or prim names). Import from here.
"""
from __future__ import annotations

from .usd_conventions import FORMAT_VERSION, USD_SUFFIXES, WRITABLE_USD_SUFFIXES
from .usd_read import FLOOR_LABELS, MAX_SCENE_EXTENT_M, SceneLoadWarning, check_geometry, clear_cache, load_scene
from .usd_write import write_usd

__all__ = ["FORMAT_VERSION", "USD_SUFFIXES", "WRITABLE_USD_SUFFIXES", "FLOOR_LABELS", "MAX_SCENE_EXTENT_M",
           "SceneLoadWarning", "check_geometry", "clear_cache", "load_scene", "write_usd"]
