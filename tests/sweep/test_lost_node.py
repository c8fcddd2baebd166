"""A cell whose trial went away with its cluster node: the reason names the node, from Ray's
text of the error or from where the trial reported (tests/sweep/test_storage_cluster.py
kills a real node)."""

from __future__ import annotations

import pytest

from rlperf.sweep.callback import lost_node

#: Ray 2.60's text when the actor's node failed its health checks (ActorDiedError).
NODE_DIED = "\n".join(
    [
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        "\tclass_name: ImplicitFunc",
        "\tactor_id: 0a1b2c",
        "\tpid: 4242",
        "\tip: 192.0.2.2",
        "The actor is dead because its node has died. Node Id: 87d3845d747b11aa22bb",
        "the actor's node was terminated unexpectedly: health check failed due to missing too "
        "many heartbeats",
    ]
)


@pytest.mark.parametrize(
    ("node", "error", "expected"),
    [
        (None, NODE_DIED, "Ray's node 192.0.2.2 (87d3845d747b) was lost while the cell ran"),
        ("192.0.2.9 ffffffffffff", NODE_DIED, "Ray's node 192.0.2.2 (87d3845d747b) was lost"),
        # An error of the job itself, or an actor that stopped answering on a node no Ray
        # here knows to be dead: the trial's own error stands.
        ("192.0.2.2 87d3845d747b", "ValueError: bad env id", None),
        ("192.0.2.2 87d3845d747b", "CellFailed: a learner actor died (exit code 1)", None),
        (None, "The actor 71edfd is unavailable: RpcError: Socket closed", None),
    ],
)  # fmt: skip
def test_a_lost_node_is_named_in_the_reason(node, error, expected) -> None:
    reason = lost_node(node, error, wait_s=0)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(expected)
        assert reason.endswith("the same command runs it again")
