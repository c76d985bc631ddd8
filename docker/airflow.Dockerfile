# Airflow 3.3.2 (Python 3.11) + a JRE + binlake's Python deps, pinned by requirements.lock.
# The jars, config, DAGs and code are mounted by docker-compose.yml, not baked in.
FROM apache/airflow:3.3.2-python3.11

USER root
# spark-submit (client mode) and in-process Spark need a JVM; default-jre-headless is 17 or 21.
RUN apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
USER airflow

COPY requirements.lock /tmp/requirements.lock
# The lock is used as constraints: Airflow itself stays the image's, everything else is pinned.
RUN grep -vE '^(apache-airflow|apache-airflow-core|apache-airflow-task-sdk)==' /tmp/requirements.lock > /tmp/constraints.txt \
 && pip install --no-cache-dir -c /tmp/constraints.txt \
      pyspark delta-spark apache-airflow-providers-apache-spark apache-airflow-providers-amazon \
      boto3 zstandard pyarrow pandas
