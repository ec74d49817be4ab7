"""``SYS CACHESTORE WIPE`` parses to its own action and answers no columns."""

from __future__ import annotations

import pytest

from cubequeue.grammar.commands import SysCachestore
from cubequeue.grammar.parser import parse


@pytest.mark.parametrize("sql", ["SYS CACHESTORE WIPE", "sys cachestore wipe",
                                 "  SYS /* all */ CACHESTORE  WIPE ;"])
def test_wipe_parses(sql: str) -> None:
    cmd = parse(sql)
    assert cmd == SysCachestore(action="wipe")
    assert cmd.result_columns() == ()


def test_wipe_takes_no_argument() -> None:
    with pytest.raises(Exception) as info:
        parse("SYS CACHESTORE WIPE 'q'")
    assert getattr(info.value, "sqlstate", None) == "42601"
