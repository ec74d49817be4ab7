"""One spelling of a parameter as text (grammar.binding.param_text): a TEXT slot binds
it, and both wires hand plain SQL its parameters through it
(tests/server/cubews/test_ws_params.py checks the WebSocket's)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.grammar import bind, parse
from cubequeue.grammar.binding import param_text
from cubequeue.grammar.commands import QueueAdd

values = st.one_of(st.text(), st.integers(), st.booleans(),
                   st.floats(allow_nan=False, allow_infinity=False))


@settings(deadline=None)
@given(values)
def test_a_text_slot_binds_the_parameter_text(value: str | int | bool | float) -> None:
    bound = bind(parse("QUEUE ADD $1 $2"), ["p", value])
    assert bound == QueueAdd(path="p", payload=param_text(value))


def test_postgresql_spellings() -> None:
    assert [param_text(v) for v in (True, False, 7, -1, 1.5, "x", b"\xe2\x82\xac", b"\xff", None)] == [
        "true", "false", "7", "-1", "1.5", "x", "€", "\ufffd", None]
