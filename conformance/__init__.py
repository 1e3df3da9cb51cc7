"""Conformance: simulated ports, the deterministic cluster simulator, trace checking."""
