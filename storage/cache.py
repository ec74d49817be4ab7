"""The CACHE engine: Cube Store's key/value cache (``docs/dialect.md`` §4, §2.4) in memory.

Contract, with the rules it follows:

* **Paths** split at their last colon (§2.1): ``prefix`` before it (``None`` without a
  colon, indexed as ``""``), ``key`` after it.
* **Visibility** (§2.7): an entry whose ``expire`` ≤ now does not exist for any command.
  Expired entries are also *removed* (§8 rule 9): an expiry heap is swept at the start of
  every call (and by :meth:`CacheStore.sweep`, which the store facade calls at each step
  start); the heap is only looked at when its earliest deadline has passed, so an idle
  cache does no work. ``system.cache`` therefore shows only live rows (§8 rule 11).
* **Row ids** come from a monotonic sequence that TRUNCATE does not reset (§2.5). A
  replacing SET or an INCR keeps the row id; a SET or INCR on a missing or expired key
  inserts a new row. KEYS lists rows in row-id order (§4.3), so each prefix's index is a
  plain ``dict`` in insertion order: an entry enters it exactly once, when its id is taken,
  and ids only grow, so dict order *is* id order and KEYS costs O(k) for k rows.
* **Eviction** is allkeys-lru (§6) under ``Limits.cache_max_keys`` and
  ``Limits.cache_max_bytes``. Cube Store only *triggers* an asynchronous run when a write
  crosses a limit; cubequeue evicts in the same step (an implementation detail of the
  spec, which never refuses a SET for capacity), least recently used first, until both
  limits hold. The entry the step itself wrote is the most recently used one and is never
  evicted by its own step: a single entry larger than ``cache_max_bytes`` stays, alone.
  SET (replace or insert), INCR and a GET hit count as a use; NX that refuses, KEYS,
  REMOVE and PURGE do not.
* **Bytes** of an entry = UTF-8 length of its full path + UTF-8 length of its value. That
  is what ``cache_max_bytes``, :attr:`CacheStore.bytes`, the EVICTION sizes and the INFO
  row sizes count (Cube Store's raw size adds a fixed per-row overhead for RocksDB keys;
  cubequeue has no such overhead to account for). The sizes are kept in a
  :class:`~cubequeue.storage.row_sizes.SizeTally` as entries come, change and go, so
  ``SYS CACHESTORE INFO`` reads totals (its expired rows are the expiry heap's due part)
  instead of walking every entry.
* Every call validates before it mutates, so a call that raises changed nothing that a
  client can observe (the expiry sweep it may have run removes only invisible rows).
"""

from __future__ import annotations

import re
from collections import OrderedDict

from cubequeue.grammar.commands import (
    CacheGet,
    CacheIncr,
    CacheKeys,
    CachePurge,
    CacheRemove,
    CacheSet,
    CacheTruncate,
)
from cubequeue.grammar.errors import InvalidTextRepresentation, LimitExceeded
from cubequeue.grammar.results import EMPTY, ResultSet, Row
from cubequeue.storage import bound_fields
from cubequeue.storage.cachestore_info import InfoRow, tally_rows
from cubequeue.storage.clock import Clock
from cubequeue.storage.expiry import ExpiryHeap
from cubequeue.storage.limits import Limits
from cubequeue.storage.record_kinds import CACHE_DEL, CACHE_PUT, PURGE, TRUNCATE
from cubequeue.storage.row_sizes import SizeTally
from cubequeue.storage.sizes import format_size, utf8_len
from cubequeue.storage.system_schemas import CACHE_COLUMNS

__all__ = ["CacheStore", "counter_value"]

_MS_PER_SECOND = 1000
_I64_MAX = 2**63 - 1
_I64_MIN_MAGNITUDE = 2**63
#: Rust's ``ParseIntError`` texts (``core::num``), which Cube Store passes through (§4.6).
_RUST_EMPTY = "cannot parse integer from empty string"
_RUST_INVALID_DIGIT = "invalid digit found in string"
_RUST_POS_OVERFLOW = "number too large to fit in target type"
_RUST_NEG_OVERFLOW = "number too small to fit in target type"
_DELETE_SKIPPED_DESCRIPTION = (
    "Number of rows which was scheduled for deletion (from eviction), but were deleted by "
    "another process (compaction / delete)"
)


class _Entry:
    """One cache row. Mutable: a replacing SET or an INCR updates it in place."""

    __slots__ = ("expire", "id", "key", "path", "prefix", "size", "value")

    def __init__(
        self,
        id_: int,
        path: str,
        prefix: str | None,
        key: str,
        value: str,
        expire: int | None,
        size: int,
    ) -> None:
        self.id = id_
        self.path = path
        self.prefix = prefix
        self.key = key
        self.value = value
        #: ms since the epoch; None = never expires
        self.expire = expire
        #: accounted bytes: UTF-8 length of path + value
        self.size = size


class CacheStore:
    """The cache half of the store; one instance per server, driven one call at a time."""

    __slots__ = (
        "_by_prefix",
        "_clock",
        "_entries",
        "_evicted_bytes",
        "_evicted_keys",
        "_expired_keys",
        "_expiry",
        "_limits",
        "_next_id",
        "_sizes",
        "_ttl_rows",
        "journal",
    )

    def __init__(self, clock: Clock, limits: Limits) -> None:
        self._clock = clock
        self._limits = limits
        #: path → entry, in LRU order: first = least recently used
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        #: index prefix ("" for no colon) → path → entry, in row-id order
        self._by_prefix: dict[str, dict[str, _Entry]] = {}
        #: row id → entry, for the entries with a TTL (what the expiry heap's ids name)
        self._ttl_rows: dict[int, _Entry] = {}
        self._expiry = ExpiryHeap(self._ttl_live)
        self._next_id = 1
        #: the entries' sizes; its total is the accounted bytes held
        self._sizes = SizeTally()
        self._evicted_keys = 0
        self._evicted_bytes = 0
        self._expired_keys = 0
        #: durable mode: each change appends its state record (None: in memory only)
        self.journal: list[tuple[object, ...]] | None = None

    # ----------------------------------------------------------------- properties

    @property
    def keys(self) -> int:
        """Entries held (all live after a sweep)."""
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """Accounted bytes of the entries held (path + value, UTF-8)."""
        return self._sizes.total

    @property
    def evictions_total(self) -> int:
        """Entries removed by LRU eviction since start (expiry and deletes not counted)."""
        return self._evicted_keys

    @property
    def evicted_bytes_total(self) -> int:
        return self._evicted_bytes

    @property
    def expired_total(self) -> int:
        """Entries removed by the expiry sweep since start."""
        return self._expired_keys

    @property
    def next_id(self) -> int:
        """The row id the next inserted entry takes."""
        return self._next_id

    def lru_paths(self) -> list[str]:
        """Every path held, least recently used first."""
        return list(self._entries)

    def row(self, path: str) -> tuple[int, str, int | None] | None:
        """(row id, value, expire) of ``path``, without counting as a use."""
        entry = self._entries.get(path)
        return None if entry is None else (entry.id, entry.value, entry.expire)

    # ------------------------------------------------------------------- commands

    def cache_set(self, cmd: CacheSet) -> ResultSet:
        """§4.1: size check, then NX / replace / insert; evicts in the same step."""
        path = bound_fields.text(cmd.key)
        value = bound_fields.text(cmd.value)
        ttl = bound_fields.opt_num(cmd.ttl)
        value_bytes = utf8_len(value)
        max_entry = self._limits.cache_max_entry_bytes
        if value_bytes >= max_entry:
            raise LimitExceeded(
                f"Unable to SET cache with '{_split(path)[1]}' key, exceeds maximum allowed "
                f"size for payload: {format_size(value_bytes)}, "
                f"max allowed: {format_size(max_entry)}"
            )
        now = self._begin()
        expire = None if ttl is None else now + ttl * _MS_PER_SECOND
        entry = self._entries.get(path)
        if entry is not None and cmd.nx:
            return _one(cmd, False)
        size = utf8_len(path) + value_bytes
        if expire is not None and expire <= now:
            # TTL 0: the row would be invisible at once (§4.1 rule 5); whatever was there
            # is replaced by nothing a client can see.
            if entry is not None:
                self._drop(entry)
            return _one(cmd, True)
        if entry is None:
            self._insert(path, value, expire, size)
        else:
            self._update(entry, value, expire, size)
        self._evict_over_limits()
        return _one(cmd, True)

    def cache_get(self, cmd: CacheGet) -> ResultSet:
        """§4.2: always one row; NULL when missing or expired; a hit is a use."""
        path = bound_fields.text(cmd.key)
        self._begin()
        entry = self._entries.get(path)
        if entry is None:
            return _one(cmd, None)
        self._entries.move_to_end(path)
        return _one(cmd, entry.value)

    def cache_keys(self, cmd: CacheKeys) -> ResultSet:
        """§4.3: full paths whose prefix equals the pattern, in row-id order."""
        prefix = _pattern_prefix(bound_fields.text(cmd.pattern))
        self._begin()
        rows: list[Row] = [(path,) for path in self._by_prefix.get(prefix, ())]
        return ResultSet(cmd.result_columns(), rows)

    def cache_remove(self, cmd: CacheRemove) -> ResultSet:
        """§4.4: a missing key is not an error."""
        path = bound_fields.text(cmd.key)
        self._begin()
        entry = self._entries.get(path)
        if entry is not None:
            self._drop(entry)
        return EMPTY

    def cache_truncate(self, cmd: CacheTruncate) -> ResultSet:
        """§4.5: every entry goes; the row-id sequence continues (§2.5)."""
        del cmd  # nothing to read: the statement has no arguments
        if self.journal is not None:
            self.journal.append((TRUNCATE, "cache"))
        self._entries.clear()
        self._by_prefix.clear()
        self._expiry.clear()
        self._ttl_rows.clear()
        self._sizes = SizeTally()
        return EMPTY

    def cache_incr(self, cmd: CacheIncr) -> ResultSet:
        """§4.6: missing → "1" without TTL; else i64 + 1 keeping TTL and row id."""
        path = bound_fields.text(cmd.key)
        self._begin()
        entry = self._entries.get(path)
        if entry is None:
            value = "1"
            self._insert(path, value, None, utf8_len(path) + 1)
        else:
            current = counter_value(path, entry.value)
            value = str(current + 1)
            size = entry.size - len(entry.value) + len(value)  # both ASCII
            self._update(entry, value, entry.expire, size)
        self._evict_over_limits()
        return _one(cmd, value)

    def cache_purge(self, cmd: CachePurge) -> ResultSet:
        """CACHE PURGE (§4.8, cubequeue): drop every key KEYS would list for this pattern, at once."""
        prefix = _pattern_prefix(bound_fields.text(cmd.prefix))
        self._begin()
        group = self._by_prefix.pop(prefix, None)
        removed = 0
        if group is not None:
            for entry in group.values():
                self._forget(entry, journaled=False)
            removed = len(group)
            if self.journal is not None:  # one record: the entries below the next row id
                self.journal.append((PURGE, "cache", prefix, None, self._next_id))
        return _one(cmd, removed)

    # ------------------------------------------------------ housekeeping & system

    def sweep(self) -> int:
        """Remove every entry whose expiry has passed; O(1) when none has. Returns the count."""
        return self._sweep(self._clock())

    def run_eviction(self) -> int:
        """Sweep, then evict LRU entries until both limits hold; returns the keys evicted.

        Since every write already evicts in its own step, this finds work only when a
        limit was lowered or a lone entry exceeds ``cache_max_bytes`` (which it keeps).
        """
        self._begin()
        return self._evict_over_limits()

    def system_rows(self) -> ResultSet:
        """``system.cache``: live rows in row-id order (``id`` is the key part)."""
        self._begin()
        ordered = sorted(self._entries.values(), key=lambda e: e.id)
        # prefix is text, not NULL (§8 rule 11): a path without a colon has prefix "",
        # the empty string Cube Store indexes it under (§2.1), as system.queue shows it.
        rows: list[Row] = [(e.key, e.prefix or "", e.expire, e.value) for e in ordered]
        return ResultSet(CACHE_COLUMNS, rows)

    def eviction_rows(self) -> list[tuple[str, str, str | None]]:
        """``SYS CACHESTORE EVICTION`` rows (§5.1), name | value | description.

        Cube Store reports the run it just made; cubequeue evicts inside each write, so
        the removal figures are totals since start (a per-run figure would always be 0).
        Nothing is ever scheduled and then deleted by someone else, so ``skipped`` is 0.
        """
        return [
            ("stats_total_keys", str(len(self._entries)), None),
            ("stats_total_raw_size", format_size(self._sizes.total), None),
            ("total_keys_removed", str(self._evicted_keys), "Keys evicted since start"),
            ("total_size_removed", format_size(self._evicted_bytes), "Bytes evicted since start"),
            ("total_delete_skipped", "0", _DELETE_SKIPPED_DESCRIPTION),
        ]

    def info_rows(self) -> list[InfoRow]:
        """The 7 ``CacheItems.*`` rows of ``SYS CACHESTORE INFO`` (§5.1), no sweep: the
        kept sizes, and the expired entries the sweep has not removed (the expiry heap's
        due part: none after a step's sweep), so the cost does not grow with the cache."""
        rows = self._ttl_rows
        due = self._expiry.due_ids(self._clock())
        return tally_rows("CacheItems", self._sizes, None, (rows[id_].size for id_ in due))

    # ------------------------------------------------------------------ internals

    def _begin(self) -> int:
        """The step's instant, after removing what expired by then."""
        now = self._clock()
        self._sweep(now)
        return now

    def _sweep(self, now: int) -> int:
        due = self._expiry.pop_due(now)
        if not due:
            return 0
        rows = self._ttl_rows
        for id_ in due:
            self._drop(rows[id_], in_sweep=True)
        self._expired_keys += len(due)
        return len(due)

    def _ttl_live(self, due: int, id_: int) -> bool:
        """A heap entry is live while its row exists with that very expiry (a new TTL
        leaves the old entry behind)."""
        entry = self._ttl_rows.get(id_)
        return entry is not None and entry.expire == due

    def _insert(self, path: str, value: str, expire: int | None, size: int) -> None:
        prefix, key = _split(path)
        entry = _Entry(self._next_id, path, prefix, key, value, expire, size)
        self._next_id += 1
        self._entries[path] = entry  # appended: most recently used
        self._by_prefix.setdefault(prefix or "", {})[path] = entry
        self._sizes.add(size)
        if expire is not None:
            self._schedule(entry, expire)
        if self.journal is not None:
            self.journal.append((CACHE_PUT, entry.id, path, value, expire))

    def restore(self, row_id: int, path: str, value: str, expire: int | None) -> None:
        """Recovery: put back an entry with its row id (LRU order = restore order)."""
        prefix, key = _split(path)
        entry = _Entry(row_id, path, prefix, key, value, expire, utf8_len(path) + utf8_len(value))
        self._entries[path] = entry
        self._by_prefix.setdefault(prefix or "", {})[path] = entry
        self._sizes.add(entry.size)
        if expire is not None:
            self._schedule(entry, expire)
        self._next_id = max(self._next_id, row_id + 1)

    def sort_prefix_index(self) -> None:
        """Recovery: KEYS lists rows in row-id order; entries came back in LRU order."""
        for index, group in self._by_prefix.items():
            self._by_prefix[index] = dict(sorted(group.items(), key=lambda kv: kv[1].id))

    def _update(self, entry: _Entry, value: str, expire: int | None, size: int) -> None:
        """Replace value and expiry in place: the row id and KEYS position stay."""
        if size != entry.size:
            self._sizes.resize(entry.size, size)
            entry.size = size
        entry.value = value
        if expire != entry.expire:
            if entry.expire is not None:
                del self._ttl_rows[entry.id]
                self._expiry.note_dead()  # its heap entry is stale from now on
            entry.expire = expire
            if expire is not None:
                self._schedule(entry, expire)
        self._entries.move_to_end(entry.path)
        if self.journal is not None:
            self.journal.append((CACHE_PUT, entry.id, entry.path, value, expire))

    def _schedule(self, entry: _Entry, expire: int) -> None:
        self._ttl_rows[entry.id] = entry
        self._expiry.push(expire, entry.id)

    def _drop(self, entry: _Entry, *, in_sweep: bool = False) -> None:
        """Remove one entry from every structure (``in_sweep``: its expiry entry is
        popped already)."""
        index = entry.prefix or ""
        group = self._by_prefix[index]
        del group[entry.path]
        if not group:
            del self._by_prefix[index]
        self._forget(entry, in_sweep=in_sweep)

    def _forget(self, entry: _Entry, *, in_sweep: bool = False, journaled: bool = True) -> None:
        """Remove an entry from everything but the prefix index (PURGE drops that whole,
        and journals one record for all: ``journaled`` False)."""
        del self._entries[entry.path]
        self._sizes.remove(entry.size)
        if journaled and self.journal is not None and not in_sweep:
            self.journal.append((CACHE_DEL, entry.path))
        if entry.expire is not None:
            del self._ttl_rows[entry.id]
            if not in_sweep:
                self._expiry.note_dead()

    def _evict_over_limits(self) -> int:
        """allkeys-lru until keys ≤ max_keys and bytes ≤ max_bytes; spares the MRU entry."""
        max_keys = self._limits.cache_max_keys
        max_bytes = self._limits.cache_max_bytes
        sizes = self._sizes
        evicted = 0
        while (len(self._entries) > max_keys or sizes.total > max_bytes) and len(self._entries) > 1:
            victim = next(iter(self._entries.values()))
            self._drop(victim)
            self._evicted_bytes += victim.size
            evicted += 1
        self._evicted_keys += evicted
        return evicted


# ---------------------------------------------------------------------- helpers


def _one(cmd: CacheSet | CacheGet | CacheIncr | CachePurge, value: str | int | None) -> ResultSet:
    return ResultSet(cmd.result_columns(), [(value,)])


def _split(path: str) -> tuple[str | None, str]:
    """§2.1: (prefix or None, key), split at the last colon."""
    prefix, colon, key = path.rpartition(":")
    return (prefix, key) if colon else (None, path)


def _pattern_prefix(pattern: str) -> str:
    """§4.3: strip a trailing ``:*``, else one trailing ``:``; the rest is an exact prefix."""
    if pattern.endswith(":*"):
        return pattern[:-2]
    if pattern.endswith(":"):
        return pattern[:-1]
    return pattern


_SHOWN_VALUE = 40
_DECIMAL = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+(?:\.\d*)?[eE][+-]?\d+)")


def _value_kind(text: str) -> str:
    """What a value that CACHE INCR cannot count holds, in words."""
    body = text.strip()
    if not text:
        return "the empty string"
    if re.fullmatch(r"[+-]?\d+", body):
        return "an integer outside the 64-bit range" if body == text else "an integer with blanks"
    if _DECIMAL.fullmatch(body):
        return "a decimal number"
    if body[:1] in ("{", "["):
        return "JSON text"
    return "text"


def counter_value(path: str, text: str) -> int:
    """The i64 a CACHE INCR adds one to, or 22P02 with Rust's message (Cube Store's, §4.6)
    and a detail naming the key and what its value holds (issue 27)."""
    try:
        current = _parse_i64(text)
    except InvalidTextRepresentation as exc:
        shown = text if len(text) <= _SHOWN_VALUE else text[:_SHOWN_VALUE] + "…"
        exc.detail = (f'The value of key "{path}" is {_value_kind(text)} ("{shown}"), not a '
                      "64-bit integer: CACHE INCR counts integer values only.")
        raise
    if current == _I64_MAX:
        # Cube Store's `last_val + 1` wraps in a release build; we refuse instead.
        raise InvalidTextRepresentation(
            _RUST_POS_OVERFLOW,
            detail=f'The value of key "{path}" is {text}, the largest 64-bit integer.')
    return current


def _parse_i64(text: str) -> int:
    """Rust's ``str::parse::<i64>``: optional sign, ASCII digits only, same errors.

    Digits are checked left to right and overflow is reported at the digit that causes
    it, so ``99999999999999999999x`` is "too large" and ``9x`` an invalid digit, as in
    ``core::num::from_str_radix``.
    """
    if not text:
        raise InvalidTextRepresentation(_RUST_EMPTY)
    negative = text[0] == "-"
    digits = text[1:] if text[0] in "+-" else text
    if not digits:
        raise InvalidTextRepresentation(_RUST_INVALID_DIGIT)
    limit = _I64_MIN_MAGNITUDE if negative else _I64_MAX
    magnitude = 0
    for char in digits:
        if not "0" <= char <= "9":
            raise InvalidTextRepresentation(_RUST_INVALID_DIGIT)
        magnitude = magnitude * 10 + (ord(char) - 48)
        if magnitude > limit:
            raise InvalidTextRepresentation(_RUST_NEG_OVERFLOW if negative else _RUST_POS_OVERFLOW)
    return -magnitude if negative else magnitude
