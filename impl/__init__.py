"""logproof's implementation: the storage engine, the broker and the controller.

Subpackages:
    impl.storage     log format, segments, log dirs, replica moves, recovery, throttle,
                     disk failure
    impl.broker      Kafka wire protocol, request handlers, replication, the trio server,
                     the admin client
    impl.controller  controller logic, the ZooKeeper adapter, reassignment, placement
    impl.cli         the ``logproof`` command line

Shared by all of them: :mod:`impl.trace` (the typed trace events every core emits) and
:mod:`impl.ports` (the clock and randomness ports; the disk and coordinator ports live with the
code that owns them).
"""
