"""Gold, the Spark side: typed current-state tables per source table, incremental MERGE, inputs.

The map of stages: docs/architecture.md.
"""
