"""Op family: conv (being written)."""
