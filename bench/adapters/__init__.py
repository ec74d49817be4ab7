"""One adapter per system; each speaks the QueryQueue cycle its own way.

``connect(system, target)`` returns a connected ``Adapter``; ``setup(system, target)``
prepares the server side once (PostgreSQL's schema and functions, Redis' Lua scripts).
"""

from __future__ import annotations

from bench.adapters.base import Adapter, Claim, Target

__all__ = ["SYSTEMS", "Adapter", "Claim", "Target", "connect", "setup"]

SYSTEMS = ("cubequeue", "postgres", "redis")


async def connect(target: Target) -> Adapter:
    if target.system == "cubequeue":
        from bench.adapters.cubequeue import CubequeueAdapter

        return await CubequeueAdapter.open(target)
    if target.system == "postgres":
        from bench.adapters.postgres import PostgresAdapter

        return await PostgresAdapter.open(target)
    if target.system == "redis":
        from bench.adapters.redis_queue import RedisAdapter

        return await RedisAdapter.open(target)
    raise ValueError(f"unknown system {target.system!r}")


async def setup(target: Target) -> None:
    if target.system == "postgres":
        from bench.adapters.postgres import install_schema

        await install_schema(target)
    elif target.system == "redis":
        from bench.adapters.redis_queue import install_scripts

        await install_scripts(target)
