"""Gold, the pure part: schema history from DDL, type mapping, replay into current state, seeding, plan.

In the order a run uses them: ``schema_history`` (DDL -> schema versions), ``seed`` (a dump's schema
and rows), ``plan`` (input fingerprints, full or incremental), ``state`` (the ordered replay, lineage
across renames), ``types`` (MySQL types and values -> Spark's); ``errors`` holds their errors. The
Spark side is ``spark_jobs.gold``; the map of stages: docs/architecture.md.
"""
