"""Plain SQL on the PostgreSQL wire: session statements and system tables (sqlglot)."""
