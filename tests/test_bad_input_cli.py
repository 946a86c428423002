"""Every bad input of issue 10 through the real CLI: exit status 2, one line on stderr naming the
file and field, never a traceback (defects 7, 10, 11 and 12)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = str(ROOT / "exts" / "vlnverse")
SCENE = ROOT / "scenes_usd" / "home_0014.usd"


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": PKG + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "vlnverse", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> Path:
    """A folder of bad input files."""
    from pxr import Usd

    d = tmp_path_factory.mktemp("bad")
    Usd.Stage.Open(str(SCENE)).Export(str(d / "good.usda"))
    text = (d / "good.usda").read_text()
    first = re.search(r"double3 xformOp:translate = \([^)]*\)", text).group(0)
    (d / "nan.usda").write_text(text.replace(first, "double3 xformOp:translate = (nan, 1, 0)", 1))
    (d / "inf.usda").write_text(text.replace(first, "double3 xformOp:translate = (inf, 1, 0)", 1))
    (d / "huge.usda").write_text(text.replace("metersPerUnit = 1", "metersPerUnit = 1000000", 1))
    (d / "scene_dir.usd").mkdir()
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    (d / "bomb.yaml").write_text("task_type: fine_grained\nseed_list: *i\n" + bomb)
    (d / "bomb_eval.yaml").write_text(bomb + "agent: {name: oracle}\ntask: fine_grained\nseed: *i\n"
                                      f"episodes: {d / 'eps.jsonl'}\nout: {d / 'run'}\n")
    (d / "binary.yaml").write_bytes(b"task_type: \xff\xfe\n")
    eps = [json.loads(line) for line in _episodes_text().splitlines()]
    (d / "eps.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))
    (d / "eps_bytes.jsonl").write_bytes(b"\xff\xfe\xfd\n")
    (d / "eps_digits.jsonl").write_text('{"version": ' + "9" * 5000 + "}\n")
    r2r = {"episodes": [{"episode_id": 1, "scene_id": "home_0014.usd", "start_position": [1, 0, -1],
                         "start_rotation": [0, float("nan"), 0, 1], "goals": [{"position": [2, 0, -2]}],
                         "instruction": {"instruction_text": "walk"}}]}
    (d / "r2r_nan.json").write_text(json.dumps(r2r))
    r2r["episodes"][0]["start_rotation"] = [0, 0, 0, 1]
    r2r["episodes"][0]["info"] = {"geodesic_distance": "far"}
    (d / "r2r_geo.json").write_text(json.dumps(r2r))
    deflate = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip: 1 MiB of spaces 300 times
    block = b" " * 2 ** 20
    bomb_gz = [deflate.compress(b'{"episodes": [')] + [deflate.compress(block) for _ in range(300)]
    (d / "r2r_bomb.json.gz").write_bytes(b"".join(bomb_gz) + deflate.compress(b"]}") + deflate.flush())
    (d / "eval_mode.yaml").write_text(f"agent: {{name: oracle}}\ntask: fine_grained\nepisodes: {d / 'eps.jsonl'}\n"
                                      f"collision_mode: strict\nmode_params: {{strict: {{bogus: 1}}}}\n"
                                      f"out: {d / 'run_mode'}\nsensors: [{{name: rgb, kind: rgb, width: 32, height: 32}}]\n")
    (d / "eval_agent.yaml").write_text(f"agent: {{name: random, params: {{bogus: 1}}}}\ntask: fine_grained\n"
                                       f"episodes: {d / 'eps.jsonl'}\nout: {d / 'run_agent'}\n"
                                       "sensors: [{name: rgb, kind: rgb, width: 32, height: 32}]\n")
    (d / "eval_sensor.yaml").write_text(f"agent: {{name: oracle}}\ntask: fine_grained\nepisodes: {d / 'eps.jsonl'}\n"
                                        "sensors: [{name: rgb, kind: rgb, width: 32, height: 32, max_depth: -1}]\n")
    far = dict(eps[0], start_position=[500.0, 500.0, 0.0])
    (d / "eps_far.jsonl").write_text(json.dumps(far) + "\n")
    (d / "eval_far.yaml").write_text(f"agent: {{name: oracle}}\ntask: fine_grained\nepisodes: {d / 'eps_far.jsonl'}\n"
                                     f"out: {d / 'run_far'}\nsensors: [{{name: rgb, kind: rgb, width: 32, height: 32}}]\n")
    return d


def _episodes_text() -> str:
    """One real fine-grained episode on home_0014 (generated once per session)."""
    from vlnverse.tasks.base import load_scene_context
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    ctx = load_scene_context(SCENE, "r2r_ce", resolution=0.05)
    free = ctx.maps.navigable.cell_to_world(__import__("numpy").argwhere(ctx.maps.navigable.grid == 0))
    a, b = free[len(free) // 3], free[2 * len(free) // 3]
    path = ctx.planner.shortest_path(tuple(a), tuple(b))
    ep = Episode("e0", ctx.scene_id, str(SCENE), "val_unseen", "fine_grained", [*map(float, a), 0.0], 0.0,
                 [Goal([*map(float, b), 0.0])], [[*map(float, p), 0.0] for p in path.waypoints], float(path.length),
                 [Instruction("walk to the other side")])
    return json.dumps(ep.to_dict()) + "\n"


GEN = ["data", "generate", "--task", "fine_grained", "--scenes", "home_0014", "--no-progress"]

CASES = {
    # (argv with {d} = the bad-input folder, text the one line must contain)
    "usd nan info": (["scenes", "info", "{d}/nan.usda"], "nan.usda"),
    "usd inf render-map": (["scenes", "render-map", "{d}/inf.usda", "--out", "{d}/m.png"], "inf.usda"),
    "usd scale info": (["scenes", "info", "{d}/huge.usda"], "huge.usda"),
    "usd nan generate": (["data", "generate", "--task", "fine_grained", "--scenes", "{d}/nan.usda",
                          "--episodes-per-scene", "1", "--out", "{d}/o1", "--no-progress"], "nan.usda"),
    "scene is a folder": (["scenes", "info", "{d}/scene_dir.usd"], "is a folder"),
    "resolution tiny": (["scenes", "info", str(SCENE), "--resolution", "0.002"], "--resolution"),
    "negative seed generate": (GEN + ["--episodes-per-scene", "1", "--seed", "-1", "--out", "{d}/o2"], "--seed"),
    "negative seed drive": (["sim", "drive", str(SCENE), "--seed", "-3", "--out", "{d}/o3"], "--seed"),
    "negative seed navgraph": (["data", "navgraph", str(SCENE), "--seed", "-1", "--out", "{d}/n.json"], "--seed"),
    "negative seed eval": (["eval", "{d}/eval_far.yaml", "episodes=null", "episodes.generate.seed=-1"],
                           "episodes.generate.seed"),
    "episodes per scene huge": (GEN + ["--episodes-per-scene", "1000000000", "--out", "{d}/o4"],
                                "--episodes-per-scene"),
    "instructions per episode huge": (GEN + ["--episodes-per-scene", "1", "--set",
                                             "params.instructions_per_episode=1000000", "--out", "{d}/o5"],
                                      "params.instructions_per_episode"),
    "instructions negative": (GEN + ["--episodes-per-scene", "1", "--set", "params.instructions_per_episode=-2",
                                     "--out", "{d}/o6"], "params.instructions_per_episode"),
    "radius nan": (GEN + ["--episodes-per-scene", "1", "--set", "params.landmark_radius=.nan", "--out", "{d}/o7"],
                   "params.landmark_radius"),
    "map resolution tiny": (GEN + ["--episodes-per-scene", "1", "--set", "map_resolution=0.000001",
                                   "--out", "{d}/o8"], "map_resolution"),
    "override into a string": (GEN + ["--episodes-per-scene", "1", "--set", "task_type.x=1", "--out", "{d}/o9"],
                               "task_type.x"),
    "override into a list": (["eval", "{d}/eval_far.yaml", "sensors.5.width=32"], "sensors.5.width"),
    "override malformed": (["eval", "{d}/eval_far.yaml", "seed=[1,"], "eval_far.yaml: seed: malformed YAML"),
    "yaml alias bomb task": (["data", "generate", "--task", "fine_grained", "--config", "{d}/bomb.yaml",
                              "--scenes", "home_0014", "--episodes-per-scene", "1", "--out", "{d}/o10"], "bomb.yaml"),
    "yaml alias bomb eval": (["eval", "{d}/bomb_eval.yaml"], "bomb_eval.yaml"),
    "yaml not utf-8": (["eval", "{d}/binary.yaml"], "binary.yaml"),
    "jsonl not utf-8": (["data", "show", "{d}/eps_bytes.jsonl"], "eps_bytes.jsonl:1"),
    "jsonl 5000 digits": (["data", "show", "{d}/eps_digits.jsonl"], "eps_digits.jsonl:1"),
    "r2r nan quaternion": (["data", "import-r2r", "{d}/r2r_nan.json", "--split", "val", "--out", "{d}/i.jsonl"],
                           "episodes[0].start_rotation"),
    "r2r string geodesic": (["data", "import-r2r", "{d}/r2r_geo.json", "--split", "val", "--out", "{d}/i.jsonl"],
                            "episodes[0].info.geodesic_distance"),
    "r2r gzip bomb": (["data", "import-r2r", "{d}/r2r_bomb.json.gz", "--split", "val", "--out", "{d}/i.jsonl"],
                      "inflates to more than"),
    "eval mode params": (["eval", "{d}/eval_mode.yaml", "--no-progress"], "eval_mode.yaml: mode_params.strict"),
    "eval agent params": (["eval", "{d}/eval_agent.yaml", "--no-progress"], "eval_agent.yaml: agent.params"),
    "eval sensor limits": (["eval", "{d}/eval_sensor.yaml"], "eval_sensor.yaml: sensors[0].max_depth"),
    "eval start outside": (["eval", "{d}/eval_far.yaml", "--no-progress"], "eps_far.jsonl:1: start_position"),
    "drive start outside": (["sim", "drive", str(SCENE), "--pose", "999,999,0", "--out", "{d}/o12"],
                            "home_0014.usd: --pose: pose (999.000, 999.000) lies outside scene"),
    "drive scene is a folder": (["sim", "drive", "{d}/scene_dir.usd", "--out", "{d}/o13"], "is a folder"),
    "drive negative random": (["sim", "drive", str(SCENE), "--random", "-5", "--out", "{d}/o14"], "--random"),
    "drive too many actions": (["sim", "drive", str(SCENE), "--actions", "F*1000000000", "--out", "{d}/o15"],
                               "--actions"),
    "scenes generate huge count": (["scenes", "generate", "--count", "1000000000", "--out", "{d}/o16"], "--count"),
    "file output onto a folder": (["data", "navgraph", str(SCENE), "--out", "{d}"], "is a folder"),
    "generate scene is a folder": (GEN[:4] + ["--scenes", "{d}/scene_dir.usd", "--episodes-per-scene", "1",
                                              "--out", "{d}/o17"], "scene_dir.usd: --scenes: is a folder"),
    "body mass huge": (GEN + ["--episodes-per-scene", "1", "--body", "{d}/heavy.yaml", "--out", "{d}/o11"],
                       "heavy.yaml: mass"),
}


def _prepare(bad: Path) -> None:
    body = (ROOT / "robots" / "r2r_ce.yaml").read_text()
    (bad / "heavy.yaml").write_text(re.sub(r"(?m)^mass:.*$", "mass: 1.0e+30", body))


def _check(name: str, rc: int, stderr: str, bad: Path) -> None:
    needle = CASES[name][1]
    assert "Traceback" not in stderr, (name, stderr[-2000:])
    assert rc == 2, (name, rc, stderr[-500:])
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, (name, stderr[-2000:])
    assert needle in lines[0] and lines[0].startswith("vlnverse: error: "), (name, lines[0])
    assert len(lines[0]) < 600


#: Runs every case through ``vlnverse.cli.main`` in one interpreter (one import, shared caches);
#: an exception escaping ``main`` is printed as the interpreter would (a traceback).
_DRIVER = """
import io, json, sys, traceback
from vlnverse.cli import main
results = {}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    sys.stderr = err
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    except BaseException:
        traceback.print_exc()
        rc = 1
    sys.stderr = sys.__stderr__
    results[name] = {"rc": rc, "stderr": err.getvalue()}
print(json.dumps(results))
"""


def test_every_bad_input_exits_2_with_one_line(bad):
    """All the cases through the CLI entry point in one subprocess."""
    _prepare(bad)
    cases = {name: [a.replace("{d}", str(bad)) for a in argv] for name, (argv, _) in CASES.items()}
    env = {**os.environ, "PYTHONPATH": PKG + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(cases)], cwd=bad, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    for name, result in results.items():
        _check(name, result["rc"], result["stderr"], bad)


@pytest.mark.parametrize("name", ["negative seed drive", "yaml alias bomb eval", "scene is a folder",
                                  "override into a string"])
def test_bad_input_in_a_fresh_process(bad, name):
    """A few cases as a user runs them: ``python -m vlnverse ...`` in its own process."""
    _prepare(bad)
    run = _cli([a.replace("{d}", str(bad)) for a in CASES[name][0]], bad)
    _check(name, run.returncode, run.stderr, bad)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_each_bad_input_in_its_own_process(bad, name):
    _prepare(bad)
    run = _cli([a.replace("{d}", str(bad)) for a in CASES[name][0]], bad)
    _check(name, run.returncode, run.stderr, bad)
