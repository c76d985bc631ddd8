"""Adapters that run other binlog decoders over the same files (benchmarks, interop tests)."""
