"""The store's schema migrations: versioned SQL files ``NNNN_name.sql`` (package data)."""
