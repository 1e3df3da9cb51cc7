"""PySpark campaigns that run the conformance simulator over many seeds."""
