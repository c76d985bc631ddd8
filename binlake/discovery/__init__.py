"""Discovery: which archived binlogs of a source are closed and ready, by following the ROTATE chain.

The map of stages: docs/architecture.md.
"""
