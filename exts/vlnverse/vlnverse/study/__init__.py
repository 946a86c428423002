"""Human studies in the browser and the episode visualizer (evaluation layer).

- ``vlnverse study serve``: participants drive the agent through physics with the keyboard
  (:mod:`.server`, :mod:`.session`); pose, heading, camera pitch, action and collision flag are
  logged every 50 ms to one CSV per episode (:mod:`.log`); assignment per participant in
  :mod:`.assign`.
- ``vlnverse study score``: the human row per task with the evaluation's metrics (:mod:`.score`).
- ``vlnverse view``: step through evaluation runs and study sessions (:mod:`.viewer`).

The simulator layer never imports this package.
"""
