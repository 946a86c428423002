"""Names of the registered policies, known without importing torch (the classes live in ``policies``)."""
from __future__ import annotations

#: Policy name → short description; ``vlnverse.learn.policies.POLICIES`` holds the classes.
POLICY_NAMES = {
    "seq2seq": "VLN-CE Seq2Seq: instruction LSTM + RGB/depth CNNs + previous action -> one GRU",
    "cma": "VLN-CE cross-modal attention: two GRUs with instruction and visual attention",
    "rdp": "recurrent diffusion policy: cross-modal attention + GRU, DDPM over continuous waypoint actions, "
           "stop-progress head",
    "vlnbert": "recurrent VLN-BERT: transformer over [state, instruction, waypoint candidates, STOP] with a "
               "candidate waypoint predictor on the depth panorama",
    "graph_nf": "VLN-BERT on the navigation graph with an added NOT_FOUND class (false-premise baseline, "
                "graph mode)",
    "room_classifier": "ROAM's room classifier: semantic observation of a viewpoint -> room type (room labels only)",
}
#: policies that act between navigation-graph viewpoints (``collision_mode: graph``)
GRAPH_POLICIES = ("graph_nf",)


def policy_names() -> list[str]:
    """Registered policy names, sorted."""
    return sorted(POLICY_NAMES)
