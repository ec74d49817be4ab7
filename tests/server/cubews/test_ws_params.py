"""Typed WebSocket parameters → bind values for the dialect, and as text for plain SQL
(dialect doc §1.4, §8 rule 5). Pre-aggregation statements are refused by what they ask
for (tests/server/sql/test_sql_refusals.py), not by a word in the text."""

from __future__ import annotations

import pytest

from cubequeue.grammar import bind, param_slots, parse
from cubequeue.grammar.commands import CacheSet, QueueAck, QueueGet
from cubequeue.grammar.errors import InvalidParameterValue
from cubequeue.server.cubews.params import plain_params, ws_values
from cubequeue.server.errors import ProtocolViolation


def values_for(sql: str, values: list[object] | None) -> list[object]:
    return ws_values(param_slots(parse(sql)), values)  # type: ignore[arg-type]


def test_key_slot_int_is_id_and_string_is_path() -> None:
    cmd = parse("QUEUE GET ?")
    assert bind(cmd, values_for("QUEUE GET ?", [7])) == QueueGet(key=7)
    assert bind(cmd, values_for("QUEUE GET ?", ["7"])) == QueueGet(key="7")


def test_null_result_means_no_result() -> None:
    cmd = parse("QUEUE ACK ? ?")
    assert bind(cmd, values_for("QUEUE ACK ? ?", ["p:k", None])) == QueueAck(key="p:k", result=None)


def test_extra_parameters_are_ignored() -> None:
    cmd = parse("CACHE SET TTL ? ? ?")
    bound = bind(cmd, values_for("CACHE SET TTL ? ? ?", [60, "k", "v", "extra"]))
    assert isinstance(bound, CacheSet) and bound.ttl == 60 and bound.value == "v"


def test_no_placeholders_no_values() -> None:
    assert values_for("CACHE GET 'k'", None) == []
    assert values_for("CACHE GET 'k'", [1, 2]) == []


@pytest.mark.parametrize(("values", "error", "kind"), [
    (None, "Empty parameters, please send parameters within query", ProtocolViolation),
    ([], "Empty parameters, please send parameters within query", ProtocolViolation),
    ([60], "Placeholder index is out of bound, actual: 1, parameters length: 1",
     ProtocolViolation),
    ([60.0, "k", "v"], "Wrong parameters type, actual: float64, expected: int64 parameter",
     InvalidParameterValue),
    ([60, 5, "v"], "Wrong parameters type, actual: int64, expected: string parameter",
     InvalidParameterValue),
    ([60, "k", None], "Wrong parameters type, actual: null, expected: string parameter",
     InvalidParameterValue),
])
def test_errors_keep_cube_store_texts(values, error: str, kind: type[Exception]) -> None:
    with pytest.raises(kind) as raised:
        values_for("CACHE SET TTL ? ? ?", values)
    assert str(raised.value) == error


def test_plain_sql_gets_every_value_as_postgresql_text() -> None:
    assert plain_params(["2024-01-01T00:00:00.000Z", 7, 1.5, True, False, None, b"ab"]) == [
        "2024-01-01T00:00:00.000Z", "7", "1.5", "true", "false", None, "ab"]
    assert plain_params(None) == []
