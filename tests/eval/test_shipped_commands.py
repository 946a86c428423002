"""Every command in the comments of the shipped eval configs (tasks/eval/*.yaml, quickstart aside:
tests/eval/test_cli_quickstart.py) and in docs/mllm.md is run here, as written, against the
scripted OpenAI-compatible server where a model is needed (issue 55). Only three things are
added to a command: the server's URL for ``model.params.base_url``, and, to keep the suite fast,
a smaller workload (``SHRINK``: one home, two episodes, a few steps; 16 px cached views; a short
training run). A command added to a config or to the doc without an entry in ``RUNS`` fails
``test_every_documented_command_is_run``."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from mllm_server import message_text, openai_server  # noqa: E402
from vlnverse.paths import repo_root

CONFIGS = sorted(p for p in (repo_root() / "tasks" / "eval").glob("*.yaml") if p.stem != "quickstart")
DOC = repo_root() / "exts" / "vlnverse" / "docs" / "mllm.md"

#: per command kind, what is appended to keep the run small (never a change of what it runs)
SHRINK = {
    "eval": ["episodes.generate.max_scenes=1", "episodes.generate.episodes_per_scene=2", "max_steps=6",
             "report.enabled=false", "--no-progress"],
    "cache build": ["--size", "16"],
    "train room_classifier": ["train.generate.scenes=home_0014"],
    "train graph_nf_false_premise": ["train.generate.scenes=home_0014", "train.generate.episodes_per_scene=4",
                                     "val.val_unseen.generate.episodes_per_scene=2", "il.epochs=1"],
    "data export-sft": ["--view-size", "32", "--video-frames", "4", "--max-samples", "1"],
}


def documented_commands() -> list[str]:
    """The ``vlnverse ...`` commands of the configs' comments and of mllm.md (its code blocks and
    its inline commands with options), each as one line."""
    out = []
    for path in CONFIGS:
        for line in path.read_text().splitlines():
            m = re.match(r"#\s+(vlnverse\s.+?)(?:\s{2,}#.*)?$", line)
            if m:
                out.append(m.group(1).strip())
    text = DOC.read_text()
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for cmd in block.replace("\\\n", " ").splitlines():
            cmd = re.sub(r"\s{2,}#.*$", "", cmd).strip()
            if cmd.startswith("vlnverse "):
                out.append(" ".join(cmd.split()))
    for span in re.findall(r"`(vlnverse [a-z][^`]*)`", text):
        if "--" in span or "=" in span:
            out.append(" ".join(span.split()))
    return list(dict.fromkeys(out))


#: every documented command -> the concrete command line run (templates get values; None: as written)
RUNS: dict[str, str | None] = {
    "vlnverse cache build --scenes val_unseen": None,
    "vlnverse eval mllm_navgpt_graph": None,
    "vlnverse eval mllm_navgpt_graph agent.name=mapgpt_cot_reflection model.params.model=gpt-4o "
    "model.params.api_key_env=OPENAI_API_KEY out=runs/gpt4o_mapgpt": None,
    "vlnverse eval mllm_navgpt_graph model.params.base_url=http://localhost:8000/v1 "
    "model.params.model=Qwen/Qwen2.5-VL-7B-Instruct agent.name=mapgpt_cot_reflection out=runs/qwen_mapgpt": None,
    "vlnverse train room_classifier": None,
    "vlnverse eval roam_false_premise": None,
    "vlnverse eval roam_false_premise agent.params.room_labels=ground_truth out=runs/roam_gt_rooms": None,
    "vlnverse eval roam_false_premise agent.params.free=false out=runs/roam_no_free": None,
    "vlnverse eval roam_false_premise agent.params.stop_criterion=frontier out=runs/roam_frontier": None,
    "vlnverse eval roam_false_premise agent.params.stop_criterion=budget out=runs/roam_budget": None,
    "vlnverse eval roam_false_premise agent.params.detector=model out=runs/roam_model_detector": None,
    "vlnverse eval roam_false_premise agent.name=roam_detector out=runs/roam_detector_decides": None,
    "vlnverse eval roam_false_premise 'agent={name: navgpt, params: {max_reprompts: 2}}' out=runs/nf_navgpt": None,
    "vlnverse eval roam_false_premise 'agent={name: mapgpt, params: {max_reprompts: 2}}' out=runs/nf_mapgpt": None,
    "vlnverse eval roam_false_premise 'agent={name: som, params: {max_reprompts: 2}}' out=runs/nf_som": None,
    "vlnverse cache build --scenes val_unseen --objects primitives": None,
    "vlnverse train graph_nf_false_premise": None,
    "vlnverse eval roam_false_premise 'agent={name: graph_policy, params: {checkpoint: runs/train/graph_nf/best.pt}}' "
    "out=runs/nf_graph_policy": None,
    "vlnverse bench mllm": None,
    "vlnverse data export-sft EPISODES --task video_contextualized --out DIR [--view-size 224] [--video-frames 50] "
    "[--max-samples 8]": "vlnverse data export-sft runs/vc/dataset --task video_contextualized --out runs/sft",
    "vlnverse cache build --scenes SPLIT [--out DIR] [--size 224] [--hfov 90] [--quality Q] [--objects O]":
        "vlnverse cache build --scenes val_unseen --out views_fast --size 16 --hfov 90 --quality fast --objects primitives",
    "vlnverse cache build --objects primitives": "vlnverse cache build --scenes val_unseen --objects primitives",
}

#: the commands that train, bench or render a second cache: run in the slow suite
SLOW = {
    "vlnverse eval roam_false_premise agent.params.free=false out=runs/roam_no_free",
    "vlnverse eval roam_false_premise agent.params.stop_criterion=frontier out=runs/roam_frontier",
    "vlnverse eval roam_false_premise agent.params.stop_criterion=budget out=runs/roam_budget",
    "vlnverse eval roam_false_premise agent.params.detector=model out=runs/roam_model_detector",
    "vlnverse cache build --scenes val_unseen --objects primitives",
    "vlnverse train graph_nf_false_premise",
    "vlnverse eval roam_false_premise 'agent={name: graph_policy, params: {checkpoint: runs/train/graph_nf/best.pt}}' "
    "out=runs/nf_graph_policy",
    "vlnverse bench mllm",
    "vlnverse data export-sft EPISODES --task video_contextualized --out DIR [--view-size 224] [--video-frames 50] "
    "[--max-samples 8]",
    "vlnverse cache build --scenes SPLIT [--out DIR] [--size 224] [--hfov 90] [--quality Q] [--objects O]",
    "vlnverse cache build --objects primitives",
}


def reply(body, n):
    """A plausible navigator: FOUND where the detector sees the object, NOT_FOUND once the search
    is over, a score for the model detector, else marker 1 for two steps, then STOP / NOT_FOUND."""
    text = message_text(body["messages"][-1])
    if text.startswith("Is there a"):
        return "Score: 0.2"
    if "is in view here" in text:
        return "Action: FOUND"
    if "search of this room is over" in text or "Evidence for NOT_FOUND" in text:
        return "Action: NOT_FOUND"
    steps = text.count("\nStep ")
    if steps >= 2:
        return "Action: NOT_FOUND" if "NOT_FOUND" in text else "Action: STOP"
    return "Action: 1"


def test_every_documented_command_is_run():
    assert set(documented_commands()) == set(RUNS)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The folder the commands run in (relative ``runs/...`` land here), its user and view caches,
    and the scripted server; the view cache is built by the documented command."""
    root = tmp_path_factory.mktemp("commands")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("VLNVERSE_CACHE", str(root / "user_cache"))
    mp.setenv("VLNVERSE_VIEW_CACHE", str(root / "views"))
    mp.setenv("OPENAI_API_KEY", "sk-test-commands")
    with openai_server(reply) as (url, reqs):
        state = {"root": root, "url": url, "requests": reqs}
        assert _run("vlnverse cache build --scenes val_unseen", state) == 0
        yield state
    mp.undo()


def _run(documented: str, state: dict) -> int:
    from vlnverse.cli import main

    argv = shlex.split(RUNS.get(documented) or documented)[1:]
    kind = " ".join(argv[:2])
    if argv[0] == "eval":
        argv = [a if not a.startswith("model.params.base_url=") else f"model.params.base_url={state['url']}"
                for a in argv]
        if not any(a.startswith("model.params.base_url=") for a in argv):
            argv.append(f"model.params.base_url={state['url']}")
        argv += SHRINK["eval"]
    else:
        argv += SHRINK.get(kind, [])
    return main(argv)


def _evaluated(out: str) -> dict:
    import json

    summary = json.loads((Path(out) / "summary.json").read_text())
    assert summary["overall"]["episodes"] >= 1 and summary["overall"]["not_evaluated"]["episodes"] == 0
    return summary


FAST_EVALS = [c for c in RUNS if c.startswith("vlnverse eval") and c not in SLOW and "roam_false_premise" not in c]


@pytest.mark.parametrize("command", FAST_EVALS)
def test_mllm_config_commands_run(workdir, command):
    sent = len(workdir["requests"])
    assert _run(command, workdir) == 0
    out = next((a.split("=", 1)[1] for a in shlex.split(command) if a.startswith("out=")), "runs/mllm_navgpt_graph")
    _evaluated(out)
    assert len(workdir["requests"]) > sent  # the model was asked
    if "OPENAI_API_KEY" in command:
        assert workdir["requests"][-1]["auth"] == "Bearer sk-test-commands"


@pytest.fixture(scope="module")
def classifier(workdir):
    assert _run("vlnverse train room_classifier", workdir) == 0
    assert Path("runs/train/room_classifier/best.pt").is_file()


ROAM_FAST = [c for c in RUNS if "roam_false_premise" in c and c not in SLOW]


@pytest.mark.parametrize("command", ROAM_FAST)
def test_roam_config_commands_run(workdir, classifier, command):
    """ROAM, its ablations and the baselines (the baselines replace the whole agent block: the
    ``agent.name=navgpt`` override kept ROAM's params and exited 2 on ``room_labels``)."""
    assert _run(command, workdir) == 0
    out = next((a.split("=", 1)[1] for a in shlex.split(command) if a.startswith("out=")), "runs/roam_false_premise")
    summary = _evaluated(out)
    assert "RD_SR" in summary["overall"]["means"]


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(SLOW))
def test_slow_documented_commands_run(workdir, classifier, command):
    if "graph_policy" in command:
        assert _run("vlnverse cache build --scenes val_unseen --objects primitives", workdir) == 0
        assert _run("vlnverse train graph_nf_false_premise", workdir) == 0
    if "export-sft" in command:  # its EPISODES: a small video-contextualized dataset
        from vlnverse.cli import main

        assert main(["data", "generate", "--task", "video_contextualized", "--scenes", "home_0014",
                     "--episodes-per-scene", "1", "--out", "runs/vc/dataset", "--no-progress"]) == 0
    assert _run(command, workdir) == 0
