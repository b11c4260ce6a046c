"""Op family: fused (being written)."""
