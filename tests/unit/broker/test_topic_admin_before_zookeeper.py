"""CreateTopics and DeleteTopics before the broker's ZooKeeper session exists: the listeners
are bound first (the controller must reach the broker), so a client that connects at start-up
can ask in between. The answer is a retriable NOT_CONTROLLER, as from a broker that cannot act
as the controller; it was an assertion, which closed the connection as on a bug (a CI run of
the structured fuzz test failed in its topic set-up this way; 1 of 2 start-ups reproduced it)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import trio

from impl.broker.broker import NOT_CONTROLLER, Broker, _ZooKeeperTopicAdmin


def _admin_without_session() -> _ZooKeeperTopicAdmin:
    return _ZooKeeperTopicAdmin(cast(Broker, SimpleNamespace(coordinator=None)))


def test_create_topics_before_the_session_is_not_controller() -> None:
    async def create() -> tuple[int, str | None]:
        return await _admin_without_session().create_topic("t", 1, 1, None, False)

    code, message = trio.run(create)
    assert code == NOT_CONTROLLER
    assert message is not None
    assert "ZooKeeper" in message


def test_delete_topics_before_the_session_is_not_controller() -> None:
    async def delete() -> int:
        return await _admin_without_session().delete_topic("t")

    assert trio.run(delete) == NOT_CONTROLLER
