"""The ``policy`` eval agent: any checkpoint of ``vlnverse train`` acting in the runner.

``vlnverse eval CONFIG agent.name=policy agent.params.checkpoint=PATH``. Registration does not
import torch (the eval layer imports this module on first use of the name); constructing the
agent does, with a clear error when the ``[learn]`` extra is missing. The policy acts: the agent
keeps the per-episode memory that ``VLNPolicy.begin_episode`` gives and calls the policy's
``propose`` / ``executed`` (``act``) with itself as the helper that converts frames (``frames``),
picks from logits (``pick``: argmax, or ``sample: true`` draws from the softmax, seeded per
episode) and collects ``outputs`` (e.g. RDP's predicted progress, VLN-BERT's candidates).
A checkpoint of a plug-in policy needs its plug-in loaded (``plugins=[...]``).

The agent brings its cameras: ``required_sensors`` asks the runner for the checkpoint's cameras
that the eval config's rig lacks (named ``policy_<name>`` when the rig uses the name for a camera
of another size), so any eval config works with any checkpoint.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..core.errors import ConfigError
from ..run.agents import Agent, AgentState, register_agent


def require_torch(needed_by: str = "the policy agent", field: str | None = "agent.name") -> None:
    """Raise ``ConfigError`` (one line: the package, the ``[learn]`` extra) when torch is not importable."""
    from ..deps import install_hint

    try:
        import torch  # noqa: F401
    except ModuleNotFoundError:
        raise ConfigError(f"{needed_by} needs torch, which is not installed", field=field,
                          expected=f"torch==2.13.0 and the [learn] extra: {install_hint('learn')}") from None


@dataclass
class PolicyAgentParams:
    """``agent.params`` of ``policy`` (``device``: auto, cpu or cuda[:N]; ``policy``: an in-memory
    ``VLNPolicy``, for code that builds the agent itself)."""

    checkpoint: str | None = None
    policy: Any = None
    device: str = "cpu"
    sample: bool = False
    #: torch intra-op threads of the acting process (None: leave torch's setting). One by default:
    #: an eval worker acts on one frame at a time, and on a busy machine several spinning threads
    #: made the policy's forward pass ~30x slower (measured under load 6 on 2 cores).
    threads: int | None = 1
    #: what a waypoint policy (vlnbert, hnr, gama) sees: ``{view: panoramic|monocular, hfov_deg}``
    #: (``waypoints.grid.ObservationSetup``; None: the panorama)
    observation: dict[str, Any] | None = None

    def validate(self) -> None:
        """A device name and a thread count (exactly one of ``checkpoint`` / ``policy``: the constructor's rule)."""
        if self.device not in ("auto", "cpu") and not self.device.startswith("cuda"):
            raise ConfigError(f"got {self.device!r}", field="device", expected="auto, cpu or cuda[:N]")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise ConfigError(f"got {self.threads!r}", field="threads", expected="an integer >= 1, or null")


@register_agent("policy")
class PolicyAgent(Agent):
    """Wraps a ``VLNPolicy``: from ``checkpoint`` (a path, or a shipped checkpoint's name such as
    ``cma_fine_grained``), or an in-memory ``policy`` object."""

    Params = PolicyAgentParams

    def __init__(self, *, checkpoint: str | None = None, policy: Any = None, device: str = "cpu",
                 sample: bool = False, threads: int | None = 1, observation: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        require_torch()
        import torch

        PolicyAgentParams(device=device, threads=threads).validate()
        if threads is not None:
            torch.set_num_threads(threads)

        from .checkpoint import (policy_from_checkpoint, read_checkpoint, resolve_checkpoint, resolve_device,
                                 training_language)

        if (checkpoint is None) == (policy is None):
            raise ConfigError("give exactly one of checkpoint / policy", field="agent.params.checkpoint",
                              expected="a checkpoint path")
        self.device = resolve_device(device)
        from .waypoints.grid import ObservationSetup

        #: what a waypoint policy sees (``ObservationSetup``)
        self.observation = ObservationSetup.parse(observation, "agent.params.observation")
        #: the training config's cameras (field of view, depth range), when known
        self.train_sensors: list | None = None
        if checkpoint is not None:
            checkpoint = str(resolve_checkpoint(checkpoint))
            data = read_checkpoint(checkpoint)
            policy = policy_from_checkpoint(data, path=checkpoint, device=self.device)
            self.train_sensors = list((data.get("config") or {}).get("sensors") or [])
        #: the instruction language of the checkpoint's training episodes (None: not known)
        self.train_language: str | None = training_language(data) if checkpoint else None
        self.policy = policy
        self.checkpoint = checkpoint
        self.sample = bool(sample)
        self.max_length = int(policy.max_instruction_length)
        self._torch = torch
        #: the policy's acting memory of the current episode (``VLNPolicy.begin_episode``)
        self.memory: dict[str, Any] = {}
        #: what the policy keeps across episodes (e.g. VLN-BERT's panorama renderer)
        self.cache: dict[str, Any] = {}
        self._rng = np.random.default_rng(self.seed)
        #: batch slot -> {"memory", "rng", "outputs"} of its episode (``begin_slot``)
        self.slots: dict[int, dict[str, Any]] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (parallel DAgger collection sends the learner to workers): without the torch module."""
        state = dict(self.__dict__)
        state.pop("_torch", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        import torch

        self.__dict__.update(state)
        self._torch = torch

    def episodes_note(self, episodes: list) -> str | None:
        """A note when the fine-grained ``episodes`` are worded in another language than the
        checkpoint's training episodes (``tasks.instructions.languages.language_of``)."""
        from ..tasks.instructions.languages import language_of

        fine = [e for e in episodes if e.task_type == "fine_grained"]
        got = language_of(fine) if fine and self.train_language else self.train_language
        if got == self.train_language:
            return None
        return (f"the policy of {self.checkpoint} was trained on instruction language {self.train_language}, "
                f"the episodes are worded in {got or 'several languages'} (set language: {self.train_language} "
                "to generate them in its own)")

    #: prefix of the cameras the agent adds when the rig has one of the checkpoint's names at another size
    ALIAS_PREFIX = "policy_"

    def _cameras(self) -> list[Any]:
        """The checkpoint's rig as ``CameraSpec``s: each policy sensor's name, kind and size, with the
        field of view and depth range of its training config's ``sensors`` entry (``SensorConfig``'s
        defaults where the config has none)."""
        from ..run.setup import sensor_config

        trained = {s.get("name"): s for s in (self.train_sensors or []) if isinstance(s, dict)}
        out = []
        for i, spec in enumerate(self.policy.sensors):
            t = trained.get(spec["name"], {})
            entry = {"name": spec["name"], "kind": spec["kind"], "width": int(spec["shape"][1]),
                     "height": int(spec["shape"][0]), **{k: t[k] for k in ("hfov_deg", "max_depth") if k in t}}
            out.append(sensor_config(entry, field=f"sensors[{i}]", file=self.checkpoint).to_spec())
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
        """Encode the instruction; the policy starts its episode memory."""
        super().reset(episode, context)
        torch = self._torch
        self.policy.eval()
        tokens = self.policy.vocab.encode(episode.instruction_text, self.max_length)
        self._rng = self.episode_rng(episode)
        with torch.no_grad():
            instruction = self.policy.instruction(torch.from_numpy(tokens)[None].to(self.device))
            self.memory = self.policy.begin_episode(instruction, episode, context, self)

    def pick(self, logits: Any, slot: int | None = None) -> int:
        """The index chosen from one row of logits: argmax, or a seeded softmax draw with ``sample``
        (from the episode's generator: that of batch slot ``slot`` when given)."""
        torch = self._torch
        if self.sample:
            rng = self._rng if slot is None else self.slots[slot]["rng"]
            p = torch.softmax(logits.double(), 0).cpu().numpy()
            return int(rng.choice(len(p), p=p / p.sum()))
        return int(torch.argmax(logits).item())

    def acts_in_batches(self) -> bool:
        """Whether the policy acts for several episodes in one forward (``VLNPolicy.batch_acting``)."""
        return bool(self.policy.batch_acting)

    def begin_slot(self, slot: int, episode: Any) -> None:
        """Start ``episode`` in batch slot ``slot``: ``reset`` without a scene context."""
        self.reset(episode, None)
        self.slots[slot] = {"memory": self.memory, "rng": self._rng, "outputs": self.outputs}

    def act_batch(self, slots: list[int], observations: list[dict[str, Any]], states: list[AgentState]) -> list[Any]:
        """One forward for the episodes of ``slots`` (``VLNPolicy.propose_batch``), then ``executed``."""
        torch = self._torch
        memories = [self.slots[s]["memory"] for s in slots]
        with torch.no_grad():
            actions = self.policy.propose_batch(memories, [self.frames(obs) for obs in observations], self, slots)
        for memory, action in zip(memories, actions):
            self.policy.executed(memory, action)
        return actions

    def slot_outputs(self, slot: int) -> list[Any]:
        """What the policy logged for the episode of ``slot``."""
        return self.slots[slot]["outputs"]

    def frames(self, observations: dict[str, Any]) -> dict[str, Any]:
        """The checkpoint's cameras from ``observations`` as (1, ...) tensors (under their own
        name or ``policy_<name>``); a missing camera or another shape is a ``ConfigError``."""
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

    def propose(self, observations: dict[str, Any], state: AgentState | None = None) -> Any:
        """Advance the policy by one step and return its action (what is fed back next step is
        whatever ``set_previous`` records: DAgger may execute the teacher's action)."""
        with self._torch.no_grad():
            return self.policy.propose(self.memory, observations, state, self)

    def set_previous(self, action: Any) -> None:
        """Record the action actually executed."""
        self.policy.executed(self.memory, action)

    def act(self, observations: dict[str, Any], state: AgentState) -> Any:
        """The policy's action for this step."""
        with self._torch.no_grad():
            return self.policy.act(self.memory, observations, state, self)
