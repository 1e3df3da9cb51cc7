from __future__ import annotations

import pytest

from impl.broker.dynamic_config import (
    DynamicConfigError,
    DynamicSettings,
    encode_config_node,
    parse_config_node,
    settings_of,
)


def test_roundtrip_and_both_throttle_names() -> None:
    node = encode_config_node({"replica.alter.log.dirs.io.max.bytes.per.second": "100",
                               "num.replica.alter.log.dirs.threads": "3", "other": "x"})
    assert settings_of(parse_config_node(node)) == DynamicSettings(100, 3)
    assert settings_of({"intra.broker.throttled.rate": "7"}) == DynamicSettings(7, None)
    assert settings_of({}) == DynamicSettings()


@pytest.mark.parametrize(
    "config",
    [{"intra.broker.throttled.rate": "0"}, {"num.replica.alter.log.dirs.threads": "x"}],
)
def test_bad_values(config: dict[str, str]) -> None:
    with pytest.raises(DynamicConfigError):
        settings_of(config)


def test_bad_nodes() -> None:
    with pytest.raises(DynamicConfigError):
        parse_config_node(b"{not json")
    with pytest.raises(DynamicConfigError):
        parse_config_node(b'{"config": 3}')
