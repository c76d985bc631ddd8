"""binlake on Airflow: the tasks, operators, Assets, credentials and alerts of the DAGs in ``dags/``.

The only layer that imports Airflow (``binlog_parser <- binlake <- spark_jobs <- orchestration <-
dags``, see docs/architecture.md). Importing it has no side effects.
"""
