"""Small numpy mesh kit for procedural render meshes: boxes, lofts (superellipse rings: cylinders,
bowls, cushions, bottles), tubes along polylines and leaves, each with texture coordinates in
metres; parts are grouped by *tone* (one material per group). Triangles wind counter-clockwise seen
from outside. No dependency beyond numpy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class MeshPart:
    """Triangles of one tone: ``vertices`` (N, 3), ``faces`` (M, 3) int, ``uv`` (N, 2) in metres."""

    vertices: np.ndarray
    faces: np.ndarray
    uv: np.ndarray


@dataclass
class MeshBuilder:
    """Accumulates primitives per tone; ``parts()`` merges each tone into one ``MeshPart``."""

    groups: dict = field(default_factory=dict)

    def add(self, tone, vertices, faces, uv) -> None:
        """Add raw triangles (degenerate ones dropped)."""
        v = np.asarray(vertices, float).reshape(-1, 3)
        f = np.asarray(faces, np.int64).reshape(-1, 3)
        a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
        f = f[np.linalg.norm(np.cross(b - a, c - a), axis=1) > 1e-12]
        if len(f):
            self.groups.setdefault(tone, []).append((v, f, np.asarray(uv, float).reshape(-1, 2)))

    def box(self, tone, lo, hi) -> None:
        """Axis-aligned box from corner ``lo`` to ``hi`` (24 vertices: sharp edges)."""
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        verts, faces, uv = [], [], []
        for axis in range(3):
            for side in (0, 1):
                u_ax, v_ax = [(1, 2), (2, 0), (0, 1)][axis]
                if side == 0:
                    u_ax, v_ax = v_ax, u_ax
                base = len(verts)
                for du, dv in ((0, 0), (1, 0), (1, 1), (0, 1)):
                    p = np.empty(3)
                    p[axis] = hi[axis] if side else lo[axis]
                    p[u_ax] = hi[u_ax] if du else lo[u_ax]
                    p[v_ax] = hi[v_ax] if dv else lo[v_ax]
                    verts.append(p)
                    uv.append((p[u_ax], p[v_ax]))
                faces += [(base, base + 1, base + 2), (base, base + 2, base + 3)]
        self.add(tone, verts, faces, uv)

    def loft(self, tone, rings, *, exponent: float = 2.0, segments: int = 16, cap_bottom: bool = True,
             cap_top: bool = True, center=(0.0, 0.0)) -> None:
        """Surface through superellipse rings ``(a, b, z[, exponent])`` (half axes along x and y at
        height z) around ``center``; ``exponent`` 2 is an ellipse, larger is boxier (a ring's own
        fourth value overrides it). Caps close the first ring (facing down) and the last (up); a
        loft that rises and then comes back down inside (a tub, a cup) faces inwards there."""
        rings = [tuple(r) + (exponent,) * (4 - len(r)) for r in rings]
        t = np.linspace(0.0, 2 * math.pi, segments, endpoint=False)
        c, s = np.cos(t), np.sin(t)
        cx, cy = center
        verts, uv = [], []
        arc_v = 0.0
        prev = None
        for a, b, z, e in rings:
            px = np.sign(c) * np.abs(c) ** (2.0 / e)
            py = np.sign(s) * np.abs(s) ** (2.0 / e)
            ring = np.stack([cx + a * px, cy + b * py, np.full(segments, z)], axis=1)
            if prev is not None:
                arc_v += float(np.hypot(0.5 * (a + b) - prev[0], z - prev[1]))
            prev = (0.5 * (a + b), z)
            verts.append(ring)
            uv.append(np.stack([t * 0.5 * (a + b), np.full(segments, arc_v)], axis=1))
        v = np.concatenate(verts)
        uvs = np.concatenate(uv)
        faces = []
        n = segments
        for i in range(len(rings) - 1):
            for j in range(n):
                a0, a1 = i * n + j, i * n + (j + 1) % n
                b0, b1 = a0 + n, a1 + n
                faces += [(a0, a1, b1), (a0, b1, b0)]
        extra_v, extra_uv = [], []
        if cap_bottom:
            k = len(v) + len(extra_v)
            extra_v.append((cx, cy, rings[0][2]))
            extra_uv.append((cx, cy))
            faces += [(k, (j + 1) % n, j) for j in range(n)]
        if cap_top:
            k = len(v) + len(extra_v)
            top = (len(rings) - 1) * n
            extra_v.append((cx, cy, rings[-1][2]))
            extra_uv.append((cx, cy))
            faces += [(k, top + j, top + (j + 1) % n) for j in range(n)]
        if extra_v:
            v = np.concatenate([v, np.asarray(extra_v, float)])
            uvs = np.concatenate([uvs, np.asarray(extra_uv, float)])
        self.add(tone, v, faces, uvs)

    def rounded_box(self, tone, lo, hi, radius: float, *, exponent: float = 8.0, segments: int = 16,
                    steps: int = 2) -> None:
        """A soft box (cushions, mattresses): superellipse rings with edges rounded by ``radius``."""
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        half = (hi - lo) / 2
        r = float(min(radius, half[2] * 0.999, half[0] * 0.999, half[1] * 0.999))
        rings = []
        for k in range(steps + 1):  # bottom fillet
            ang = math.pi / 2 * k / steps
            inset = r * (1 - math.sin(ang))
            rings.append((half[0] - inset, half[1] - inset, lo[2] + r * (1 - math.cos(ang))))
        for k in range(steps + 1):  # top fillet
            ang = math.pi / 2 * k / steps
            inset = r * (1 - math.cos(ang))
            rings.append((half[0] - inset, half[1] - inset, hi[2] - r + r * math.sin(ang)))
        self.loft(tone, rings, exponent=exponent, segments=segments,
                  center=((lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2))

    def cylinder(self, tone, x, y, z0, z1, r, segments: int = 12) -> None:
        """Upright cylinder."""
        self.loft(tone, [(r, r, z0), (r, r, z1)], segments=segments, center=(x, y))

    def tube(self, tone, points, radius: float, segments: int = 8, caps: bool = True) -> None:
        """Circular tube of ``radius`` along the polyline ``points`` (K, 3)."""
        p = np.asarray(points, float).reshape(-1, 3)
        tang = np.gradient(p, axis=0)
        tang /= np.linalg.norm(tang, axis=1, keepdims=True)
        ref = np.array([0.0, 0.0, 1.0]) if abs(tang[0, 2]) < 0.9 else np.array([1.0, 0.0, 0.0])
        t = np.linspace(0.0, 2 * math.pi, segments, endpoint=False)
        verts, uv = [], []
        normal = np.cross(tang[0], ref)
        normal /= np.linalg.norm(normal)
        length = 0.0
        for i, (q, tg) in enumerate(zip(p, tang)):
            normal = normal - tg * float(normal @ tg)  # parallel transport
            normal /= np.linalg.norm(normal)
            binormal = np.cross(tg, normal)
            if i:
                length += float(np.linalg.norm(q - p[i - 1]))
            ring = q + radius * (np.cos(t)[:, None] * normal + np.sin(t)[:, None] * binormal)
            verts.append(ring)
            uv.append(np.stack([t * radius, np.full(segments, length)], axis=1))
        v = np.concatenate(verts)
        uvs = np.concatenate(uv)
        n = segments
        faces = []
        for i in range(len(p) - 1):
            for j in range(n):
                a0, a1 = i * n + j, i * n + (j + 1) % n
                faces += [(a0, a1, a1 + n), (a0, a1 + n, a0 + n)]
        if caps:
            k = len(v)
            v = np.concatenate([v, p[[0, -1]]])
            uvs = np.concatenate([uvs, np.zeros((2, 2))])
            last = (len(p) - 1) * n
            faces += [(k, (j + 1) % n, j) for j in range(n)]
            faces += [(k + 1, last + j, last + (j + 1) % n) for j in range(n)]
        self.add(tone, v, faces, uvs)

    def leaf(self, tone, base, yaw: float, tilt: float, length: float, width: float, droop: float = 0.3,
             steps: int = 6) -> None:
        """A two-sided leaf from ``base``: pointing at ``yaw`` (rad), raised ``tilt`` (rad) above the
        horizontal, bending down by ``droop`` (fraction of its length) towards the tip."""
        base = np.asarray(base, float)
        direction = np.array([math.cos(yaw) * math.cos(tilt), math.sin(yaw) * math.cos(tilt), math.sin(tilt)])
        side = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
        up = np.cross(side, direction)
        verts, uv = [], []
        for k in range(steps + 1):
            s = k / steps
            centre = base + direction * length * s - np.array([0.0, 0.0, 1.0]) * droop * length * s * s
            half = width / 2 * math.sin(math.pi * min(s * 1.15, 1.0)) if k < steps else 0.0
            fold = up * half * 0.25
            for e in (-1.0, 0.0, 1.0):
                verts.append(centre + side * half * e + (fold if e else 0.0))
                uv.append((half * e, length * s))
        v = np.asarray(verts)
        faces = []
        for k in range(steps):
            for e in range(2):
                a0, a1 = k * 3 + e, k * 3 + e + 1
                faces += [(a0, a1, a1 + 3), (a0, a1 + 3, a0 + 3)]
        f = np.asarray(faces)
        offset = up * 0.0015  # two sides a hair apart, so both are lit from their own side
        self.add(tone, np.concatenate([v + offset, v - offset]), np.concatenate([f, f[:, ::-1] + len(v)]),
                 np.concatenate([uv, uv]))

    def parts(self) -> dict:
        """``{tone: MeshPart}``, each tone's primitives merged in the order they were added."""
        out = {}
        for tone, items in self.groups.items():
            verts, faces, uvs, base = [], [], [], 0
            for v, f, uv in items:
                verts.append(v)
                faces.append(f + base)
                uvs.append(uv)
                base += len(v)
            out[tone] = MeshPart(np.concatenate(verts), np.concatenate(faces), np.concatenate(uvs))
        return out
