"""cubequeue benchmarks against PostgreSQL 15 and Redis 7; run ``python -m bench.run``."""
