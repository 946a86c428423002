"""vlnverse: a physics-aware toolkit for Vision-and-Language Navigation research.

Layers (each importable without Isaac Sim):

* ``vlnverse.scenes`` — environment layer: procedural homes as OpenUSD, occupancy/room maps,
  spatial-semantic scene graphs.
* ``vlnverse.sim`` — simulator layer: agent bodies, controllers, sensor rigs; MuJoCo backend
  by default, Isaac Sim when ``isaacsim`` is importable.
* ``vlnverse.tasks`` — task & dataset layer: A* path sampling, episodes and instructions.
* ``vlnverse.eval`` — evaluation protocol: metrics, Strict/Tel-Hop modes, runner, agents.
"""
__version__ = "0.1.0"
