"""``binlake sql`` without Spark: the statement guard, the delta-rs + DuckDB path and result printing.

The map of stages: docs/architecture.md.
"""
