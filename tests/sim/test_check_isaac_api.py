"""``tools/check_isaac_api.py`` without Isaac Sim: the signature sources it reads and the binding it does
can fail (the run against the real 6.2 packages is ``tests/test_isaac_real.py``, slow)."""
from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest

from vlnverse.sim.isaac.adapter import CALL_BY_SYMBOL, Call

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_isaac_api.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("check_isaac_api", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_binding_accepts_the_adapters_call_and_rejects_wrong_shapes_and_types(tool):
    # Isaac Sim 6.2's Camera.__init__ (isaacsim.sensors.camera camera.py), annotations as the source has them
    def camera(self, prim_path: str, name: str = "camera", frequency: int | None = None, dt=None,
               resolution: tuple[int, int] | None = None):
        pass

    sig = [inspect.signature(camera)]
    assert tool._bind(CALL_BY_SYMBOL["isaacsim.sensors.camera:Camera"], sig, drop_self=True) is None
    float_rate = Call("m:Camera", "x", "class", kwargs=("prim_path", "frequency"), types=(("frequency", "float"),))
    assert "frequency is annotated 'int | None', the adapter passes float" in tool._bind(float_rate, sig, True)
    wrong_kw = Call("m:Camera", "x", "class", kwargs=("prim_path", "rate"))
    assert "rate" in tool._bind(wrong_kw, sig, True)
    too_many = Call("m:Camera", "x", "class", nargs=6)
    assert "too many positional" in tool._bind(too_many, sig, True)


def test_pybind_docstring_signatures_with_overloads(tool):
    class Float3:
        """Float3(*args, **kwargs)
        Overloaded function.

        1. __init__(self: carb._carb.Float3) -> None

        2. __init__(self: carb._carb.Float3, arg0: float, arg1: float, arg2: float) -> None
        """

    sigs = tool._docstring_sigs(Float3, "__init__")
    assert [len(s.parameters) for s in sigs] == [1, 4]
    assert tool._bind(Call("carb:Float3", "x", "class", 3), sigs, drop_self=True) is None
    assert tool._bind(Call("carb:Float3", "x", "class", 2), sigs, drop_self=True) is not None


def test_a_type_stub_is_read_with_bases_declared_later_and_properties(tool, tmp_path):
    pyi = tmp_path / "_physx.pyi"
    pyi.write_text(
        "from __future__ import annotations\nimport carb\n"
        "class RaycastHit(SceneQueryHitLocation):\n    pass\n"
        "class SceneQueryHitLocation():\n    @property\n    def distance(self) -> float: ...\n"
        "class PhysXSceneQuery():\n    def raycast_all(self, origin: carb._carb.Float3, dir: carb._carb.Float3, "
        "distance: float, reportFn: typing.Callable[[RaycastHit], bool], bothSides: bool = False) -> bool: ...\n")
    module = tool._module_from_pyi("omni.physx.bindings._physx", pyi)
    sources = {}
    assert tool._check_one(CALL_BY_SYMBOL["omni.physx.bindings._physx:RaycastHit.distance"], module, sources) is None
    call = CALL_BY_SYMBOL["omni.physx.bindings._physx:PhysXSceneQuery.raycast_all"]
    assert tool._check_one(call, module, sources) is None and sources[call.symbol] == ".pyi stub"
    missing = Call("omni.physx.bindings._physx:PhysXSceneQuery.sweep_all", "x")
    assert "not defined" in tool._check_one(missing, module, sources)
