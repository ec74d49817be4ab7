"""The kill -9 run's bookkeeping: what each client sent and what the server acknowledged,
and the checker that compares it with what a restarted server holds.

Each key goes through ``ADD → RETRIEVE → HEARTBEAT → ACK → RESULT_BLOCKING`` (stopping at
a seeded step) and then ``CACHE SET`` on its own cache key, one command at a time, so
"a later command" is simply a later step of the same key. A command is *sent* before it
leaves and *acknowledged* once its reply arrived; a command in flight at the kill is
neither known to have happened nor known not to have.

The checker's rules:

* every acknowledged write is present unless an acknowledged later command removed it
  (an acknowledged ACK moves the item to the results);
* nothing appears that was never sent (unknown paths, results without an ACK sent,
  payloads or values that differ from what was sent);
* a new id is larger than every id seen before the kill, and no id names two paths;
* what one check saw stays: a later restart shows the earlier keys exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PREFIX = "kill"
CACHE_PREFIX = "killc"

#: the steps of one key, in order
STEPS = ("add", "retrieve", "heartbeat", "ack", "result_blocking", "cache_set")


@dataclass(slots=True)
class KeyHistory:
    key: str
    #: steps sent, and the subset whose reply arrived
    sent: set[str] = field(default_factory=set)
    acked: set[str] = field(default_factory=set)
    id: int | None = None
    blocking_result: str | None = None

    @property
    def path(self) -> str:
        return f"{PREFIX}:{self.key}"

    @property
    def payload(self) -> str:
        return f'{{"k":"{self.key}"}}'

    @property
    def result(self) -> str:
        return f'{{"r":"{self.key}"}}'

    @property
    def cache_value(self) -> str:
        return f"v-{self.key}"


@dataclass(frozen=True, slots=True)
class Observed:
    """What a restarted server holds under the test's prefixes."""

    #: path → (queue id, status, payload)
    queue: dict[str, tuple[int, str, str]]
    #: queue id → (path, result)
    results: dict[int, tuple[str, str]]
    #: cache key (without prefix) → value
    cache: dict[str, str]

    def max_id(self) -> int:
        return max([0, *(q[0] for q in self.queue.values()), *self.results])


@dataclass(slots=True)
class Ledger:
    keys: dict[str, KeyHistory] = field(default_factory=dict)
    #: the largest id any reply or check has shown so far
    max_seen_id: int = 0
    #: ids acknowledged in the current round (checked against max_seen_id at its start)
    round_floor: int = 0
    round_ids: list[int] = field(default_factory=list)
    acked_ops: int = 0
    sent_ops: int = 0
    #: what the previous check saw, per key, which later checks must see again
    settled: dict[str, tuple[object, object, object]] = field(default_factory=dict)

    def key(self, name: str) -> KeyHistory:
        history = KeyHistory(name)
        self.keys[name] = history
        return history

    def start_round(self) -> None:
        self.round_floor = self.max_seen_id
        self.round_ids = []

    def saw_id(self, queue_id: int) -> None:
        self.round_ids.append(queue_id)
        self.max_seen_id = max(self.max_seen_id, queue_id)


def check(ledger: Ledger, seen: Observed) -> list[str]:
    """Every violation of the module docstring's rules, as one line each."""
    problems: list[str] = []
    by_path = {h.path: h for h in ledger.keys.values()}
    for queue_id in ledger.round_ids:
        if queue_id <= ledger.round_floor:
            problems.append(f"id {queue_id} handed out again: ids up to "
                            f"{ledger.round_floor} were seen before the kill")
    ids: dict[int, str] = {}
    for path, (queue_id, _, payload) in seen.queue.items():
        history = by_path.get(path)
        if history is None or "add" not in history.sent:
            problems.append(f"queue item {path} was never sent")
        elif payload != history.payload:
            problems.append(f"queue item {path} holds {payload!r}, sent {history.payload!r}")
        if ids.setdefault(queue_id, path) != path:
            problems.append(f"id {queue_id} names {ids[queue_id]} and {path}")
    for queue_id, (path, value) in seen.results.items():
        history = by_path.get(path)
        if history is None or "ack" not in history.sent:
            problems.append(f"result {queue_id} for {path}: no ACK was sent for it")
        elif value != history.result or (history.id is not None and history.id != queue_id):
            problems.append(f"result {queue_id} for {path} is {value!r}, acked "
                            f"{history.id} {history.result!r}")
        if ids.setdefault(queue_id, path) != path:
            problems.append(f"id {queue_id} names {ids[queue_id]} and {path}")
    for name, value in seen.cache.items():
        history = ledger.keys.get(name)
        if history is None or "cache_set" not in history.sent:
            problems.append(f"cache key {name} was never set")
        elif value != history.cache_value:
            problems.append(f"cache key {name} is {value!r}, set {history.cache_value!r}")
    for history in ledger.keys.values():
        problems.extend(_check_key(history, seen))
        state = (seen.queue.get(history.path),
                 seen.results.get(history.id) if history.id is not None else None,
                 seen.cache.get(history.key))
        before = ledger.settled.get(history.key)
        if before is not None and before != state:
            problems.append(f"{history.path} changed across a restart: {before} -> {state}")
        ledger.settled[history.key] = state
    ledger.max_seen_id = max(ledger.max_seen_id, seen.max_id())
    return problems


def _check_key(history: KeyHistory, seen: Observed) -> list[str]:
    path, acked = history.path, history.acked
    problems: list[str] = []
    queued = seen.queue.get(path)
    result = seen.results.get(history.id) if history.id is not None else None
    if "add" in acked:
        if "ack" in acked:
            if result is None:
                problems.append(f"{path}: acknowledged ACK of {history.id} lost its result")
            if queued is not None:
                problems.append(f"{path}: acknowledged ACK but the item is still queued")
        elif "ack" in history.sent:
            if (result is None) == (queued is None):
                problems.append(f"{path}: ACK in flight, item {queued} and result {result}")
        elif queued is None:
            problems.append(f"{path}: acknowledged ADD {history.id} lost")
        elif queued[0] != history.id:
            problems.append(f"{path}: queued as {queued[0]}, ADD answered {history.id}")
        elif "retrieve" in acked and queued[1] != "active":
            problems.append(f"{path}: acknowledged RETRIEVE but the item is {queued[1]}")
    if "result_blocking" in acked and history.blocking_result != history.result:
        problems.append(f"{path}: RESULT_BLOCKING answered {history.blocking_result!r}")
    if "cache_set" in acked and seen.cache.get(history.key) != history.cache_value:
        problems.append(f"cache {history.key}: acknowledged SET lost "
                        f"({seen.cache.get(history.key)!r})")
    return problems
