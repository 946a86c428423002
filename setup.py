"""Install the ``vlnverse`` package (source in ``exts/vlnverse/vlnverse``, the Kit extension layout) and the ``vlnverse`` command."""
from setuptools import find_packages, setup

packages = find_packages("exts/vlnverse", include=["vlnverse", "vlnverse.*"])

setup(
    name="vlnverse",
    version="0.1.0",
    description="Physics-aware toolkit for Vision-and-Language Navigation research",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    package_dir={"": "exts/vlnverse"},
    packages=packages,
    
    install_requires=[
        # kept compatible with Isaac Sim 5.x's Python 3.11 environment (numpy 1.26)
        "numpy>=1.26",
        "scipy>=1.11",
        "networkx>=3.0",
        "PyYAML>=6.0",
        "usd-core>=24.5",
        "mujoco>=3.3",
        "PyOpenGL>=3.1.7",
        "gymnasium>=1.0",
        "matplotlib>=3.7",
        "pillow>=10.0",
        "tqdm>=4.60",
        "rich>=13.0",
    ],
    extras_require={
        "learn": ["torch>=2.7", "tensorboard>=2.14"],
        "ray": ["ray>=2.40"],
        "test": ["pytest>=8.0"],
    },
    entry_points={"console_scripts": ["vlnverse=vlnverse.cli:main"]},
)
