# Spark 4.2.0 standalone master/worker built from the same pyspark wheel as the driver side, so
# Spark, Scala and Python (3.11) versions match exactly between driver and executors.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless procps tini \
 && rm -rf /var/lib/apt/lists/*

COPY requirements.lock /tmp/requirements.lock
RUN pip install --no-cache-dir -c /tmp/requirements.lock pyspark delta-spark boto3 zstandard pyarrow pandas \
 && ln -s "$(python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')" /opt/spark

ENV SPARK_HOME=/opt/spark \
    PYSPARK_PYTHON=python3 \
    PYTHONPATH=/opt/binlake
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.master.Master"]
