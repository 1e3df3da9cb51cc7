"""``impl.api_keys`` is the one list of API keys: each name is the one Kafka (kio's schemas)
gives its key, and the broker and security modules read the same objects."""

from __future__ import annotations

import re

from kio.index import load_request_schema

from impl import api_keys
from impl.broker import api_versions
from impl.security import request_acls


def _keys() -> dict[str, int]:
    return {name: value for name, value in vars(api_keys).items()
            if name.isupper() and isinstance(value, int)}


def test_every_key_is_named_as_kafka_names_it() -> None:
    keys = _keys()
    assert len(keys) >= 40
    for name, key in keys.items():
        if name == "CREATE_REPLICA_PLACEMENT":
            continue  # the project's own API (KIP-879), not in kio
        schema = load_request_schema(key, 0).__name__.removesuffix("Request")
        assert re.sub(r"(?<!^)(?=[A-Z])", "_", schema).upper() == name, (name, schema)


def test_broker_and_security_read_the_same_keys() -> None:
    for name, key in _keys().items():
        assert getattr(api_versions, name) == key
        if hasattr(request_acls, name):
            assert getattr(request_acls, name) == key
