"""Gold, the pure part: schema history from DDL, type mapping, replay into current state, seeding, plan.

The map of stages: docs/architecture.md.
"""
