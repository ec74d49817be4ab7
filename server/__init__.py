"""cubequeue's transports and sessions: the PostgreSQL wire, Cube Store's WebSocket, HTTP."""

__version__ = "0.1.0"
