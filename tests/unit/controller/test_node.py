"""The controller node's own decisions: election, revalidation, watch-to-read mapping, request
queues and znode decoding (the pumps only carry them).

Most tests run the node under the synchronous pump over the in-memory ZooKeeper (the same node
object the trio service runs); the request-queue tests step the node by hand to see each effect.
"""

from __future__ import annotations

import pytest

from conformance.coordinator import ControllerDriver, SimulatedZooKeeper
from impl.controller.controller import (
    ControllerConfig,
    EmitTrace,
    Resign,
    ResponseReceived,
    WriteCompleted,
    ZkWrite,
)
from impl.controller.coordinator import (
    CreateOp,
    CreateResult,
    DeleteOp,
    SessionState,
    WatchEvent,
    WatchEventType,
    WatchKind,
    multi_error,
)
from impl.controller.node import (
    REQUEST_RETRY_BACKOFF_MS,
    ChildrenOp,
    ControllerNode,
    ExistsOp,
    GetOp,
    LogWarning,
    NodeEffect,
    NodeInput,
    ReadCompleted,
    RequestCompleted,
    SendToBroker,
    SessionChanged,
    ZkRead,
)
from impl.controller.requests import ControllerResponse, LeaderAndIsrRequest
from impl.controller.znodes import (
    BROKER_IDS_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    PERSISTENT_PATHS,
    TopicAssignment,
    broker_path,
    decode_controller,
    decode_controller_epoch,
    encode_broker,
    encode_log_dir_event,
    encode_topic,
    topic_path,
)


def _register(server: SimulatedZooKeeper, broker_id: int, data: bytes | None = None) -> int:
    session = server.open_session(60_000)
    result = server.multi(session, [CreateOp(
        broker_path(broker_id),
        encode_broker("h", 9000 + broker_id, None, 0) if data is None else data,
        ephemeral=True)])[0]
    assert not isinstance(result, Exception), result
    return session


def _active(driver: ControllerDriver) -> bool:
    return driver.node.active


def _cluster(brokers: tuple[int, ...] = (0, 1, 2)) -> tuple[SimulatedZooKeeper, dict[int, int]]:
    server = SimulatedZooKeeper()
    admin = server.open_session(60_000)
    for path in PERSISTENT_PATHS:
        server.multi(admin, [CreateOp(path)])
    sessions = {b: _register(server, b) for b in brokers}
    return server, sessions


def test_of_two_candidates_one_wins_and_the_other_takes_over_when_it_goes() -> None:
    server, _sessions = _cluster()
    first = ControllerDriver(server, 100)
    second = ControllerDriver(server, 101)
    assert first.elect()
    assert not second.elect(), "two controllers in one term"
    admin = server.open_session(60_000)
    assert decode_controller(server.get(admin, CONTROLLER_PATH, False)[0]) == 100
    assert decode_controller_epoch(server.get(admin, CONTROLLER_EPOCH_PATH, False)[0]) == 1

    server.close_session(first.session_id)
    second.controller_changed()  # the /controller watch its lost election armed
    assert second.core.active
    assert second.core.epoch == 2
    assert decode_controller(server.get(admin, CONTROLLER_PATH, False)[0]) == 101


def test_a_failover_reads_every_broker_and_arms_the_brokers_watch() -> None:
    server, sessions = _cluster()
    controller = ControllerDriver(server, 100)
    assert controller.elect()
    assert set(controller.core.live_brokers) == {0, 1, 2}

    server.close_session(sessions.pop(2))
    controller.brokers_changed()
    assert set(controller.core.live_brokers) == {0, 1}
    _register(server, 2)
    controller.brokers_changed()  # re-armed by the previous re-read
    assert set(controller.core.live_brokers) == {0, 1, 2}


def _warned(driver: ControllerDriver) -> list[str]:
    """The messages of the LogWarning effects ``driver`` carries from now on."""
    warnings: list[str] = []
    original = driver._carry

    def carry(effect: NodeEffect) -> NodeInput | None:
        if isinstance(effect, LogWarning):
            warnings.append(effect.message)
        return original(effect)

    driver._carry = carry  # type: ignore[method-assign]
    return warnings


def test_a_malformed_registration_is_ignored_with_a_warning() -> None:
    server, _sessions = _cluster((0, 1))
    _register(server, 7, b"{not json")
    node = ControllerNode(ControllerConfig(100))
    driver = ControllerDriver(server, 100)
    driver.node = node
    warnings = _warned(driver)
    assert driver.elect()
    assert set(driver.core.live_brokers) == {0, 1}
    assert any("broker 7" in w for w in warnings), warnings


def test_a_malformed_log_dir_event_is_deleted_with_a_warning() -> None:
    """Kafka deletes every log-dir event notification it processed, malformed or not; one left
    in ZooKeeper would be read and warned about again at every later event."""
    server, _sessions = _cluster((0, 1))
    admin = server.open_session(60_000)
    bad = server.multi(admin, [CreateOp(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}",
                                        b"{not json", sequential=True)])[0]
    assert isinstance(bad, CreateResult)
    driver = ControllerDriver(server, 100)
    warnings = _warned(driver)
    assert driver.elect()
    assert any("log dir event" in w for w in warnings), warnings
    assert server.children(admin, LOG_DIR_EVENT_NOTIFICATION_PATH, False) == []
    # a good one afterwards is processed (and deleted) as usual, with no new warning
    server.multi(admin, [CreateOp(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}",
                                  encode_log_dir_event(1), sequential=True)])
    warned = len(warnings)
    driver.log_dir_events()
    assert len(warnings) == warned, warnings
    assert server.children(admin, LOG_DIR_EVENT_NOTIFICATION_PATH, False) == []


def test_a_malformed_topic_config_is_ignored_with_a_warning() -> None:
    server, _sessions = _cluster((0, 1))
    admin = server.open_session(60_000)
    for path in ("/config", "/config/topics"):
        server.multi(admin, [CreateOp(path)])
    server.multi(admin, [CreateOp("/config/topics/t", b"[1,2,3]")])
    driver = ControllerDriver(server, 100)
    warnings = _warned(driver)
    assert driver.elect()
    assert any("config of topic 't'" in w for w in warnings), warnings


def test_a_watch_is_mapped_to_the_re_read_it_calls_for() -> None:
    server, _sessions = _cluster()
    controller = ControllerDriver(server, 100)
    assert controller.elect()
    node = controller.node

    effects = node.step(WatchEvent(WatchEventType.CHILD, BROKER_IDS_PATH, WatchKind.CHILD))
    assert len(effects) == 1
    children = effects[0]
    assert isinstance(children, ZkRead)
    assert children.ops == (ChildrenOp(BROKER_IDS_PATH, watch=True),)
    # While that read is outstanding, another notification waits its turn.
    assert node.step(WatchEvent(WatchEventType.DELETED, CONTROLLER_PATH, WatchKind.DATA)) == []
    names = tuple(server.children(controller.session_id, BROKER_IDS_PATH, False))
    effects = node.step(ReadCompleted(children.read_id, (names,), controller.session_id))
    assert len(effects) == 1
    gets = effects[0]
    assert isinstance(gets, ZkRead)
    assert gets.ops == tuple(GetOp(broker_path(b)) for b in (0, 1, 2))
    results = tuple(server.get(controller.session_id, op.path, False)
                    for op in gets.ops if isinstance(op, GetOp))
    effects = node.step(ReadCompleted(gets.read_id, results, controller.session_id))
    # the brokers are handed to the core; then the queued /controller notification is re-read
    last = effects[-1]
    assert isinstance(last, ZkRead)
    assert last.ops == (ExistsOp(CONTROLLER_PATH, watch=True),)


def test_after_a_reconnection_a_moved_epoch_makes_the_controller_resign() -> None:
    server, _sessions = _cluster()
    controller = ControllerDriver(server, 100)
    assert controller.elect()
    admin = server.open_session(60_000)
    controller.step(SessionChanged(SessionState.SUSPENDED, controller.session_id))
    # Another controller's term began while the connection was down.
    server.multi(admin, [DeleteOp(CONTROLLER_PATH)])
    successor = ControllerDriver(server, 101)
    assert successor.elect()
    assert _active(controller)
    controller.step(SessionChanged(SessionState.CONNECTED, controller.session_id))
    assert not _active(controller), "revalidation missed the new term"
    assert [t.event for t in controller.traces][-1] == "CONTROLLER_RESIGNED"
    assert successor.core.active


def test_after_a_reconnection_the_same_term_re_reads_everything() -> None:
    server, _sessions = _cluster()
    controller = ControllerDriver(server, 100)
    assert controller.elect()
    admin = server.open_session(60_000)
    controller.step(SessionChanged(SessionState.SUSPENDED, controller.session_id))
    # Created while suspended: no notification reaches the controller.
    server.multi(admin, [CreateOp(topic_path("t"), encode_topic(TopicAssignment({0: (0, 1)})))])
    controller.step(SessionChanged(SessionState.CONNECTED, controller.session_id))
    assert controller.core.active
    assert controller.core.epoch == 1
    assert "t" in controller.core.topics


def _active_node() -> tuple[ControllerNode, list[NodeEffect]]:
    """A node stepped by hand through a won election over an empty cluster with brokers 0, 1."""
    server, _sessions = _cluster((0, 1))
    driver = ControllerDriver(server, 100)
    assert driver.elect()
    server.multi(driver.session_id, [CreateOp(topic_path("t"), encode_topic(
        TopicAssignment({0: (0, 1)})))])
    node = driver.node
    sent: list[NodeEffect] = []
    original = driver._send

    def send(effect: SendToBroker) -> NodeInput | None:
        sent.append(effect)
        return None  # left in flight: the test answers

    driver._send = send  # type: ignore[method-assign]
    del original
    driver.topics_changed()
    return node, sent


def test_one_request_in_flight_per_broker_and_an_undelivered_one_is_retried() -> None:
    node, sent = _active_node()
    by_broker: dict[int, list[SendToBroker]] = {}
    for effect in sent:
        assert isinstance(effect, SendToBroker)
        by_broker.setdefault(effect.broker_id, []).append(effect)
    assert sorted(by_broker) == [0, 1]
    assert all(len(v) == 1 for v in by_broker.values()), "one request in flight per broker"
    head = by_broker[0][0]
    queued = node.requests_queued(0)
    assert queued >= 2, "the UpdateMetadata waits behind the LeaderAndIsr"

    # Broker 0 is live: an undelivered request is sent again after the back-off.
    retry = node.step(RequestCompleted(head.request_id, None))
    assert retry == [SendToBroker(head.request_id, 0, head.request, REQUEST_RETRY_BACKOFF_MS)]
    assert node.requests_queued(0) == queued

    # Answered: the next one goes.
    after = node.step(RequestCompleted(head.request_id, ControllerResponse(0, {})))
    nexts = [e for e in after if isinstance(e, SendToBroker)]
    assert len(nexts) == 1
    assert nexts[0].broker_id == 0
    assert nexts[0].request_id != head.request_id
    assert node.requests_queued(0) == queued - 1
    # A completion of an unknown (or already completed) request changes nothing.
    assert node.step(RequestCompleted(head.request_id, ControllerResponse(0, {}))) == []


def test_an_undelivered_request_to_a_dead_broker_is_reported_and_the_queue_dropped() -> None:
    node, sent = _active_node()
    head = next(e for e in sent if isinstance(e, SendToBroker) and e.broker_id == 1)
    assert isinstance(head.request, LeaderAndIsrRequest)
    assert node.requests_queued(1) >= 2
    node.core.live_brokers.pop(1)  # the core has seen broker 1 fail
    effects = node.step(RequestCompleted(head.request_id, None))
    assert node.requests_queued(1) == 0
    assert not any(isinstance(e, SendToBroker) and e.broker_id == 1
                   for e in effects), "neither retried nor followed: its broker is gone"


def test_a_failed_brokers_queue_is_dropped_behind_the_request_in_flight() -> None:
    """Kafka's ControllerChannelManager ``removeBroker``: once the core holds a broker dead,
    the requests queued for it are dropped (reported undelivered), only the one in flight may
    still arrive. Sent on, a LeaderAndIsr queued before broker 2's session expired reached its
    running process after a deletion of the topic was asked and moved a replica the deletion
    does not address (fuzz seed 11608, TOPIC_DELETED)."""
    node, sent = _active_node()
    head = next(e for e in sent if isinstance(e, SendToBroker) and e.broker_id == 1)
    other = next(e for e in sent if isinstance(e, SendToBroker) and e.broker_id == 0)
    assert node.requests_queued(1) >= 2
    undelivered: list[object] = []
    handle = node.core.handle

    def spy(event: object) -> object:
        if isinstance(event, ResponseReceived) and event.response is None:
            undelivered.append(event.request)
        return handle(event)  # type: ignore[arg-type]

    node.core.handle = spy  # type: ignore[method-assign,assignment]
    queued = node.requests_queued(1)
    node.core.live_brokers.pop(1)  # the core has seen broker 1 fail
    # the next run of the core (here: broker 0's answer) drops broker 1's queue behind its head
    effects = node.step(RequestCompleted(other.request_id, ControllerResponse(0, {})))
    assert node.requests_queued(1) == 1, "only the request in flight is left"
    assert len(undelivered) == queued - 1
    assert not any(isinstance(e, SendToBroker) and e.broker_id == 1 for e in effects)
    # the one in flight arrives after all: nothing follows it
    effects = node.step(RequestCompleted(head.request_id, ControllerResponse(0, {})))
    assert node.requests_queued(1) == 0
    assert not any(isinstance(e, SendToBroker) and e.broker_id == 1 for e in effects)


def test_core_writes_are_renumbered_and_their_completions_routed_back() -> None:
    server, _sessions = _cluster((0, 1))
    node = ControllerNode(ControllerConfig(100))
    driver = ControllerDriver(server, 100)
    driver.node = node
    seen: list[NodeEffect] = []
    original = driver._carry

    def carry(effect: NodeEffect) -> NodeInput | None:
        seen.append(effect)
        return original(effect)

    driver._carry = carry  # type: ignore[method-assign]
    assert driver.elect()
    server.multi(driver.session_id, [CreateOp(topic_path("t"), encode_topic(
        TopicAssignment({0: (0, 1)})))])
    driver.topics_changed()
    writes = [e for e in seen if isinstance(e, ZkWrite)]
    ids = [w.write_id for w in writes]
    assert len(ids) == len(set(ids)), "every write of the node and its core has its own id"
    assert any(e.event.event == "LEADER_ELECTED" for e in seen if isinstance(e, EmitTrace))
    assert node.idle
    assert node.step(WriteCompleted(10_000, None)) == [], "an unknown completion is ignored"


# --- a term is bound to the session it was won in ---------------------------------------------


def _zombie() -> tuple[SimulatedZooKeeper, dict[int, int], ControllerDriver]:
    """A controller of epoch 1 over t-0 (replicas 0, 1, 2) whose session just expired; its
    client connected a new session at once, and the node has not heard of either."""
    server, sessions = _cluster()
    zombie = ControllerDriver(server, 100)
    assert zombie.elect()
    admin = server.open_session(60_000)
    server.multi(admin, [CreateOp(topic_path("t"), encode_topic(
        TopicAssignment({0: (0, 1, 2)})))])
    zombie.topics_changed()
    server.expire_session(zombie.session_id)
    zombie.session_id = server.open_session(60_000)
    return server, sessions, zombie


def test_a_read_under_a_new_session_ends_the_term_before_its_result_is_used() -> None:
    """Fuzz seed 10226's shape: broker 1 restarts with a new broker epoch while the zombie's
    client is on a new session; the zombie must not read the registration and send broker 1 its
    cached states (the new broker epoch passes KIP-380's fence, and a restarted broker has seen
    no controller epoch to fence on)."""
    server, sessions, zombie = _zombie()
    server.close_session(sessions.pop(1))
    sessions[1] = _register(server, 1)
    sent = len(zombie.requests)

    zombie.step(WatchEvent(WatchEventType.CHILD, BROKER_IDS_PATH, WatchKind.CHILD))
    assert not zombie.core.active, "a zombie acted on a read of another session"
    assert zombie.requests[sent:] == [], "the zombie sent its cached states"
    assert [t.event for t in zombie.traces][-1] == "SESSION_EXPIRED"
    assert zombie.node.idle
    # It waits for its new session's CONNECTED, then runs on it (and wins: /controller went
    # with the old session).
    assert zombie.node.step(WatchEvent(WatchEventType.DELETED, CONTROLLER_PATH,
                                       WatchKind.DATA)) == []
    zombie.step(SessionChanged(SessionState.CONNECTED, zombie.session_id))
    assert _active(zombie)
    assert zombie.core.epoch == 2


def test_a_connected_naming_another_session_resigns_the_term_before_anything_runs() -> None:
    server, _sessions, zombie = _zombie()
    seen: list[NodeEffect] = []
    original = zombie._carry

    def carry(effect: NodeEffect) -> NodeInput | None:
        seen.append(effect)
        return original(effect)

    zombie._carry = carry  # type: ignore[method-assign]
    zombie.step(SessionChanged(SessionState.CONNECTED, zombie.session_id))
    resigned = next(i for i, e in enumerate(seen) if isinstance(e, Resign))
    assert not any(isinstance(e, ZkRead | ZkWrite) for e in seen[:resigned]), seen
    assert zombie.core.active
    assert zombie.core.epoch == 2
    admin = server.open_session(60_000)
    owner = server.exists(admin, CONTROLLER_PATH, False)
    assert owner is not None
    assert owner.ephemeral_owner == zombie.session_id


@pytest.mark.parametrize("successor", [True, False], ids=["fenced", "landed"])
def test_a_write_under_a_new_session_is_reported_to_the_core_and_ends_the_term(
        successor: bool) -> None:
    """A write in flight when the session expired runs under the new one. What it did in
    ZooKeeper is done (the epoch check judged it): the core learns the outcome, then the term
    ends whatever it was."""
    server, _sessions = _cluster()
    zombie = ControllerDriver(server, 100)
    assert zombie.elect()
    held: list[ZkWrite] = []
    original = zombie._carry

    def carry(effect: NodeEffect) -> NodeInput | None:
        if isinstance(effect, ZkWrite) and not held:
            held.append(effect)
            return None  # in flight across the expiry
        return original(effect)

    zombie._carry = carry  # type: ignore[method-assign]
    admin = server.open_session(60_000)
    server.multi(admin, [CreateOp(topic_path("t"), encode_topic(
        TopicAssignment({0: (0, 1, 2)})))])
    zombie.topics_changed()
    assert held, "no write to hold"
    server.expire_session(zombie.session_id)
    zombie.session_id = server.open_session(60_000)
    if successor:
        assert ControllerDriver(server, 101).elect()
    completion = zombie._write(held[0])  # carried on the client's new session
    assert completion.session_id == zombie.session_id
    assert completion.results is not None
    assert (multi_error(completion.results) is not None) == successor
    traces = len(zombie.traces)
    zombie.step(completion)
    assert not zombie.core.active
    assert zombie.node.idle
    events = [t.event for t in zombie.traces[traces:]]
    # fenced: the core resigns on the write's outcome; landed: the core records the election
    # it wrote, then resigns as the session is gone
    assert events == (["ZK_WRITE_FENCED"] if successor
                      else ["LEADER_ELECTED", "SESSION_EXPIRED"]), events
