"""The shape-keyed statement cache: one parse per statement *shape*, not per text.

Cube's driver inlines literals into the statement text (always for its
``CACHE SET NX 'lock' …``, and for ``QUEUE ADD … '<payload>'`` unless typed parameters
are on), so a cache keyed by the full text both misses and grows with every payload.
Here the key is the statement's text with every literal (quoted strings and numbers)
replaced by its kind (:func:`shape_of`, one regex match per literal); a hit fills the
cached :class:`~cubequeue.grammar.templates.Template` with this statement's literal
texts, through the same decoders and range checks a parse applies. Blanks and comments
are not part of the shape; words are (a bare word may be a keyword or a value, which
only the parser knows).

Errors are never cached, and never worded here: whenever the template parse or filling
it fails, the statement text is parsed as is, so an error (a range check, a duplicate
option, a bad escape, its position) is exactly the uncached parse's.

The cache is bounded in bytes (:data:`MAX_CACHE_BYTES` of keys and templates, least
recently used dropped first); a template holds no literal text, so a statement's
payload is never retained, and a shape whose key alone exceeds :data:`MAX_ENTRY_BYTES`
(megabytes of bare words) is not cached at all.

In front of it sits a small exact-text map for *short* statements (at most
:data:`MAX_EXACT_TEXT` characters, :data:`MAX_EXACT_BYTES` in all): a driver that prepares
the same parameterised text again and again (psycopg's unnamed statements, Cube's
``QUEUE RESULT_BLOCKING ? ?``) then skips tokenizing too. Its bound is in bytes, so it
cannot pin large payloads either. A text enters it on its second sighting only
(:meth:`StatementCache.prepare`), so the stream of once-seen texts with fresh payloads
costs it nothing and evicts nothing.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass

from cubequeue.grammar.binding import param_slots
from cubequeue.grammar.commands import Command, Param
from cubequeue.grammar.errors import QueueError
from cubequeue.grammar.parser import parse, parse_template
from cubequeue.grammar.results import Column
from cubequeue.grammar.templates import Template
from cubequeue.grammar.tokens import literal_runs, tokenize

__all__ = [
    "MAX_CACHE_BYTES",
    "MAX_ENTRY_BYTES",
    "Prepared",
    "StatementCache",
    "parse_cached",
    "prepare",
    "shape_of",
]

#: default byte bound of one cache: keys and templates together
MAX_CACHE_BYTES = 16 * 1024 * 1024
#: a shape whose key is longer than this is parsed every time, never cached
MAX_ENTRY_BYTES = 256 * 1024
#: statements up to this many characters are also kept by their exact text
MAX_EXACT_TEXT = 1024
#: byte bound of the exact-text map (texts and their prepared commands)
MAX_EXACT_BYTES = 2 * 1024 * 1024
#: what a template and its bookkeeping cost besides the key (a generous estimate)
_ENTRY_OVERHEAD = 2048
#: slots of the exact-text map's doorkeeper (see :meth:`StatementCache.prepare`)
_SEEN_SLOTS = 4096


def shape_of(sql: str) -> tuple[str, list[str]] | None:
    """``sql``'s shape key and its literal token texts, in order; ``None`` for a
    statement the tokenizer cannot finish (an unterminated literal or comment), which
    only a parse can word.

    The key is the text between literals and each literal's kind, joined by ``\\x01``
    (which ``tokens.literal_runs`` never leaves in a run), with runs of ASCII blanks
    collapsed to one space (``CACHE  SET`` and ``CACHE SET`` share a shape; blank or not
    stays apart: ``$1 5`` is not ``$15``). Only for ASCII keys, where ``str.split``
    splits at exactly the tokenizer's blanks (the scan keeps \\x1c-\\x1f out of runs).
    Text with a comment (or an operator the scan leaves out) is first rewritten as its
    tokens joined by single spaces, which tokenizes the same, so comments are not part
    of the shape either.
    """
    cut = literal_runs(sql)
    if cut is None:
        cut = literal_runs(" ".join(sql[start:end] for _kind, start, end in tokenize(sql)))
        if cut is None:
            return None
    pieces, literals = cut
    key = "\x01".join(pieces)
    if key.isascii():
        key = " ".join(key.split())
    return key, literals


@dataclass(frozen=True, slots=True)
class Prepared:
    """A parsed statement: its command (with the statement's own placeholders), those
    placeholders by index, and its result columns (for Describe)."""

    sql: str
    command: Command
    params: tuple[Param, ...]
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class _Entry:
    template: Template
    params: tuple[Param, ...]
    columns: tuple[Column, ...]
    size: int


class StatementCache:
    """Shape key → template, LRU within ``max_bytes`` (see the module docstring)."""

    def __init__(self, max_bytes: int = MAX_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self._exact: OrderedDict[str, Prepared] = OrderedDict()
        self._exact_bytes = 0
        self._seen = [0] * _SEEN_SLOTS
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """The estimated size of what the cache holds."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self._exact.clear()
            self._exact_bytes = 0
            self._seen = [0] * _SEEN_SLOTS

    def _entry(self, sql: str, key: str) -> _Entry | None:
        entries = self._entries
        with self._lock:
            entry = entries.get(key)
            if entry is not None:
                entries.move_to_end(key)
                return entry
        try:
            command = parse_template(sql)
        except QueueError:
            return None
        template = Template(command)
        size = sys.getsizeof(key) + _ENTRY_OVERHEAD
        entry = _Entry(template, tuple(param_slots(command)), command.result_columns(), size)
        if size > MAX_ENTRY_BYTES or size > self.max_bytes:
            return entry
        with self._lock:
            if key not in entries:
                entries[key] = entry
                self._bytes += size
                while self._bytes > self.max_bytes:
                    _, dropped = entries.popitem(last=False)
                    self._bytes -= dropped.size
        return entry

    def parse(self, sql: str) -> Command:
        """:func:`~cubequeue.grammar.parse`, one template parse per shape."""
        return self.prepare(sql).command

    def prepare(self, sql: str) -> Prepared:
        """``sql`` parsed (through the cache) with its placeholders and result columns.

        A short text enters the exact-text map on its second sighting only: a
        doorkeeper of :data:`_SEEN_SLOTS` text hashes (direct-mapped, so a collision
        merely forgets a sighting) remembers the first. Cube inlines a fresh payload
        into most ADDs, and those texts, seen once, would only push out the ones it
        repeats (``QUEUE RESULT_BLOCKING 5000 'q:k'``, ``QUEUE TO_CANCEL …``).
        """
        exact = self._exact.get(sql)
        if exact is not None:
            return exact
        prepared = self._prepare(sql)
        if len(sql) <= MAX_EXACT_TEXT:
            digest = hash(sql)
            slot = digest % _SEEN_SLOTS
            if self._seen[slot] != digest:
                self._seen[slot] = digest
            else:
                self._admit(sql, prepared)
        return prepared

    def _admit(self, sql: str, prepared: Prepared) -> None:
        size = 2 * sys.getsizeof(sql) + _ENTRY_OVERHEAD
        exact = self._exact
        with self._lock:
            if sql not in exact:
                exact[sql] = prepared
                self._exact_bytes += size
                while self._exact_bytes > MAX_EXACT_BYTES:
                    text, _ = exact.popitem(last=False)
                    self._exact_bytes -= 2 * sys.getsizeof(text) + _ENTRY_OVERHEAD

    def _prepare(self, sql: str) -> Prepared:
        shape = shape_of(sql)
        entry = None if shape is None else self._entry(sql, shape[0])
        if entry is None:
            command = parse(sql)  # raises the statement's own error
            return Prepared(sql, command, tuple(param_slots(command)), command.result_columns())
        template = entry.template
        literals = shape[1]  # type: ignore[index]  # entry is None when shape is
        if template.literals == len(literals):
            try:
                return Prepared(sql, template.fill(literals), entry.params, entry.columns)
            except QueueError:
                pass
        command = parse(sql)  # a literal's own error, worded by the parse
        return Prepared(sql, command, entry.params, entry.columns)


_DEFAULT = StatementCache()


def parse_cached(sql: str) -> Command:
    """:meth:`StatementCache.parse` on the process-wide cache."""
    return _DEFAULT.parse(sql)


def prepare(sql: str) -> Prepared:
    """:meth:`StatementCache.prepare` on the process-wide cache."""
    return _DEFAULT.prepare(sql)
