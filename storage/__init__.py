"""The in-memory, single-writer queue and cache store (pure, synchronous, clock injected)."""
