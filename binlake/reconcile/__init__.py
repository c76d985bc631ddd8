"""Reconcile: GTID coverage per file, reconciled against each file's PREVIOUS_GTIDS / GTID_LIST,
the job that writes it without a JVM, and the coverage report.

The map of stages: docs/architecture.md.
"""
