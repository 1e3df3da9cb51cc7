"""``logproof groups``: list, describe, delete consumer groups and reset their offsets.

The shape of Kafka's ``kafka-consumer-groups.sh``: ``describe`` prints one row per partition the
group has committed or is assigned, with the committed offset, the log end offset, the lag and
the member that owns it; ``--members`` prints the members instead. ``reset-offsets`` plans new
offsets (``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--shift-by N``) for a group with
no members and commits them only with ``--execute`` (a dry run by default, as Kafka's tool).
"""

from __future__ import annotations

import argparse
import struct
from typing import Any

from impl.broker.admin import AdminClient, AdminClientError, GroupDescription, error_name

from ._errors import CliError
from ._security import add_security_arguments, admin_client


def register(subparsers: Any) -> None:
    """Add the ``groups`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "groups", help="list, describe, delete consumer groups, reset their offsets",
        description="Consumer groups, in the manner of kafka-consumer-groups.sh.",
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)

    def action(name: str, text: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=text, description=text)
        sub.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT]")
        sub.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
        add_security_arguments(sub)
        return sub

    listing = action("list", "list every group with its state")
    listing.set_defaults(handler=run_list)
    describe = action("describe", "offsets, lag and owners of a group's partitions")
    describe.add_argument("--group", required=True, action="append")
    describe.add_argument("--members", action="store_true", help="print the members instead")
    describe.set_defaults(handler=run_describe)
    delete = action("delete", "delete groups that have no members")
    delete.add_argument("--group", required=True, action="append")
    delete.set_defaults(handler=run_delete)
    reset = action("reset-offsets", "plan (or with --execute, commit) new offsets")
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True, action="append",
                       help="TOPIC or TOPIC:P1,P2 (repeatable)")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int)
    target.add_argument("--shift-by", type=int)
    reset.add_argument("--execute", action="store_true", help="commit the plan")
    reset.set_defaults(handler=run_reset)


def _admin(arguments: argparse.Namespace) -> AdminClient:
    return admin_client(arguments)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows,
                                                                         strict=False)]
    return "\n".join(" ".join(str(cell).ljust(width) for cell, width in zip(row, widths,
                                                                          strict=True)).rstrip()
                     for row in [header, *rows])


def consumer_assignment(assignment: bytes) -> list[tuple[str, int]]:
    """The partitions of a ``consumer`` protocol assignment (version, [topic, [partition]],
    user data); empty if it does not parse."""
    try:
        position = 2
        (topics,) = struct.unpack_from(">i", assignment, position)
        position += 4
        found: list[tuple[str, int]] = []
        for _ in range(max(topics, 0)):
            (size,) = struct.unpack_from(">h", assignment, position)
            position += 2
            topic = assignment[position:position + size].decode("utf-8")
            position += size
            (count,) = struct.unpack_from(">i", assignment, position)
            position += 4
            for _ in range(max(count, 0)):
                (partition,) = struct.unpack_from(">i", assignment, position)
                position += 4
                found.append((topic, partition))
        return found
    except (struct.error, UnicodeDecodeError):
        return []


def run_list(arguments: argparse.Namespace) -> int:
    """Print every group, its state and protocol type."""
    try:
        with _admin(arguments) as admin:
            groups = admin.list_groups()
    except AdminClientError as error:
        raise CliError(str(error)) from None
    rows = [[g.group_id, g.state, g.protocol_type or "-"] for g in groups]
    print(_table(["GROUP", "STATE", "PROTOCOL-TYPE"], rows))
    return 0


def describe_rows(description: GroupDescription, committed: dict[tuple[str, int], int],
                  log_end: dict[tuple[str, int], int]) -> list[list[str]]:
    """One row per partition committed or assigned: kafka-consumer-groups.sh's columns."""
    owners: dict[tuple[str, int], tuple[str, str, str]] = {}
    if description.protocol_type == "consumer":
        for member in description.members:
            for slot in consumer_assignment(member.assignment):
                owners[slot] = (member.member_id, member.client_host, member.client_id)
    rows = []
    for slot in sorted(set(committed) | set(owners)):
        current = committed.get(slot)
        end = log_end.get(slot, -1)
        lag = "-" if current is None or end < 0 else str(max(end - current, 0))
        owner = owners.get(slot, ("-", "-", "-"))
        rows.append([description.group_id, slot[0], str(slot[1]),
                     "-" if current is None else str(current),
                     "-" if end < 0 else str(end), lag, *owner])
    return rows


def run_describe(arguments: argparse.Namespace) -> int:
    """Print each group's partitions (or members) as kafka-consumer-groups.sh does."""
    try:
        with _admin(arguments) as admin:
            for index, group in enumerate(arguments.group):
                description = admin.describe_group(group)
                if index:
                    print()
                if description.state == "Dead":
                    print(f"Consumer group '{group}' does not exist.")
                    continue
                if arguments.members:
                    rows = [[group, m.member_id, m.group_instance_id or "-", m.client_host,
                             m.client_id, str(len(consumer_assignment(m.assignment)))]
                            for m in description.members]
                    print(_table(["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST",
                                  "CLIENT-ID", "#PARTITIONS"], rows))
                    continue
                committed = admin.group_offsets(group)
                slots = set(committed)
                for member in description.members:
                    slots |= set(consumer_assignment(member.assignment))
                log_end = admin.list_offsets(sorted(slots))
                if description.state == "Empty":
                    print(f"Consumer group '{group}' has no active members.\n")
                print(_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                              "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
                             describe_rows(description, committed, log_end)))
    except AdminClientError as error:
        raise CliError(str(error)) from None
    return 0


def run_delete(arguments: argparse.Namespace) -> int:
    """Delete groups; a group that cannot be deleted is an error (after trying every one)."""
    try:
        with _admin(arguments) as admin:
            results = admin.delete_groups(arguments.group)
    except AdminClientError as error:
        raise CliError(str(error)) from None
    failed = {group: code for group, code in results.items() if code != 0}
    for group in results:
        if group not in failed:
            print(f"Deletion of group '{group}' succeeded.")
    if failed:
        raise CliError("; ".join(f"cannot delete group '{group}': {error_name(code)}"
                                 for group, code in sorted(failed.items())))
    return 0


def _partitions(admin: AdminClient, specs: list[str]) -> list[tuple[str, int]]:
    metadata = admin.metadata()
    chosen: list[tuple[str, int]] = []
    for spec in specs:
        topic, _, listed = spec.partition(":")
        known = metadata.topics.get(topic)
        if known is None or known[0] != 0:
            raise CliError(f"topic '{topic}' does not exist")
        available = {p.partition for p in known[1]}
        if listed:
            try:
                wanted = {int(item) for item in listed.split(",") if item}
            except ValueError:
                raise CliError(f"bad partition list in --topic {spec!r}") from None
            missing = wanted - available
            if missing:
                raise CliError(f"topic '{topic}' has no partition {sorted(missing)[0]}")
        else:
            wanted = available
        chosen += [(topic, partition) for partition in sorted(wanted)]
    return chosen


def run_reset(arguments: argparse.Namespace) -> int:
    """Plan new offsets, clamped to each partition's [log start, log end]; commit them with
    ``--execute`` if the group has no members."""
    try:
        with _admin(arguments) as admin:
            slots = _partitions(admin, arguments.topic)
            description = admin.describe_group(arguments.group)
            if description.state not in ("Empty", "Dead"):
                raise CliError(f"group '{arguments.group}' is {description.state}: offsets can "
                               "be reset only while it has no members")
            start = admin.list_offsets(slots, latest=False)
            end = admin.list_offsets(slots, latest=True)
            committed = admin.group_offsets(arguments.group)
            plan: dict[tuple[str, int], int] = {}
            for slot in slots:
                if start[slot] < 0 or end[slot] < 0:
                    raise CliError(f"partition {slot[0]}-{slot[1]} has no leader")
                if arguments.to_earliest:
                    wanted = start[slot]
                elif arguments.to_latest:
                    wanted = end[slot]
                elif arguments.to_offset is not None:
                    wanted = arguments.to_offset
                else:
                    wanted = committed.get(slot, end[slot]) + arguments.shift_by
                plan[slot] = min(max(wanted, start[slot]), end[slot])
            if arguments.execute:
                results = admin.commit_offsets(arguments.group, plan)
                failed = {slot: code for slot, code in results.items() if code != 0}
                if failed:
                    slot, code = sorted(failed.items())[0]
                    raise CliError(f"commit to {slot[0]}-{slot[1]} failed: {error_name(code)}")
    except AdminClientError as error:
        raise CliError(str(error)) from None
    rows = [[arguments.group, topic, str(partition), str(offset)]
            for (topic, partition), offset in sorted(plan.items())]
    print(_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))
    if not arguments.execute:
        print("\n(dry run: nothing committed; add --execute)")
    return 0
