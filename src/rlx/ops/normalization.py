"""Op family: normalization (being written)."""
