"""``a.b`` and ``a_b`` collide in metric names: the second is refused with
INVALID_TOPIC_EXCEPTION (17) and Kafka's message, as ``AdminZkClient.validateTopicCreate`` does
(issue 15, defect 6; both were created before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from impl.broker.admin import AdminClient
from impl.controller.znodes import colliding_topics

from ._harness import RunningBroker

pytestmark = pytest.mark.integration

INVALID_TOPIC_EXCEPTION = 17


def test_colliding_names() -> None:
    assert colliding_topics("a_b", ["a.b", "ab", "a-b"]) == ["a.b"]
    assert colliding_topics("a.b.c", ["a_b_c", "a.b_c", "a.b.c"]) == ["a.b_c", "a_b_c"]
    assert colliding_topics("plain", ["plain", "pla_in"]) == []


def test_a_colliding_topic_is_refused(zk_chroot: str, tmp_path: Path) -> None:
    cluster = RunningBroker(zk_chroot, tmp_path, run_controller=True).start()
    try:
        with AdminClient(cluster.bootstrap) as admin:
            assert admin.create_topics([("a.b", 1, 1)])["a.b"][0] == 0
            code, message = admin.create_topics([("a_b", 1, 1)])["a_b"]
            assert code == INVALID_TOPIC_EXCEPTION
            assert message == "Topic 'a_b' collides with existing topics: a.b"
            code, _ = admin.create_topics([("a_b", 1, 1)], validate_only=True)["a_b"]
            assert code == INVALID_TOPIC_EXCEPTION
            assert admin.create_topics([("a-b", 1, 1)])["a-b"][0] == 0
    finally:
        cluster.stop()
