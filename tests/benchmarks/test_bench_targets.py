"""``vlnverse bench sim`` states the targets of issues 18, 14 and 33 (what ``meets_targets`` checks)."""
from vlnverse.benchmarks.sim import TARGETS


def test_bench_sim_targets_are_the_issues_numbers():
    assert TARGETS == {"physics_steps_per_s": 50000, "rgbd_agent_steps_per_s": 60, "panoramas_per_s": 8,
                       "physics_efficiency": 0.8, "rgb_fps_large_over_small": 0.85, "default_over_fast_rgb": 0.5,
                       "default_meshes_over_fast_rgb": 0.45, "rgbd_agent_steps_per_s_default_meshes": 30}
