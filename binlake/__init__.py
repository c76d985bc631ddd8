"""binlake: the domain layer (config, object storage, discovery by ROTATE chain, ingest state,
GTID reconciliation, table registry, delta-rs reads). It imports neither Spark nor Airflow: the
Spark jobs (``spark_jobs``), the Airflow tasks (``orchestration``), the command lines
(``binlake_cli``) and the test tooling (``binlake_testing``) sit on top of it.

Submodules are imported explicitly (``from binlake.config import load_config``); importing the
package itself has no side effects and starts nothing.
"""

__version__ = "0.1.0"
