"""A study's folder and the per-participant assignment of episodes.

``DIR/episodes.jsonl`` — the study's episodes (copied from ``--episodes`` on the first start; a
later start must name the same episodes); ``DIR/study.json`` — the config;
``DIR/participants/<pid>/assignment.json`` — that participant's episode ids in order, the scenes
they have seen and when they consented; their CSV logs lie beside it (see :mod:`.log`).

Assignment (VLNVerse App. D): each participant gets a randomised subset of
``episodes_per_participant`` episodes from scenes they have not seen in an earlier batch; the
least-assigned episodes are drawn first so that episodes are balanced across participants. The
draw is seeded by the study seed and the participant id.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import threading
import time
import zlib
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from ..core.errors import ConfigError
from ..core.io import LOCK_FILE as LOCK_NAME
from ..core.io import to_jsonable, write_json_atomic
from .config import StudyConfig, recorded_render
from .log import check_participant_id, read_episode_end

EPISODES_FILE = "episodes.jsonl"
STUDY_FILE = "study.json"
PARTICIPANTS = "participants"
#: Earlier versions of a study (``--new-version``): ``DIR/versions/v<N>``, each a whole study folder.
VERSIONS = "versions"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def resolve_scenes_or_fail(episodes: list, roots: list[Path]) -> list:
    """Copies of ``episodes`` with resolved scene files; ``SceneError`` (one line naming the first
    episode whose scene is in no root, the roots searched, and how many more are missing)."""
    from ..core.errors import SceneError
    from ..tasks.scene_roots import SceneResolver

    resolver = SceneResolver(roots)
    out, missing = [], []
    for e in episodes:
        try:
            out.append(resolver.resolved(e))
        except SceneError as exc:
            missing.append(exc)
    if missing:
        more = f" ({len(missing) - 1} more episode(s) miss their scene)" if len(missing) > 1 else ""
        raise SceneError(f"{missing[0]}{more}")
    return out


def first_difference(before: list, after: list) -> str | None:
    """The first difference between two episode lists (content, not only ids), in words; None
    when they are the same."""
    if len(before) != len(after):
        return f"{len(before)} episodes before, {len(after)} now"
    for i, (a, b) in enumerate(zip(before, after)):
        da, db = a.to_dict(), b.to_dict()
        if da == db:
            continue
        if da.get("episode_id") != db.get("episode_id"):
            return f"episode {i + 1} is {da.get('episode_id')!r} before, {db.get('episode_id')!r} now"
        field = next(k for k in sorted(set(da) | set(db)) if da.get(k) != db.get(k))
        return f"episode {da['episode_id']!r} field {field!r} differs ({_short(da.get(field))} before, {_short(db.get(field))} now)"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def archive_version(out: Path, version: int) -> int:
    """Move study version ``version`` (its episodes, ``study.json`` and participants) into
    ``out/versions/v<version>`` (itself a study folder that ``study score`` and ``view`` read);
    returns ``version``."""
    import os

    target = out / VERSIONS / f"v{version}"
    if target.exists():
        raise ConfigError(f"{target} exists", file=out / STUDY_FILE, field="version",
                          expected="a study folder whose versions/ holds no folder for its current version")
    staging = out / VERSIONS / f".v{version}.tmp"
    staging.mkdir(parents=True, exist_ok=True)
    for name in (EPISODES_FILE, STUDY_FILE, PARTICIPANTS):
        if (out / name).exists():
            os.replace(out / name, staging / name)
    os.replace(staging, target)
    return version


#: The command whose output folder a study folder is (``core.io.claim_output_dir``).
STUDY_COMMAND = "study serve"


@contextlib.contextmanager
def open_study(out: str | Path, config: StudyConfig, episodes_file: str | Path | None = None, *,
               scene_root: Any = None, new_version: bool = False, holder: str = "",
               prepare: Callable[["StudyStore"], None] | None = None) -> Iterator["StudyStore"]:
    """The study folder ``out`` for a server, held for the block: refused when it is ``.``, an
    ancestor of the working folder or not a study folder (``core.io.check_output_dir``), and while
    another server holds it (``core.io.folder_lock``; ``holder`` — the server's address — names
    it in the refusal). ``prepare(store)`` runs before anything is written (e.g. loading every
    home); a start that fails before the block leaves the folder as it was (a new one removed)."""
    import os
    import shutil

    from ..core.io import OWNER_MARKER, check_output_dir, claim_output_dir, folder_lock

    out = check_output_dir(out, command=STUDY_COMMAND)
    before = set(os.listdir(out)) if out.is_dir() else None
    out.mkdir(parents=True, exist_ok=True)
    rule = "one server per study folder: stop it first, or send participants to it"
    try:
        lock = folder_lock(out, holder=holder, rule=rule)
        lock.__enter__()
    except BaseException:
        if before is None:
            shutil.rmtree(out, ignore_errors=True)
        raise
    try:
        try:
            store = StudyStore(out, config, episodes_file, scene_root=scene_root, new_version=new_version, commit=False)
            if prepare is not None:
                prepare(store)
            store.commit()
            claim_output_dir(out, command=STUDY_COMMAND)
        except BaseException:
            if before is None:
                shutil.rmtree(out, ignore_errors=True)
            else:  # an existing folder: only what this start added (its marker, the lock file)
                for name in {OWNER_MARKER, LOCK_NAME} - before:
                    with contextlib.suppress(OSError):
                        os.unlink(out / name)
            raise
        yield store
    finally:
        lock.__exit__(None, None, None)


def practice_ids(practice: Any, ids: list[str]) -> list[str]:
    """The practice episode ids of a study: the first N of ``ids``, or the listed ids (each must
    be one of the study's episodes, else ``ConfigError`` naming ``practice_episodes``)."""
    if isinstance(practice, int):
        return ids[:practice]
    unknown = [e for e in practice if e not in ids]
    if unknown:
        raise ConfigError(f"unknown episode id(s) {unknown}", field="practice_episodes",
                          expected=f"ids of the study's episodes, e.g. {ids[:3]}")
    return list(dict.fromkeys(practice))


class StudyStore:
    """The study folder: episodes, participants' assignments and their progress (thread-safe)."""

    def __init__(self, out: str | Path, config: StudyConfig, episodes_file: str | Path | None = None, *,
                 scene_root: Any = None, new_version: bool = False, commit: bool = True):
        from ..tasks.episode import load_episodes
        from ..tasks.scene_roots import recorded_roots, recorded_scene_roots, root_args, scene_roots

        self.out = Path(out)
        self.config = config
        self._lock = threading.RLock()
        saved = self.out / EPISODES_FILE
        replace = False  # whether this start writes the study's episodes (new study or new version)
        if episodes_file is not None:
            src = Path(episodes_file)
            if not src.exists():
                raise ConfigError("episode file not found", file=src, field="--episodes", expected="an episode JSONL file or folder")
            episodes = load_episodes(src)
            if saved.is_file():
                difference = first_difference(load_episodes(saved), episodes)
                if difference and not new_version:
                    raise ConfigError(f"the study folder holds other episodes: {difference}", file=saved,
                                      field="--episodes", expected="the same episodes to continue, a new --out folder, "
                                                                   "or --new-version to start a new study version")
                replace = bool(difference)
            else:
                replace = True
        elif saved.is_file():
            episodes = load_episodes(saved)
        else:
            raise ConfigError("no episodes: the folder holds no study", file=self.out,
                              field="--episodes", expected="an episode file for a new study")
        if not episodes:
            raise ConfigError("no episodes", file=saved if episodes_file is None else episodes_file,
                              expected="at least one episode")
        # every episode's scene is found now (the one resolver, vlnverse.tasks.scene_roots): a scene
        # in no root stops the server with one line for the experimenter, never a black view later
        if episodes_file is not None:
            dataset_dir = Path(episodes_file) if Path(episodes_file).is_dir() else Path(episodes_file).parent
            self.scene_roots = scene_roots(root_args(scene_root) + recorded_roots(self.out), dataset_dir)
        else:
            self.scene_roots = recorded_scene_roots(self.out, scene_root)
        self.episodes = {e.episode_id: e for e in resolve_scenes_or_fail(episodes, self.scene_roots)}
        self.practice = practice_ids(config.practice_episodes, [e.episode_id for e in episodes])
        self.order = [e.episode_id for e in episodes if e.episode_id not in self.practice]  # the assigned pool
        if not self.order:
            raise ConfigError(f"the {len(self.practice)} practice episode(s) leave no episode to assign",
                              field="practice_episodes", expected=f"fewer than the study's {len(episodes)} episodes")
        study_file = self.out / STUDY_FILE
        self.version = 1
        if study_file.is_file():
            self.version = int(json.loads(study_file.read_text(encoding="utf-8")).get("version", 1))
            if not replace:  # a study's participants all see one render (a new version may change it)
                before = recorded_render(self.out)
                if before != config.render:
                    raise ConfigError(f"the study folder was started with render {before.label()}, the config gives "
                                      f"{config.render.label()}", file=study_file, field="render",
                                      expected=f"render: {{quality: {before.quality}, objects: {before.objects}}} in "
                                               "the study config, a new --out folder, or --new-version")
        self._pending = (episodes if replace else None, saved.is_file() and replace)
        if commit:
            self.commit()

    def commit(self) -> None:
        """Write the study's episodes (new study or new version; the old version archived:
        :func:`archive_version`) and ``study.json``. Everything was checked before: a refused start
        never gets here, so it leaves the folder as it was (``commit=False`` defers this)."""
        if self._pending is None:
            return
        episodes, archive = self._pending
        self._pending = None
        if archive:
            self.version = archive_version(self.out, self.version) + 1
        if episodes is not None:
            from ..tasks.episode import save_episodes

            save_episodes(self.out / EPISODES_FILE, episodes)
        write_json_atomic(self.out / STUDY_FILE, {"config": to_jsonable(asdict(self.config)),
                                                  "episodes": len(self.episodes), "version": self.version,
                                                  "scene_roots": [str(r.resolve()) for r in self.scene_roots]})

    # ------------------------------------------------------------------ participants

    def folder(self, pid: str) -> Path:
        """``DIR/participants/<pid>``."""
        return self.out / PARTICIPANTS / check_participant_id(pid)

    def participants(self) -> list[str]:
        """Ids of every participant who consented (only they have episodes assigned; an id that
        never consented neither counts in the balancing nor is listed)."""
        root = self.out / PARTICIPANTS
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (self.record(p.name) or {}).get("consented_at"))

    def record(self, pid: str) -> dict[str, Any] | None:
        """The participant's assignment record as stored, or None (nothing is drawn or written)."""
        path = self.folder(pid) / "assignment.json"
        try:
            return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (OSError, ValueError):
            return None

    def issue_secret(self, pid: str) -> str:
        """A new session secret for a consented ``pid`` (``secrets.token_urlsafe``); only its
        SHA-256 is stored, so earlier secrets stop working."""
        secret = secrets.token_urlsafe(24)
        with self._lock:
            record = self.assignment(pid)
            record["session_sha256"] = _digest(secret)
            write_json_atomic(self.folder(pid) / "assignment.json", record)
        return secret

    def check_secret(self, pid: str, secret: Any) -> bool:
        """Whether ``secret`` is the session secret of ``pid`` (consented, not withdrawn); the
        comparison takes the same time for unknown ids."""
        record = self.record(pid) or {}
        stored = record.get("session_sha256") if not record.get("withdrawn_at") else None
        given = _digest(secret) if isinstance(secret, str) and secret else ""
        ok = hmac.compare_digest(given.encode(), (stored or "-" * 64).encode())
        return bool(ok and stored and given)

    def assignment(self, pid: str) -> dict[str, Any]:
        """The participant's assignment, drawn on first use (see the module docstring)."""
        with self._lock:
            path = self.folder(pid) / "assignment.json"
            if path.is_file():
                return json.loads(path.read_text(encoding="utf-8"))
            record = {"participant": pid, "practice": list(self.practice), "episodes": self._draw(pid, seen=set()),
                      "consented_at": None, "created_at": round(time.time(), 3)}
            record["seen_scenes"] = sorted({self.episodes[e].scene_id for e in record["episodes"]})
            write_json_atomic(path, record)
            return record

    def extend(self, pid: str) -> dict[str, Any]:
        """Give a participant who finished their batch a new one from scenes they have not seen."""
        with self._lock:
            record = self.assignment(pid)
            more = self._draw(pid, seen=set(record["seen_scenes"]), batch=len(record["episodes"]))
            record["episodes"] += more
            record["seen_scenes"] = sorted(set(record["seen_scenes"]) | {self.episodes[e].scene_id for e in more})
            write_json_atomic(self.folder(pid) / "assignment.json", record)
            return record

    def consent(self, pid: str) -> None:
        """Record that ``pid`` agreed to the consent text (the time only)."""
        with self._lock:
            record = self.assignment(pid)
            if not record.get("consented_at"):
                record["consented_at"] = round(time.time(), 3)
                write_json_atomic(self.folder(pid) / "assignment.json", record)

    def _counts(self) -> dict[str, int]:
        counts = dict.fromkeys(self.order, 0)
        for other in self.participants():
            for eid in (self.record(other) or {}).get("episodes", []):
                if eid in counts:
                    counts[eid] += 1
        return counts

    def _draw(self, pid: str, *, seen: set[str], batch: int = 0) -> list[str]:
        rng = np.random.default_rng([self.config.seed, zlib.crc32(pid.encode()), batch])
        candidates = [e for e in self.order if self.episodes[e].scene_id not in seen]
        counts = self._counts()
        tiebreak = rng.permutation(len(candidates))
        ranked = sorted(range(len(candidates)), key=lambda i: (counts[candidates[i]], tiebreak[i]))
        chosen = [candidates[i] for i in ranked[: self.config.episodes_per_participant]]
        return [chosen[i] for i in rng.permutation(len(chosen))]

    def withdrawn(self, pid: str) -> bool:
        """Whether ``pid`` withdrew (their id cannot be used again)."""
        path = self.folder(pid) / "assignment.json"
        return path.is_file() and bool(json.loads(path.read_text(encoding="utf-8")).get("withdrawn_at"))

    def withdraw(self, pid: str) -> dict[str, Any]:
        """Mark ``pid`` withdrawn; with ``withdraw_data: delete`` their logs are deleted (the
        assignment stays, holding only the id and the time, so the id is refused later)."""
        with self._lock:
            record = self.assignment(pid)
            record["withdrawn_at"] = round(time.time(), 3)
            record.pop("session_sha256", None)
            if self.config.withdraw_data == "delete":
                for path in self.folder(pid).iterdir():
                    if path.name != "assignment.json" and path.is_file():
                        path.unlink()
                record["data_deleted"] = True
            write_json_atomic(self.folder(pid) / "assignment.json", record)
            return record

    def is_practice(self, pid: str, episode_id: str) -> bool:
        """Whether ``episode_id`` is one of ``pid``'s practice episodes."""
        return episode_id in self.assignment(pid).get("practice", [])

    # ------------------------------------------------------------------ progress

    def progress(self, pid: str) -> tuple[int, int]:
        """(episodes ended, episodes assigned) of a participant, practice episodes not counted."""
        record = self.assignment(pid)
        folder = self.folder(pid)
        return sum(1 for e in record["episodes"] if read_episode_end(folder, e) is not None), len(record["episodes"])

    def current(self, pid: str) -> str | None:
        """The participant's first practice or assigned episode that has not ended (None when all have)."""
        record = self.assignment(pid)
        folder = self.folder(pid)
        return next((e for e in record.get("practice", []) + record["episodes"] if read_episode_end(folder, e) is None),
                    None)
