"""Op family: attention (being written)."""
