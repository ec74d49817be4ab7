"""Per-connection plain-SQL state: settings (GUCs), process id and transaction status.

PostgreSQL semantics kept (docs: "SET", "RESET", "DISCARD", "Transactions"):

* names are case-insensitive; SHOW reports the canonical spelling (``DateStyle``);
* a ``SET`` inside a transaction block is undone by ROLLBACK (and by COMMIT of a failed
  block); ``SET LOCAL`` lasts until the block ends;
* ``RESET``/``RESET ALL`` go back to the *reset value*: the startup parameter when the
  client sent one, else the server default;
* ParameterStatus is sent only for reported parameters whose value changed (PostgreSQL
  14+ compares with the last reported value).

The store is not transactional: ``tx_status`` only mirrors PostgreSQL's ReadyForQuery
byte so that drivers (psycopg decides BEGIN/COMMIT from it) behave.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import tzinfo
from typing import Literal

from cubequeue.grammar.errors import InvalidParameterValue
from cubequeue.server.timestamps import session_zone
from cubequeue.storage.limits import MAX_PROCESS_ID_BYTES
from cubequeue.storage.sizes import utf8_len

from .errors import CantChangeRuntimeParam
from .gucs import GUCS, canonical_name, normalize, server_version_num

__all__ = ["MAX_PROCESS_ID_LEN", "PlainSession", "TxStatus"]

#: the store's process-id cap (UTF-8 bytes), under the name this package exported first
MAX_PROCESS_ID_LEN = MAX_PROCESS_ID_BYTES
TxStatus = Literal["I", "T", "E"]
#: Startup keys that are connection parameters, not settings (protocol-flow.html).
_NOT_GUCS = frozenset({"user", "database", "replication", "options"})


def _parse_options(options: str) -> Iterator[tuple[str, str]]:
    """libpq ``options``: ``-c name=value`` / ``--name=value``; backslash escapes a space."""
    words = [w.replace("\\ ", " ") for w in re.split(r"(?<!\\)\s+", options.strip()) if w]
    i = 0
    while i < len(words):
        w = words[i]
        if w == "-c" and i + 1 < len(words):
            w, i = words[i + 1], i + 1
        elif w.startswith("-c") or w.startswith("--"):
            w = w[2:]
        else:
            i += 1
            continue
        if "=" in w:
            name, value = w.split("=", 1)
            yield name.replace("-", "_"), value
        i += 1


class _Settings(Mapping[str, str]):
    """A read-only, case-insensitive view of a session's current settings."""

    __slots__ = ("_session",)

    def __init__(self, session: PlainSession) -> None:
        self._session = session

    def __getitem__(self, name: str) -> str:
        value = self._session.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        s = self._session
        keys = set(s._session_values) | set(s._local)
        return iter(sorted((canonical_name(k) for k in keys), key=str.lower))

    def __len__(self) -> int:
        s = self._session
        return len(set(s._session_values) | set(s._local))


class PlainSession:
    """The settings and transaction state of one connection (either wire)."""

    __slots__ = (
        "_local",
        "_reset_values",
        "_session_values",
        "_tx_snapshot",
        "database",
        "process_id_max_len",
        "server_version",
        "tx_status",
        "user",
    )

    def __init__(
        self,
        *,
        server_version: str,
        user: str,
        startup_params: Mapping[str, str] | None = None,
        process_id_max_len: int = MAX_PROCESS_ID_BYTES,
    ) -> None:
        """Raises QueueError for a startup parameter the server refuses (an over-long
        process_id 22023, a non-UTF8 client_encoding 0A000…): send it as FATAL.

        ``process_id_max_len`` is in UTF-8 bytes; the default is the store's own cap
        (``docs/dialect.md`` §3.1), checked here too so a SET fails at once."""
        params = dict(startup_params or {})
        self.server_version = server_version
        self.user = user
        self.database = params.get("database") or user
        self.process_id_max_len = process_id_max_len
        self.tx_status: TxStatus = "I"
        defaults = {k: g.default for k, g in GUCS.items()}
        defaults["server_version"] = server_version
        defaults["server_version_num"] = server_version_num(server_version)
        defaults["session_authorization"] = user
        given = [(k, v) for k, v in params.items() if k not in _NOT_GUCS and not k.startswith("_pq_.")]
        given.extend(_parse_options(params.get("options", "")))
        for name, value in given:
            key = name.lower()
            g = GUCS.get(key)
            if g is not None and g.read_only:
                continue  # server-owned (server_version…): ignored rather than refusing the connection
            defaults[key] = self._checked(key, value, defaults.get(key))
        self._reset_values: dict[str, str] = defaults
        self._session_values: dict[str, str] = dict(defaults)
        self._local: dict[str, str] = {}
        self._tx_snapshot: dict[str, str] | None = None

    # -- reading ---------------------------------------------------------------------

    @property
    def settings(self) -> Mapping[str, str]:
        return _Settings(self)

    def get(self, name: str) -> str | None:
        key = name.lower()
        value = self._local.get(key)
        return value if value is not None else self._session_values.get(key)

    @property
    def process_id(self) -> str | None:
        """The connection's process id (``docs/dialect.md`` §8 rule 7); None when unset
        or empty."""
        return self.get("process_id") or None

    @property
    def zone(self) -> tzinfo:
        """The ``TimeZone`` setting as a tzinfo: the zone a text timestamptz is shown in,
        on the wire as in ``::text``."""
        return session_zone(self.get("TimeZone") or "UTC")

    @property
    def statement_timeout_ms(self) -> int:
        """``statement_timeout`` in ms (0 = none), for a wire that wants to honour it."""
        value = self.get("statement_timeout") or "0"
        m = re.fullmatch(r"(\d+)(ms|s|min|h|d)?", value)
        if not m:
            return 0
        scale = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
        return int(m.group(1)) * scale[m.group(2) or "ms"]

    def reported(self) -> dict[str, str]:
        """The reported parameters and their values (the ParameterStatus set after auth)."""
        return {g.name: self.get(k) or "" for k, g in GUCS.items() if g.reported}

    # -- changing --------------------------------------------------------------------

    def _checked(self, key: str, value: str, current: str | None) -> str:
        if key == "process_id" and utf8_len(value) > self.process_id_max_len:
            # Cube Store's wording says "characters" although the cap counts bytes
            raise InvalidParameterValue(
                f"process_id exceeds maximum allowed length of {self.process_id_max_len} characters"
            )
        return normalize(key, value, current)

    def check(self, name: str, value: str | None) -> None:
        """Validate ``SET name = value`` without applying it."""
        key = name.lower()
        g = GUCS.get(key)
        if g is not None and g.read_only:
            raise CantChangeRuntimeParam(f'parameter "{g.name}" cannot be changed')
        if value is not None:
            self._checked(key, value, self.get(key))

    def set(self, name: str, value: str | None, *, local: bool = False) -> None:
        """``SET name = value`` (``value`` None = DEFAULT). Raises and changes nothing on
        an invalid value or a read-only parameter."""
        self.check(name, value)
        key = name.lower()
        if value is None:
            new = self._reset_values.get(key)
        else:
            new = self._checked(key, value, self.get(key))
        if local:
            if new is None:
                self._local.pop(key, None)
            else:
                self._local[key] = new
            return
        self._local.pop(key, None)
        if new is None:
            self._session_values.pop(key, None)
        else:
            self._session_values[key] = new

    def reset(self, name: str) -> None:
        self.set(name, None)

    def reset_all(self) -> None:
        """RESET ALL: back to the startup values and server defaults."""
        self._local.clear()
        self._session_values = dict(self._reset_values)

    # -- transactions ----------------------------------------------------------------

    def begin(self) -> bool:
        """Start a block; False (nothing changes) when one is already open."""
        if self.tx_status != "I":
            return False
        self.tx_status = "T"
        self._tx_snapshot = dict(self._session_values)
        return True

    def end(self, *, commit: bool) -> bool:
        """COMMIT/ROLLBACK: True when a block was open. A failed block always rolls back."""
        if self.tx_status == "I":
            return False
        if not commit or self.tx_status == "E":
            assert self._tx_snapshot is not None
            self._session_values = self._tx_snapshot
        self._tx_snapshot = None
        self._local.clear()
        self.tx_status = "I"
        return True

    def fail_transaction(self) -> None:
        """The wire calls this after *any* statement failed (queue commands included):
        an open block becomes failed ('E'); outside a block nothing changes."""
        if self.tx_status == "T":
            self.tx_status = "E"
