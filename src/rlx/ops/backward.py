"""Op family: backward (being written)."""
