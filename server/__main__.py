"""``python -m cubequeue.server``: the same entry point as the ``cubequeue`` script."""

from __future__ import annotations

from cubequeue.server.cli import main

raise SystemExit(main())
