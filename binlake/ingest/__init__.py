"""Ingest, the Spark-free part: what was ingested (``meta.ingested_files``) and the staging area.

The map of stages: docs/architecture.md.
"""
