"""Op family: linalg (being written)."""
