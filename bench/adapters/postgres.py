"""The PostgreSQL queue an expert would write: tables, SKIP LOCKED, PL/pgSQL, NOTIFY.

* ``queue_item`` holds pending and active items (``fillfactor`` 70 so heartbeat and
  extra updates stay HOT); a partial index serves "pending, highest priority first".
* ``q_add`` inserts with ``ON CONFLICT (path) DO NOTHING`` (dedup) and reports the
  prefix's pending count, as QUEUE ADD does: one round trip.
* ``q_claim`` is reconcile and RETRIEVE in one round trip: a per-prefix advisory
  transaction lock makes "active < concurrency" race-free across any number of clients,
  then ``FOR UPDATE SKIP LOCKED`` picks the top pending rows.
* ``q_add_claim`` is the fast track (insert, then claim while active + pending <
  concurrency), under the same prefix lock.
* ``q_ack`` deletes the item, stores the result and ``pg_notify``s each registered
  waiter's channel with the result as payload (a 1 KB result fits the 8000-byte limit),
  so the woken client needs no further query.
* ``q_wait`` registers the client's channel in ``queue_waiter`` (each client LISTENs on
  its own channel once, at connect) or returns the stored result when the ACK already
  happened. A ``FOR KEY SHARE`` lock on the item orders it against ``q_ack``'s DELETE (no
  lost wake-ups, no polling) and, unlike a row update, does not make the claim's
  ``FOR NO KEY UPDATE SKIP LOCKED`` skip a pending item that somebody waits for.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import asyncpg

from bench.adapters.base import Claim, PreparedAdapter, Target

__all__ = ["SCHEMA", "PostgresAdapter", "install_schema"]

SCHEMA = r"""
DROP TABLE IF EXISTS queue_item, queue_waiter, queue_result CASCADE;
CREATE TABLE queue_item (
    id        bigserial PRIMARY KEY,
    prefix    text NOT NULL,
    path      text NOT NULL UNIQUE,
    priority  int NOT NULL,
    active    boolean NOT NULL DEFAULT false,
    payload   text NOT NULL,
    extra     jsonb,
    heartbeat timestamptz,
    created   timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);
CREATE INDEX queue_item_pending ON queue_item (prefix, priority DESC, id) WHERE NOT active;
CREATE INDEX queue_item_active ON queue_item (prefix) WHERE active;
CREATE TABLE queue_waiter (
    item_id bigint NOT NULL,
    channel text NOT NULL
);
CREATE INDEX queue_waiter_item ON queue_waiter (item_id);
CREATE TABLE queue_result (
    path   text PRIMARY KEY,
    id     bigint NOT NULL,
    result text NOT NULL,
    expire timestamptz NOT NULL
);

CREATE OR REPLACE FUNCTION q_add(p_prefix text, p_path text, p_priority int, p_payload text,
                                 OUT id bigint, OUT added boolean, OUT pending bigint)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queue_item AS q (prefix, path, priority, payload)
    VALUES (p_prefix, p_path, p_priority, p_payload)
    ON CONFLICT (path) DO NOTHING
    RETURNING q.id INTO id;
    added := id IS NOT NULL;
    IF NOT added THEN
        SELECT q.id INTO id FROM queue_item q WHERE q.path = p_path;
    END IF;
    SELECT count(*) INTO pending FROM queue_item q WHERE q.prefix = p_prefix AND NOT q.active;
END $$;

CREATE OR REPLACE FUNCTION q_claim(p_prefix text, p_concurrency int)
RETURNS TABLE (id bigint, path text, payload text)
LANGUAGE plpgsql AS $$
DECLARE
    slots int;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_prefix));
    SELECT p_concurrency - count(*) INTO slots
      FROM queue_item q WHERE q.prefix = p_prefix AND q.active;
    IF slots <= 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE queue_item q SET active = true, heartbeat = now()
     WHERE q.id IN (SELECT c.id FROM queue_item c
                     WHERE c.prefix = p_prefix AND NOT c.active
                     ORDER BY c.priority DESC, c.id
                     LIMIT slots
                     FOR NO KEY UPDATE SKIP LOCKED)
    RETURNING q.id, q.path, q.payload;
END $$;

CREATE OR REPLACE FUNCTION q_add_claim(p_prefix text, p_path text, p_priority int,
                                       p_payload text, p_concurrency int,
                                       OUT id bigint, OUT added boolean, OUT payload text)
LANGUAGE plpgsql AS $$
DECLARE
    n_active bigint;
    n_pending bigint;
    is_active boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_prefix));
    INSERT INTO queue_item AS q (prefix, path, priority, payload)
    VALUES (p_prefix, p_path, p_priority, p_payload)
    ON CONFLICT (path) DO NOTHING
    RETURNING q.id INTO id;
    added := id IS NOT NULL;
    IF NOT added THEN
        SELECT q.id, q.active INTO id, is_active FROM queue_item q WHERE q.path = p_path;
        IF is_active THEN
            RETURN;
        END IF;
    END IF;
    SELECT count(*) FILTER (WHERE q.active), count(*) FILTER (WHERE NOT q.active)
      INTO n_active, n_pending
      FROM queue_item q WHERE q.prefix = p_prefix;
    IF n_active + n_pending - 1 < p_concurrency THEN
        UPDATE queue_item q SET active = true, heartbeat = now()
         WHERE q.id = q_add_claim.id
        RETURNING q.payload INTO payload;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION q_ack(p_id bigint, p_result text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_path text;
    ch text;
BEGIN
    DELETE FROM queue_item q WHERE q.id = p_id RETURNING q.path INTO v_path;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO queue_result (path, id, result, expire)
    VALUES (v_path, p_id, p_result, now() + interval '60 seconds')
    ON CONFLICT (path) DO UPDATE SET id = EXCLUDED.id, result = EXCLUDED.result,
                                     expire = EXCLUDED.expire;
    FOR ch IN DELETE FROM queue_waiter w WHERE w.item_id = p_id RETURNING w.channel LOOP
        PERFORM pg_notify(ch, p_id::text || ' ' || p_result);
    END LOOP;
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION q_wait(p_id bigint, p_path text, p_channel text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    -- KEY SHARE orders us before q_ack's DELETE without blocking claims and updates
    PERFORM 1 FROM queue_item q WHERE q.id = p_id FOR KEY SHARE;
    IF FOUND THEN
        INSERT INTO queue_waiter (item_id, channel) VALUES (p_id, p_channel);
        RETURN NULL;  -- registered: q_ack will NOTIFY p_channel
    END IF;
    SELECT q.result INTO r FROM queue_result q WHERE q.path = p_path;
    RETURN coalesce(r, '');  -- '' = neither queued nor acked (reported as an error)
END $$;
"""

SQL = {
    "lookup": "SELECT result FROM queue_result WHERE path = $1",
    "add": "SELECT id, added, pending FROM q_add($1, $2, $3, $4)",
    "add_and_claim": "SELECT id, added, payload FROM q_add_claim($1, $2, $3, $4, $5)",
    "claim": "SELECT id, path, payload FROM q_claim($1, $2)",
    "merge_extra": "UPDATE queue_item SET extra = coalesce(extra, '{}'::jsonb) || $2::jsonb "
    "WHERE id = $1",
    "heartbeat": "UPDATE queue_item SET heartbeat = now() WHERE id = $1",
    "ack": "SELECT q_ack($1, $2)",
    "wait": "SELECT q_wait($1, $2, $3)",
}


async def install_schema(target: Target) -> None:
    conn = await asyncpg.connect(target.dsn)
    try:
        await conn.execute(SCHEMA)
    finally:
        await conn.close()


def _prefix(path: str) -> str:
    return path.rpartition(":")[0]


class PostgresAdapter(PreparedAdapter):
    def __init__(self, conn: asyncpg.Connection, stmts: dict[str, Any], channel: str) -> None:
        super().__init__(conn, stmts)
        self.channel = channel
        self._waiting: dict[int, asyncio.Future[str]] = {}

    @classmethod
    async def open(cls, target: Target) -> PostgresAdapter:
        conn, stmts = await cls.connect(target, SQL)
        self = cls(conn, stmts, f"w_{os.getpid()}_{id(conn):x}")
        await conn.add_listener(self.channel, self._notified)
        return self

    def _notified(self, conn: object, pid: int, channel: str, payload: str) -> None:
        qid, _, result = payload.partition(" ")
        fut = self._waiting.pop(int(qid), None)
        if fut is not None and not fut.done():
            fut.set_result(result)

    async def lookup(self, path: str) -> str | None:
        self.rt["lookup"] += 1
        value: str | None = await self.s["lookup"].fetchval(path)
        return value

    async def add(self, path: str, priority: int, payload: str) -> tuple[int, bool]:
        self.rt["add"] += 1
        row = await self.s["add"].fetchrow(_prefix(path), path, priority, payload)
        return int(row[0]), bool(row[1])

    async def add_and_claim(
        self, path: str, priority: int, payload: str, concurrency: int
    ) -> tuple[int, bool, Claim | None]:
        self.rt["add_and_claim"] += 1
        row = await self.s["add_and_claim"].fetchrow(
            _prefix(path), path, priority, payload, concurrency
        )
        qid = int(row[0])
        claim = None if row[2] is None else Claim(qid, path, row[2], 0)
        return qid, bool(row[1]), claim

    async def reconcile(self, prefix: str, concurrency: int) -> list[Claim]:
        self.rt["claim"] += 1
        rows = await self.s["claim"].fetch(prefix, concurrency)
        return [Claim(int(r[0]), r[1], r[2]) for r in rows]

    async def ack(self, claim: Claim, result: str) -> bool:
        self.rt["ack"] += 1
        return bool(await self.s["ack"].fetchval(claim.qid, result))

    async def wait(self, qid: int, path: str, timeout_ms: int) -> str | None:
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[qid] = fut
        self.rt["wait"] += 1
        stored: str | None = await self.s["wait"].fetchval(qid, path, self.channel)
        if stored is not None:
            self._waiting.pop(qid, None)
            return stored or None
        try:
            return await asyncio.wait_for(fut, timeout_ms / 1000)
        except TimeoutError:
            self._waiting.pop(qid, None)
            return None
