"""The PostgreSQL v3 wire protocol: a sans-I/O codec, the session state machine and its asyncio shell."""
