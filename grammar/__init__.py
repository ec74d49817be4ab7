"""The QUEUE / CACHE / SYS dialect: statement text → typed, immutable commands."""
