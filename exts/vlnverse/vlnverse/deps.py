"""Which distribution, and which ``vlnverse`` extra, brings each third-party module the toolkit
imports; the one line the CLI prints instead of a traceback when one is missing.

Standard library only (a missing numpy must still get its line): ``vlnverse.cli`` imports it
before anything else. ``tests/test_missing_dependencies.py`` checks the table against setup.py.
"""
from __future__ import annotations

#: top-level import name -> (distribution on PyPI, the extra that installs it; None: a core requirement)
PACKAGES: dict[str, tuple[str, str | None]] = {
    "numpy": ("numpy", None), "scipy": ("scipy", None), "networkx": ("networkx", None), "yaml": ("PyYAML", None),
    "pxr": ("usd-core", None), "mujoco": ("mujoco", None), "OpenGL": ("PyOpenGL", None),
    "gymnasium": ("gymnasium", None), "matplotlib": ("matplotlib", None), "mpl_toolkits": ("matplotlib", None),
    "PIL": ("pillow", None), "tqdm": ("tqdm", None), "rich": ("rich", None),
    "torch": ("torch", "learn"), "tensorboard": ("tensorboard", "learn"),
    "fastapi": ("fastapi", "study"), "starlette": ("fastapi", "study"), "uvicorn": ("uvicorn", "study"),
    "websockets": ("websockets", "study"),
    "ray": ("ray", "ray"),
    "pytest": ("pytest", "test"), "playwright": ("playwright", "test"),
}
#: modules no extra installs: how to get them
ELSEWHERE = {
    "torchvision": "pip install torchvision (the release matching torch)",
    "transformers": "pip install transformers",
    "omni": "run inside Isaac Sim 5.x / Omniverse Kit (exts/vlnverse/docs/README.md)",
    "carb": "run inside Isaac Sim 5.x / Omniverse Kit (exts/vlnverse/docs/README.md)",
    "isaacsim": "run inside Isaac Sim 5.x / Omniverse Kit (exts/vlnverse/docs/README.md)",
}


def install_hint(extra: str | None) -> str:
    """``pip install 'vlnverse[EXTRA]'`` (``vlnverse`` for a core requirement), and its checkout form."""
    if extra is None:
        return "pip install vlnverse (in a checkout: python3 -m pip install -e .)"
    return f"pip install 'vlnverse[{extra}]' (in a checkout: python3 -m pip install -e '.[{extra}]')"


def missing_dependency_message(module: str | None) -> str | None:
    """One line naming the package that provides ``module`` and how to install it; None for the
    toolkit's own modules (a missing one is a bug, not an install problem) or no name."""
    top = (module or "").partition(".")[0]
    if not top or top == "vlnverse":
        return None
    if top in PACKAGES:
        dist, extra = PACKAGES[top]
        what = f"the [{extra}] extra" if extra else "a core requirement"
        return f"{dist} is not installed (module '{module}' not found; {what} of vlnverse): {install_hint(extra)}"
    if top in ELSEWHERE:
        return f"module '{module}' not found: {ELSEWHERE[top]}"
    return f"module '{module}' not found: install the package that provides it"
