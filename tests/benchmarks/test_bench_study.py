"""``vlnverse bench study``'s reads of the study folder: the client waits for the server's
``episode_end`` (the end record is written before it is sent), and a folder without a scored
episode is one line naming it, not a ``StopIteration`` in the viewer step."""
from __future__ import annotations

import asyncio
import json

import pytest

from vlnverse.benchmarks.study import _await_end, _first_record
from vlnverse.core.errors import VLNVerseError
from vlnverse.study.assign import StudyStore
from vlnverse.study.config import StudyConfig
from vlnverse.study.log import EpisodeLog, LogRow, write_episode_end
from vlnverse.study.viewer import Run


class _Socket:
    """A client socket that receives ``messages`` in order, then nothing (waits forever)."""

    def __init__(self, messages):
        self.messages = list(messages)

    async def recv(self):
        if self.messages:
            return self.messages.pop(0)
        await asyncio.Event().wait()


def test_client_waits_for_episode_end():
    ws = _Socket([b"\x00jpeg", json.dumps({"type": "ready"}), b"\x01jpeg", json.dumps({"type": "episode_end"}),
                  json.dumps({"type": "complete"})])
    asyncio.run(_await_end(ws, "S/participants/P1/e.json"))
    assert ws.messages == [json.dumps({"type": "complete"})]  # returned at episode_end, read no further


def test_no_episode_end_is_one_line_naming_the_end_record():
    with pytest.raises(VLNVerseError, match=r"^S/participants/P1/e\.json: no episode_end .* within 0\.01 s"):
        asyncio.run(_await_end(_Socket([b"\x00jpeg"]), "S/participants/P1/e.json", timeout=0.01))


def test_viewer_before_the_end_record_names_the_folder(tmp_path, study_episodes):
    """The folder as the bench read it when the server had not written the end record yet: the
    CSV is there, the episode is not ended, so the viewer has no record; then it ends."""
    store = StudyStore(tmp_path, StudyConfig(episodes_per_participant=1), study_episodes)
    episode = store.episodes[store.order[0]]
    log = EpisodeLog(store.folder("P1") / f"{episode.episode_id}.csv")
    x, y = episode.start_position[:2]
    for i in range(3):
        log.write(LogRow(0.05 * i, 1e9 + 0.05 * i, x + 0.025 * i, y, 0.0, 0.0, "forward", False))
    log.close()

    with pytest.raises(VLNVerseError) as err:
        _first_record(Run(0, tmp_path))
    assert str(err.value) == f"{tmp_path}: the viewer found no scored episode (1 not ended, 0 malformed, 0 practice)"

    write_episode_end(store.folder("P1"), episode.episode_id, termination="stop", collision_mode="strict")
    assert _first_record(Run(0, tmp_path)) == f"P1/{episode.episode_id}"
