"""Test and demo tooling: table digests, service launchers (Airflow, a Spark standalone cluster)."""
