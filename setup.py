"""Install the ``vlnverse`` package (source in ``exts/vlnverse/vlnverse``, the Kit extension layout) and the ``vlnverse`` command.

The repository's top-level resource folders (``robots/``, ``scenes_usd/``, ``tasks/``) are
installed as package data under ``vlnverse/resources/`` (found with ``importlib.resources``, see
``vlnverse/paths.py``). The runtime requirements have one source of truth, the Kit manifest
``exts/vlnverse/config/extension.toml``: ``[python.pipapi] requirements`` (Kit pip-installs the same
list when the extension is enabled) plus ``[vlnverse] standalone_requirements`` (``usd-core``: outside
Kit only; inside Isaac Sim the toolkit uses Kit's ``pxr``, see ``exts/vlnverse/docs/isaac.md``).
"""
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "exts" / "vlnverse" / "config" / "extension.toml"
#: Resource folder at the repository root → its package inside the wheel, and the files it ships.
RESOURCES = {"robots": ["*.yaml"],
             "scenes_usd": ["*.usd", "*.usda", "*.usdc", "*.usdz", "*.json", "benchmarks/*.json", "textures/*.png",
                            "lightmaps/*/*.png"],
             "tasks": ["*/*.yaml", "train/*.pt"]}


def read_manifest() -> dict:
    """The Kit manifest, parsed as TOML (``tomllib``; ``tomli`` before Python 3.11)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with open(MANIFEST, "rb") as f:
        return tomllib.load(f)


manifest = read_manifest()
packages = find_packages("exts/vlnverse", include=["vlnverse", "vlnverse.*"])
resource_packages = {f"vlnverse.resources.{name}": name for name in RESOURCES}

setup(
    name="vlnverse",
    version=manifest["package"]["version"],
    description="Physics-aware toolkit for Vision-and-Language Navigation research",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    url=manifest["package"]["repository"],
    python_requires=">=3.10",
    package_dir={"": "exts/vlnverse", **resource_packages},
    packages=packages + list(resource_packages),
    # each built-in task type's default config lives in its folder (tasks/types/<type>/config.yaml)
    package_data={"vlnverse.study": ["static/*"], "vlnverse.results": ["paper_tables.json"],
                  "vlnverse.tasks.types": ["*/*.yaml"],
                  **{f"vlnverse.resources.{name}": patterns for name, patterns in RESOURCES.items()}},
    include_package_data=False,
    # kept compatible with Isaac Sim 5.x's Python 3.11 (numpy 1.26) and 6.x's Python 3.12 (numpy 2.3)
    install_requires=list(manifest["python"]["pipapi"]["requirements"])
    + list(manifest["vlnverse"]["standalone_requirements"]),
    extras_require={
        "learn": ["torch>=2.7", "tensorboard>=2.14", "safetensors>=0.4"],
        # the MLLM agents' chat client is the toolkit's own (vlnverse.tasks.chat): nothing to install
        "mllm": [],
        "ray": ["ray>=2.40"],
        "study": ["fastapi>=0.110", "uvicorn>=0.29", "websockets>=12"],
        # the study/viewer browser tests drive Debian's chromium through Playwright (no browser download)
        # ray: the parallel engine's Ray path is tested on a local Ray instance
        "test": ["pytest>=8.0", "fastapi>=0.110", "uvicorn>=0.29", "websockets>=12", "playwright>=1.40", "ray>=2.40"],
    },
    entry_points={"console_scripts": ["vlnverse=vlnverse.cli:main"]},
)
