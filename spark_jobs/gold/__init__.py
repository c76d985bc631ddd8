"""Gold, the Spark side: typed current-state tables per source table, incremental MERGE, unions, status.

A run (``job.run_gold``) goes: ``schema_history`` -> ``status`` (read) + ``inputs`` -> ``replay`` /
``incremental`` -> ``unions`` -> ``status`` (write); ``tables`` and ``results`` are shared by all.
The pure rules are in ``binlake.gold``; the map of stages: docs/architecture.md.
"""
