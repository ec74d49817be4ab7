"""Cube Store's human-readable sizes: humansize DECIMAL (storage/sizes.py, ``docs/dialect.md`` §4.1, §5.1)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cubequeue.storage.sizes import format_size


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1, "1 B"),
        (999, "999 B"),
        (1000, "1 kB"),
        (1001, "1.00 kB"),  # a fractional part keeps two places, even when they round to 0
        (1500, "1.50 kB"),
        (1125, "1.12 kB"),  # exact tie: half-to-even, as Rust's {:.2}
        (1135, "1.14 kB"),  # 1.135 is stored slightly above the tie
        (999_999, "1000.00 kB"),  # below 1000 kB before rounding, so it stays in kB
        (1_000_000, "1 MB"),
        (1_048_576, "1.05 MB"),  # 1 MiB, Cube's example
        (2_097_152, "2.10 MB"),  # 2 MiB, Cube's example
        (66_060_288, "66.06 MB"),  # the default cache entry limit
        (4_294_967_296, "4.29 GB"),
        (10**12, "1 TB"),
        (2**64 - 1, "18.45 EB"),
    ],
)
def test_format_size_matches_humansize_decimal(size, text):
    assert format_size(size) == text


@settings(deadline=None, max_examples=300)
@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_format_size_shape(size):
    number, unit = format_size(size).split(" ")
    assert unit in ("B", "kB", "MB", "GB", "TB", "PB", "EB")
    assert "." not in number or len(number.split(".")[1]) == 2
    if unit == "B":
        assert number == str(size)
