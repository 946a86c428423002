"""Environment layer: procedural homes, USD I/O, occupancy/room maps and scene graphs."""
from .description import Door, Geom, Room, SceneDescription, SceneObject

__all__ = ["Door", "Geom", "Room", "SceneDescription", "SceneObject"]
