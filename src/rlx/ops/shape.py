"""Op family: shape (being written)."""
