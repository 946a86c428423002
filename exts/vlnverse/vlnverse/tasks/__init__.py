"""Task & dataset layer: paths and geodesics (``pathing``), navigation graphs (``navgraph``), the
episode format (``episode``), task plumbing (``base``), dataset generation (``dataset``), R2R
import/export (``r2r``), instruction pipeline (``instructions``) and task types (``types``).

Submodules are imported on demand so ``vlnverse --help`` stays fast.
"""
