"""The Redis queue as Cube's old Redis driver and BullMQ build it: Lua over zsets/hashes.

Per prefix ``P``: ``q:{P}:ids`` (hash path → id, the dedup index), ``q:{P}:item:<id>``
(hash: path, payload, priority, extra, waiters), ``q:{P}:pending`` (zset, score
``-priority * 1e13 + id``: highest priority first, oldest first within a priority) and
``q:{P}:active`` (zset id → heartbeat ms). Results live in ``r:<path>`` with a 60 s TTL.

Every multi-key step is one EVALSHA (scripts are loaded once by ``install_scripts``), so
each step is one round trip and atomic: the claim reads ``ZCARD active`` and pops from
``pending`` in the same script, which is what makes it race-free. The wait is Cube's old
driver's: ``q_ack`` RPUSHes the result once per registered waiter onto ``w:<id>`` and
the client BLPOPs it (blocking on the server, no polling).
"""

from __future__ import annotations

import time
from collections import Counter

import redis.asyncio as aioredis

from bench.adapters.base import Claim, Target

__all__ = ["SCRIPTS", "RedisAdapter", "install_scripts"]

_NOW = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"

SCRIPTS = {
    "add": r"""
local p, path, prio, payload = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local pk = 'q:{' .. p .. '}:pending'
local id = redis.call('HGET', 'q:{' .. p .. '}:ids', path)
if id then
  redis.call('HINCRBY', 'q:{' .. p .. '}:item:' .. id, 'waiters', 1)
  return {tonumber(id), 0, redis.call('ZCARD', pk)}
end
id = redis.call('INCR', 'q:seq')
redis.call('HSET', 'q:{' .. p .. '}:ids', path, id)
redis.call('HSET', 'q:{' .. p .. '}:item:' .. id, 'path', path, 'payload', payload,
           'priority', prio, 'waiters', 1)
redis.call('ZADD', pk, -prio * 1e13 + id, id)
return {id, 1, redis.call('ZCARD', pk)}
""",
    "add_and_claim": _NOW + r"""
local p, path, prio, payload, conc = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4],
                                     tonumber(ARGV[5])
local pk, ak = 'q:{' .. p .. '}:pending', 'q:{' .. p .. '}:active'
local id = redis.call('HGET', 'q:{' .. p .. '}:ids', path)
local added = 0
if id then
  redis.call('HINCRBY', 'q:{' .. p .. '}:item:' .. id, 'waiters', 1)
  if redis.call('ZSCORE', ak, id) then return {tonumber(id), 0, false} end
  id = tonumber(id)
else
  id = redis.call('INCR', 'q:seq')
  added = 1
  redis.call('HSET', 'q:{' .. p .. '}:ids', path, id)
  redis.call('HSET', 'q:{' .. p .. '}:item:' .. id, 'path', path, 'payload', payload,
             'priority', prio, 'waiters', 1)
  redis.call('ZADD', pk, -prio * 1e13 + id, id)
end
if redis.call('ZCARD', ak) + redis.call('ZCARD', pk) - 1 < conc then
  redis.call('ZREM', pk, id)
  redis.call('ZADD', ak, now, id)
  return {id, added, redis.call('HGET', 'q:{' .. p .. '}:item:' .. id, 'payload')}
end
return {id, added, false}
""",
    "claim": _NOW + r"""
local p, conc = ARGV[1], tonumber(ARGV[2])
local pk, ak = 'q:{' .. p .. '}:pending', 'q:{' .. p .. '}:active'
local slots = conc - redis.call('ZCARD', ak)
if slots <= 0 then return {} end
local popped = redis.call('ZPOPMIN', pk, slots)
local out = {}
for i = 1, #popped, 2 do
  local id = popped[i]
  redis.call('ZADD', ak, now, id)
  local h = redis.call('HMGET', 'q:{' .. p .. '}:item:' .. id, 'path', 'payload')
  out[#out + 1] = tonumber(id)
  out[#out + 1] = h[1]
  out[#out + 1] = h[2]
end
return out
""",
    "merge_extra": r"""
local ik = 'q:{' .. ARGV[1] .. '}:item:' .. ARGV[2]
if redis.call('EXISTS', ik) == 0 then return 0 end
local cur = redis.call('HGET', ik, 'extra')
local extra = cur and cjson.decode(cur) or {}
for k, v in pairs(cjson.decode(ARGV[3])) do extra[k] = v end
redis.call('HSET', ik, 'extra', cjson.encode(extra))
return 1
""",
    "ack": r"""
local p, id, result = ARGV[1], ARGV[2], ARGV[3]
local ik = 'q:{' .. p .. '}:item:' .. id
local h = redis.call('HMGET', ik, 'path', 'waiters')
if not h[1] then return 0 end
redis.call('DEL', ik)
redis.call('HDEL', 'q:{' .. p .. '}:ids', h[1])
redis.call('ZREM', 'q:{' .. p .. '}:active', id)
redis.call('ZREM', 'q:{' .. p .. '}:pending', id)
redis.call('SET', 'r:' .. h[1], result, 'EX', 60)
local wk = 'w:' .. id
for _ = 1, tonumber(h[2]) do redis.call('RPUSH', wk, result) end
redis.call('EXPIRE', wk, 60)
return 1
""",
}

_SHAS: dict[str, str] = {}


def _client(target: Target) -> aioredis.Redis:
    # A pooled client, not ``single_connection_client``: redis-py 8.1's single-connection
    # mode intermittently raised KeyError(<Connection>) under the reconciler's evalsha
    # (seen once in CI-like runs). Each adapter still uses one connection at a time.
    return aioredis.Redis(
        host=target.host, port=target.port, decode_responses=True, max_connections=4,
    )  # fmt: skip


async def install_scripts(target: Target) -> dict[str, str]:
    r = _client(target)
    try:
        for name, body in SCRIPTS.items():
            _SHAS[name] = await r.script_load(body)
    finally:
        await r.aclose()
    return dict(_SHAS)


def _prefix(path: str) -> str:
    return path.rpartition(":")[0]


class RedisAdapter:
    def __init__(self, r: aioredis.Redis, shas: dict[str, str]) -> None:
        self.r = r
        self.sha = shas
        self.rt: Counter[str] = Counter()

    @classmethod
    async def open(cls, target: Target) -> RedisAdapter:
        r = _client(target)
        shas = {name: await r.script_load(body) for name, body in SCRIPTS.items()}
        return cls(r, shas)

    async def lookup(self, path: str) -> str | None:
        self.rt["lookup"] += 1
        value: str | None = await self.r.get(f"r:{path}")
        return value

    async def add(self, path: str, priority: int, payload: str) -> tuple[int, bool]:
        self.rt["add"] += 1
        out = await self.r.evalsha(self.sha["add"], 0, _prefix(path), path, priority, payload)
        return int(out[0]), bool(out[1])

    async def add_and_claim(
        self, path: str, priority: int, payload: str, concurrency: int
    ) -> tuple[int, bool, Claim | None]:
        self.rt["add_and_claim"] += 1
        out = await self.r.evalsha(
            self.sha["add_and_claim"], 0, _prefix(path), path, priority, payload, concurrency
        )
        qid = int(out[0])
        payload_out = out[2] if len(out) > 2 else None
        claim = Claim(qid, path, payload_out, 0) if payload_out else None
        return qid, bool(out[1]), claim

    async def reconcile(self, prefix: str, concurrency: int) -> list[Claim]:
        self.rt["claim"] += 1
        out = await self.r.evalsha(self.sha["claim"], 0, prefix, concurrency)
        return [Claim(int(out[i]), out[i + 1], out[i + 2]) for i in range(0, len(out), 3)]

    async def merge_extra(self, claim: Claim, extra_json: str) -> None:
        self.rt["merge_extra"] += 1
        await self.r.evalsha(
            self.sha["merge_extra"], 0, _prefix(claim.path), claim.qid, extra_json
        )

    async def heartbeat(self, claim: Claim) -> None:
        self.rt["heartbeat"] += 1
        key = f"q:{{{_prefix(claim.path)}}}:active"
        await self.r.zadd(key, {str(claim.qid): int(time.time() * 1000)}, xx=True)

    async def ack(self, claim: Claim, result: str) -> bool:
        self.rt["ack"] += 1
        out = await self.r.evalsha(self.sha["ack"], 0, _prefix(claim.path), claim.qid, result)
        return bool(out)

    async def wait(self, qid: int, path: str, timeout_ms: int) -> str | None:
        self.rt["wait"] += 1
        out = await self.r.blpop([f"w:{qid}"], timeout=timeout_ms / 1000)
        return None if out is None else out[1]

    async def close(self) -> None:
        await self.r.aclose()
