"""Acknowledged results: the values QUEUE ACK stores for RESULT to read (``docs/dialect.md``
§2.3, §3.11, §8 rule 8). Not to be confused with the result *frames* of a statement
(``cubequeue.grammar.results``).

A result's id is its item's id. Three indexes, as Cube Store's QueueResults table has:

* by id (read-many, "v2");
* by path, where the *latest* (highest id) result is the one RESULT <path> consumes. The
  results of one path arrive in ascending id order (a path holds one live item at a time),
  so the latest is kept apart and the older ones in a short list in id order;
* by (path, external_id), unique; cubequeue replaces an older row instead of failing the
  ACK (§8 rule 8).
"""

from __future__ import annotations

import bisect

from cubequeue.grammar.results import Row
from cubequeue.storage.queue_item import utf8_excess

__all__ = ["Result", "Results"]


class Result:
    __slots__ = ("deleted", "expire", "external_id", "id", "path", "prefix", "value", "wide")

    def __init__(
        self,
        *,
        id: int,
        path: str,
        prefix: str,
        value: str,
        expire: int,
        external_id: str | None,
    ) -> None:
        self.id = id
        self.path = path
        self.prefix = prefix
        self.value = value
        self.expire = expire
        self.external_id = external_id
        #: Cube Store's "ready to delete" flag: set when consumed by path (§3.11)
        self.deleted = False
        #: UTF-8 bytes beyond one a character of path and value (its size in O(1))
        self.wide = (0 if path.isascii() and value.isascii()
                     else utf8_excess(path) + utf8_excess(value))

    def row(self) -> Row:
        """The RESULT row: payload, type, id, external_id (§3.11)."""
        return (self.value, "success", str(self.id), self.external_id)


class Results:
    """The unexpired results; callers sweep expired ones before each step (§8 rule 9).

    ``_latest`` maps a path to its highest-id result, the one RESULT <path> reads; the
    rare older results of the same path wait in ``_older`` (ascending id), so the common
    lookup touches one dict and one object.
    """

    __slots__ = ("_by_id", "_by_path_ext", "_latest", "_older")

    def __init__(self) -> None:
        self._by_id: dict[int, Result] = {}
        self._latest: dict[str, Result] = {}
        self._older: dict[str, list[Result]] = {}
        self._by_path_ext: dict[tuple[str, str], Result] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def by_id(self, id_: int) -> Result | None:
        return self._by_id.get(id_)

    def by_path_ext(self, path: str, external_id: str) -> Result | None:
        return self._by_path_ext.get((path, external_id))

    def latest(self, path: str) -> Result | None:
        return self._latest.get(path)

    def add(self, result: Result) -> None:
        self._by_id[result.id] = result
        path = result.path
        previous = self._latest.get(path)
        if previous is None or previous.id < result.id:
            self._latest[path] = result
            if previous is not None:
                self._older.setdefault(path, []).append(previous)
        else:  # cannot happen (see module doc); stay ordered anyway
            bisect.insort(self._older.setdefault(path, []), result, key=_result_id)
        if result.external_id is not None:
            self._by_path_ext[(path, result.external_id)] = result

    def remove(self, result: Result) -> None:
        del self._by_id[result.id]
        path = result.path
        older = self._older.get(path)
        if self._latest.get(path) is result:
            if older:
                self._latest[path] = older.pop()
            else:
                del self._latest[path]
        elif older is not None:
            older.pop(bisect.bisect_left(older, result.id, key=_result_id))
        if older is not None and not older:
            del self._older[path]
        if result.external_id is not None:
            key = (path, result.external_id)
            if self._by_path_ext.get(key) is result:
                del self._by_path_ext[key]

    def clear(self) -> None:
        self._by_id.clear()
        self._latest.clear()
        self._older.clear()
        self._by_path_ext.clear()

    def ids(self) -> list[int]:
        return list(self._by_id)

    def all_by_id(self) -> list[Result]:
        return sorted(self._by_id.values(), key=_result_id)


def _result_id(result: Result) -> int:
    return result.id
