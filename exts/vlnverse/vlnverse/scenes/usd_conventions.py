"""The on-disk conventions shared by the USD writer (``usd_write``) and reader (``usd_read``).

The layout of the files ``write_usd`` produces is documented in ``docs/scenes.md`` (metres, Z up,
``/World`` default prim, ``/World/Structure``, ``/World/Objects``, ``/World/Rooms``, ``/World/Doors``).
"""
from __future__ import annotations

#: Version of the on-disk conventions written into ``customLayerData["vlnverse"]``.
FORMAT_VERSION = 1
#: Every USD file suffix vlnverse reads (one list for every command); ``.usdz`` is read-only here.
USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")
#: Suffixes ``write_usd`` can produce (text ``.usda``, crate ``.usd``/``.usdc``).
WRITABLE_USD_SUFFIXES = (".usd", ".usda", ".usdc")
#: Prim attribute holding an object's or structure gprim's instance id.
INSTANCE_ID_ATTR = "vlnverse:instanceId"
#: Prefix of the prim attributes holding an object's free-form attributes.
ATTR_PREFIX = "vlnverse:attr:"
#: Attribute of a visual material naming its vlnverse material (``scenes.textures``).
MATERIAL_ATTR = "vlnverse:material"
#: Prim attributes naming the analytic shape a textured ``Mesh`` stands for (``box``, ``cylinder``,
#: ``sphere``) and its size (``Geom.size``): ``load_scene`` reads such a mesh back as that shape,
#: so occupancy and physics are those of the primitive.
PRIMITIVE_ATTR, PRIMITIVE_SIZE_ATTR = "vlnverse:primitive", "vlnverse:primitiveSize"
#: Attribute (``true``) of an object's ``Render`` prim: visual-only render meshes
#: (``scenes.object_meshes``, an instance of a prototype under ``RENDER_PROTOTYPES``) that
#: ``load_scene`` skips; the object's collision gprims beside it are then invisible.
RENDER_ONLY_ATTR = "vlnverse:renderOnly"
#: Abstract (``class``) prim holding the render-mesh prototypes of a stage.
RENDER_PROTOTYPES = "/World/RenderPrototypes"
#: Scope (``RENDER_ONLY_ATTR``) of the meshes drawing baked surfaces (``scenes.baked_light``), and
#: the folder beside the stage holding their light-map PNGs (``<folder>/<scene id>/<name>.png``).
BAKED_LIGHT_ROOT, LIGHTMAP_DIR = "/World/BakedLight", "lightmaps"
