"""The lake: the table registry, object storage, Delta tables without a JVM (delta-rs), data files
binlake writes itself, leases and commit locks. Every stage writes its tables through here.

The map of stages: docs/architecture.md.
"""
