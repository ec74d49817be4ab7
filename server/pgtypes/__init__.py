"""PostgreSQL's types as both wires and plain SQL see them: the OIDs (:mod:`.oids`) and one
dumper or loader per (type, format) pair (:mod:`.adapters`).

This package sits below :mod:`cubequeue.server.sql` and :mod:`cubequeue.server.pgwire`,
which both import it; it imports neither (``[tool.importlinter]`` in pyproject.toml).
"""
