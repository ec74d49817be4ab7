"""The kill -9 checker fails on what it must catch: a lost acknowledged write, a value
never sent, an id handed out twice, and a key that changed across restarts."""

from __future__ import annotations

from killkit import Ledger, Observed, check


def _ledger() -> Ledger:
    ledger = Ledger()
    added = ledger.key("a")
    added.sent |= {"add", "retrieve"}
    added.acked |= {"add", "retrieve"}
    added.id = 5
    acked = ledger.key("b")
    acked.sent |= {"add", "retrieve", "heartbeat", "ack", "cache_set"}
    acked.acked |= {"add", "retrieve", "heartbeat", "ack", "cache_set"}
    acked.id = 6
    ledger.round_ids = [5, 6]
    return ledger


def _good() -> Observed:
    return Observed({"kill:a": (5, "active", '{"k":"a"}')}, {6: ("kill:b", '{"r":"b"}')},
                    {"b": "v-b"})


def test_the_state_the_clients_were_told_passes() -> None:
    assert check(_ledger(), _good()) == []


def test_a_lost_acknowledged_add_fails() -> None:
    seen = _good()
    seen.queue.clear()
    assert any("lost" in p for p in check(_ledger(), seen))


def test_a_lost_result_and_a_lost_cache_value_fail() -> None:
    seen = Observed(_good().queue, {}, {})
    problems = check(_ledger(), seen)
    assert any("lost its result" in p for p in problems)
    assert any("acknowledged SET lost" in p for p in problems)


def test_something_never_sent_fails() -> None:
    seen = _good()
    seen.queue["kill:zz"] = (9, "pending", "{}")
    seen.cache["zz"] = "x"
    problems = check(_ledger(), seen)
    assert any("kill:zz was never sent" in p for p in problems)
    assert any("zz was never set" in p for p in problems)


def test_an_unacknowledged_retrieve_may_or_may_not_have_happened() -> None:
    ledger = _ledger()
    ledger.keys["a"].acked.discard("retrieve")
    assert check(ledger, Observed({"kill:a": (5, "pending", '{"k":"a"}')},
                                  _good().results, _good().cache)) == []


def test_an_id_seen_before_the_kill_handed_out_again_fails() -> None:
    ledger = _ledger()
    ledger.round_floor = 5
    assert any("handed out again" in p for p in check(ledger, _good()))


def test_a_key_that_changes_across_restarts_fails() -> None:
    ledger = _ledger()
    assert check(ledger, _good()) == []
    ledger.round_ids = []
    seen = _good()
    seen.cache["b"] = "v-b"
    seen.queue["kill:a"] = (5, "pending", '{"k":"a"}')
    assert any("changed across a restart" in p for p in check(ledger, seen))
