"""Executable models of logproof's state machines, checked with Z3 (bounded and by induction)."""
