"""The archiver: a replica that streams a live server's binlogs into the archive, and its guards.

The map of stages: docs/architecture.md.
"""
