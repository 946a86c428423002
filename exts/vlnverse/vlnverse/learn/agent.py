"""The ``policy`` eval agent: any checkpoint of ``vlnverse train`` acting in the runner.

``vlnverse eval CONFIG agent.name=policy agent.params.checkpoint=PATH``. Registration does not
import torch (the eval layer imports this module on first use of the name); constructing the
agent does, with a clear error when the ``[learn]`` extra is missing. Actions are the policy's
argmax (``sample: true`` samples from its softmax, seeded per episode). Continuous policies
(``action_space != "discrete"``, e.g. RDP) emit ``WaypointAction`` or STOP through their
``act_step``; their sampling is seeded by (agent seed, episode id), and each step's predicted
progress and any NaN re-samples go into the record's ``agent_outputs``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ConfigError
from ..eval.agents import Agent, AgentState, register_agent
from ..sim.types import DiscreteAction


def require_torch() -> None:
    """Raise ``ConfigError`` when torch is not importable."""
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError:
        raise ConfigError("the policy agent needs torch", field="agent.name",
                          expected="pip install 'vlnverse[learn]' (torch==2.13.0)") from None


@register_agent("policy")
class PolicyAgent(Agent):
    """Wraps a ``VLNPolicy``: from ``checkpoint`` (a path), or an in-memory ``policy`` object."""

    def __init__(self, *, checkpoint: str | None = None, policy: Any = None, device: str = "cpu",
                 sample: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        require_torch()
        import torch

        from .checkpoint import policy_from_checkpoint, read_checkpoint, resolve_device

        if (checkpoint is None) == (policy is None):
            raise ConfigError("give exactly one of checkpoint / policy", field="agent.params.checkpoint",
                              expected="a checkpoint path")
        self.device = resolve_device(device)
        if checkpoint is not None:
            policy = policy_from_checkpoint(read_checkpoint(checkpoint), path=checkpoint, device=self.device)
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

    def check_sensors(self, sensors: list) -> None:
        """Raise ``ConfigError`` (one line) unless ``sensors`` carries every camera of the
        checkpoint's rig with the same name, kind and resolution."""
        from .store import sensor_layout

        given = {s["name"]: s for s in sensor_layout(sensors)}
        missing = [s for s in self.policy.sensors
                   if given.get(s["name"], {}).get("kind") != s["kind"] or list(given[s["name"]]["shape"]) != list(s["shape"])]
        if missing:
            def fmt(specs: Any) -> str:
                return ", ".join(f"{s['name']} {s['kind']} {'x'.join(map(str, s['shape'][:2][::-1]))}" for s in specs)

            raise ConfigError(f"the eval config's sensor rig [{fmt(given.values())}] lacks the policy's "
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
        if self.continuous:
            self._prev = self.policy.start_motion(1, self.device)
            self._generator = self.policy.generator_for(self.seed, episode.episode_id, self.device)

    @property
    def continuous(self) -> bool:
        """Whether the policy emits continuous (waypoint) actions."""
        return getattr(self.policy, "action_space", "discrete") != "discrete"

    def _frames(self, observations: dict[str, Any]) -> dict[str, Any]:
        torch = self._torch
        out = {}
        for spec in self.policy.sensors:
            if spec["name"] not in observations:
                raise ConfigError(f"observation '{spec['name']}' missing (got {sorted(observations)})", field="sensors",
                                  expected=f"the checkpoint's sensor rig {self.policy.sensors}")
            frame = np.asarray(observations[spec["name"]])
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
        if self.continuous:
            from .rdp import motion_vector

            self._prev = self._torch.from_numpy(motion_vector(action))[None].to(self.device)
            return
        self._prev = 1 + int(DiscreteAction.coerce(action))

    def act(self, observations: dict[str, Any], state: AgentState) -> Any:
        """The policy's action for this step."""
        action = self.propose(observations)
        self.set_previous(action)
        return action
