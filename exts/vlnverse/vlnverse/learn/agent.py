"""The ``policy`` eval agent: any checkpoint of ``vlnverse train`` acting in the runner.

``vlnverse eval CONFIG agent.name=policy agent.params.checkpoint=PATH``. Registration does not
import torch (the eval layer imports this module on first use of the name); constructing the
agent does, with a clear error when the ``[learn]`` extra is missing. Actions are the policy's
argmax (``sample: true`` samples from its softmax, seeded per episode). Continuous policies
(``action_space != "discrete"``, e.g. RDP) emit ``WaypointAction`` or STOP through their
``act_step``; their sampling is seeded by (agent seed, episode id), and each step's predicted
progress and any NaN re-samples go into the record's ``agent_outputs``. Panoramic policies
(``panoramic = True``: VLN-BERT) render the agent's depth panorama at each step, take the waypoint
predictor's candidates and emit the chosen ``WaypointAction`` or STOP; with no candidate they turn
in place and predict again (counted in ``agent_outputs``).

The agent brings its cameras: ``required_sensors`` asks the runner for the checkpoint's cameras
that the eval config's rig lacks (named ``policy_<name>`` when the rig uses the name for a camera
of another size), so any eval config works with any checkpoint.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..core.errors import ConfigError
from ..eval.agents import Agent, AgentState, register_agent
from ..sim.types import DiscreteAction, WaypointAction


def require_torch(needed_by: str = "the policy agent", field: str | None = "agent.name") -> None:
    """Raise ``ConfigError`` (one line: the package, the ``[learn]`` extra) when torch is not importable."""
    from ..deps import install_hint

    try:
        import torch  # noqa: F401
    except ModuleNotFoundError:
        raise ConfigError(f"{needed_by} needs torch, which is not installed", field=field,
                          expected=f"torch==2.13.0 and the [learn] extra: {install_hint('learn')}") from None


@register_agent("policy")
class PolicyAgent(Agent):
    """Wraps a ``VLNPolicy``: from ``checkpoint`` (a path, or a shipped checkpoint's name such as
    ``cma_fine_grained``), or an in-memory ``policy`` object."""

    def __init__(self, *, checkpoint: str | None = None, policy: Any = None, device: str = "cpu",
                 sample: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        require_torch()
        import torch

        from .checkpoint import policy_from_checkpoint, read_checkpoint, resolve_checkpoint, resolve_device

        if (checkpoint is None) == (policy is None):
            raise ConfigError("give exactly one of checkpoint / policy", field="agent.params.checkpoint",
                              expected="a checkpoint path")
        self.device = resolve_device(device)
        #: the training config's cameras (field of view, depth range), when known
        self.train_sensors: list | None = None
        if checkpoint is not None:
            checkpoint = str(resolve_checkpoint(checkpoint))
            data = read_checkpoint(checkpoint)
            policy = policy_from_checkpoint(data, path=checkpoint, device=self.device)
            self.train_sensors = list((data.get("config") or {}).get("sensors") or [])
        self.policy = policy
        self.checkpoint = checkpoint
        self.sample = bool(sample)
        self.max_length = int(getattr(policy, "max_instruction_length", 80))
        self._torch = torch
        self._instruction = None
        self._hidden = None
        self._prev = 0
        self._rng = np.random.default_rng(self.seed)


    def __getstate__(self) -> dict[str, Any]:
        """Picklable (parallel DAgger collection sends the learner to workers): without the torch module."""
        state = dict(self.__dict__)
        state.pop("_torch", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        import torch

        self.__dict__.update(state)
        self._torch = torch

    #: prefix of the cameras the agent adds when the rig has one of the checkpoint's names at another size
    ALIAS_PREFIX = "policy_"

    def _cameras(self) -> list[Any]:
        """The checkpoint's rig as ``CameraSpec``s (field of view and depth range from its training config)."""
        from ..sim.sensors import CameraSpec

        trained = {s.get("name"): s for s in (self.train_sensors or []) if isinstance(s, dict)}
        out = []
        for spec in self.policy.sensors:
            t = trained.get(spec["name"], {})
            out.append(CameraSpec(name=spec["name"], kind=spec["kind"], width=int(spec["shape"][1]),
                                  height=int(spec["shape"][0]), hfov_deg=float(t.get("hfov_deg", 90.0)),
                                  max_depth=float(t.get("max_depth", 10.0))))
        return out

    @staticmethod
    def _fits(camera: Any, spec: Any) -> bool:
        return camera is not None and camera.kind == spec.kind and (camera.width, camera.height) == (spec.width, spec.height)

    def required_sensors(self, sensors: list) -> list:
        """The checkpoint's cameras that ``sensors`` lacks (same name, kind and resolution); one
        whose name the rig uses for another camera is added as ``policy_<name>``."""
        have = {s.name: s for s in sensors}
        out = []
        for spec in self._cameras():
            alias = replace(spec, name=self.ALIAS_PREFIX + spec.name)
            if self._fits(have.get(spec.name), spec) or self._fits(have.get(alias.name), alias):
                continue
            out.append(alias if spec.name in have else spec)
        return out

    def check_sensors(self, sensors: list) -> None:
        """Raise ``ConfigError`` (one line) unless ``sensors`` carries every camera of the
        checkpoint's rig with the same kind and resolution, under its name or ``policy_<name>``
        (the runner adds missing ones first: ``required_sensors``)."""
        from .store import sensor_layout

        have = {s.name: s for s in sensors}
        missing = [s for s, spec in zip(self.policy.sensors, self._cameras())
                   if not self._fits(have.get(spec.name), spec)
                   and not self._fits(have.get(self.ALIAS_PREFIX + spec.name), spec)]
        if missing:
            def fmt(specs: Any) -> str:
                return ", ".join(f"{s['name']} {s['kind']} {'x'.join(map(str, s['shape'][:2][::-1]))}" for s in specs)

            raise ConfigError(f"the sensor rig [{fmt(sensor_layout(sensors))}] lacks the policy's "
                              f"[{fmt(missing)}]", field="sensors", file=self.checkpoint,
                              expected=f"the checkpoint's rig [{fmt(self.policy.sensors)}] (name, kind, width x height)")

    def reset(self, episode: Any, context: Any) -> None:
        """Encode the instruction; zero the recurrent state."""
        super().reset(episode, context)
        torch = self._torch
        self.policy.eval()
        tokens = self.policy.vocab.encode(episode.instruction_text, self.max_length)
        with torch.no_grad():
            self._instruction = self.policy.instruction(torch.from_numpy(tokens)[None].to(self.device))
        self._hidden = self.policy.initial_state(1, self.device)
        self._prev = 0
        self._rng = self.episode_rng(episode)
        if self.panoramic:
            self._context = context
            self.no_candidate_turns = self._empty = 0
            if getattr(self, "_perception", None) is None:
                from .vlnbert import Perception

                self._perception = Perception(self.policy.predictor)
        elif self.continuous:
            self._prev = self.policy.start_motion(1, self.device)
            self._generator = self.policy.generator_for(self.seed, episode.episode_id, self.device)

    @property
    def panoramic(self) -> bool:
        """Whether the policy acts on waypoint candidates of a panorama (VLN-BERT)."""
        return bool(getattr(self.policy, "panoramic", False))

    def choose(self, view_feats: np.ndarray, cands: np.ndarray) -> int:
        """VLN-BERT: advance the state token one step on (view features, candidates) and return the
        chosen index (a candidate, or len(cands) for STOP)."""
        torch = self._torch
        with torch.no_grad():
            f = torch.from_numpy(np.asarray(view_feats, dtype=np.float32))[None].to(self.device)
            c = torch.from_numpy(np.asarray(cands, dtype=np.float32))[None].to(self.device)
            logits, self._hidden = self.policy.step(self._instruction, f, c, self._hidden)
        if self.sample:
            p = torch.softmax(logits[0].double(), 0).cpu().numpy()
            return int(self._rng.choice(len(p), p=p / p.sum()))
        return int(torch.argmax(logits[0]).item())

    def _act_panoramic(self, state: AgentState) -> Any:
        import math

        from .vlnbert import candidate_action

        pose = state.pose
        feats, cands, n = self._perception(self._context.desc, self._context.body, (pose.x, pose.y, pose.yaw),
                                           relax=self._empty)
        if n == 0:  # the predictor found no candidate: turn in place, predict again next step (lower threshold)
            self.no_candidate_turns += 1
            self._empty += 1
            self.outputs.append({"no_candidates": True, "no_candidate_turns": self.no_candidate_turns})
            return WaypointAction(0.0, 0.0, math.radians(self.policy.turn_deg))
        self._empty = 0
        choice = self.choose(feats, cands)
        info = {"candidates": n, "choice": "STOP" if choice == len(cands) else choice}
        if choice == len(cands):
            self.outputs.append(info)
            return DiscreteAction.STOP
        info["waypoint"] = [round(float(cands[choice, 0]), 4), round(float(cands[choice, 1]), 3)]
        self.outputs.append(info)
        return candidate_action(float(cands[choice, 0]), float(cands[choice, 1]))

    @property
    def continuous(self) -> bool:
        """Whether the policy emits continuous (waypoint) actions."""
        return getattr(self.policy, "action_space", "discrete") != "discrete"

    def _frames(self, observations: dict[str, Any]) -> dict[str, Any]:
        torch = self._torch
        out = {}
        for spec in self.policy.sensors:
            name = spec["name"]
            if name not in observations or np.shape(observations[name]) != tuple(spec["shape"]):
                name = self.ALIAS_PREFIX + name if self.ALIAS_PREFIX + name in observations else name  # added by the runner
            if name not in observations:
                raise ConfigError(f"observation '{spec['name']}' missing (got {sorted(observations)})", field="sensors",
                                  expected=f"the checkpoint's sensor rig {self.policy.sensors}")
            frame = np.asarray(observations[name])
            if list(frame.shape) != list(spec["shape"]):
                raise ConfigError(f"sensor '{spec['name']}' gives {list(frame.shape)}", field="sensors",
                                  expected=f"shape {spec['shape']} as in the checkpoint")
            if spec["kind"] == "depth":
                frame = frame.astype(np.float16)  # what the policy was trained on (the cache stores float16)
            out[spec["name"]] = torch.from_numpy(np.ascontiguousarray(frame))[None].to(self.device)
        return out

    def propose(self, observations: dict[str, Any]) -> DiscreteAction:
        """Advance the recurrent state by one step and return the policy's action (the previous
        action fed next step is whatever ``set_previous`` records)."""
        torch = self._torch
        if self.continuous:
            with torch.no_grad():
                visual = self.policy.encode_frames(self._frames(observations))
                action, self._hidden, info = self.policy.act_step(self._instruction, visual, self._prev, self._hidden,
                                                                  generator=self._generator)
            self.outputs.append(info)
            return action
        with torch.no_grad():
            visual = self.policy.encode_frames(self._frames(observations))
            prev = torch.tensor([self._prev], device=self.device)
            logits, self._hidden = self.policy.step(self._instruction, visual, prev, self._hidden)
        if self.sample:
            p = torch.softmax(logits[0].double(), 0).cpu().numpy()
            return DiscreteAction(int(self._rng.choice(len(p), p=p / p.sum())))
        return DiscreteAction(int(torch.argmax(logits[0]).item()))

    def set_previous(self, action: Any) -> None:
        """Record the action actually executed (fed back as the previous action)."""
        if self.panoramic:
            return  # VLN-BERT's history is its state token
        if self.continuous:
            from .rdp import motion_vector

            self._prev = self._torch.from_numpy(motion_vector(action))[None].to(self.device)
            return
        self._prev = 1 + int(DiscreteAction.coerce(action))

    def act(self, observations: dict[str, Any], state: AgentState) -> Any:
        """The policy's action for this step."""
        if self.panoramic:
            return self._act_panoramic(state)
        action = self.propose(observations)
        self.set_previous(action)
        return action
