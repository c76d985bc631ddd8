"""A source table at any moment of its archive (``binlake asof``) and the SQL that undoes a range of
its changes (``binlake flashback``): moment resolution, the replay to a moment, undo SQL text and the
refusals (GAP, DDL, a moment outside the archive). Pure plus delta-rs reads: no JVM (docs/history.md).
"""
