"""A package shaped like ``model/`` for testing discovery."""
