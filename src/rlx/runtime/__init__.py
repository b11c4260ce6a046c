"""Executors: the reference interpreter (and, with the LIR, the arena executor)."""
