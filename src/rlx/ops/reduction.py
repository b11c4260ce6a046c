"""Op family: reduction (being written)."""
