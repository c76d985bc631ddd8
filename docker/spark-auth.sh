#!/bin/sh
# Entry wrapper of every container that runs a Spark JVM (master, worker, the Airflow containers
# whose tasks spark-submit): turns on Spark's shared-secret authentication, then runs the command.
#
# Why a file: a standalone driver must find `spark.authenticate.secret` in its Spark conf (Spark
# refuses the env variable there), and a `--conf` on the command line would show in `ps` and in
# task logs. So the secret goes from the environment (BINLAKE_SPARK_AUTH_SECRET) into
# $SPARK_CONF_DIR/spark-defaults.conf, readable by this container's user only; Master, Worker and
# spark-submit all read that file. Executors get the secret from their worker (Spark passes it in
# their environment). Without the secret, anyone reaching the master could run code on the workers.
set -eu
: "${BINLAKE_SPARK_AUTH_SECRET:?set BINLAKE_SPARK_AUTH_SECRET (shared by master, workers and submitters)}"
: "${SPARK_CONF_DIR:?set SPARK_CONF_DIR}"
umask 077
mkdir -p "$SPARK_CONF_DIR"
printf 'spark.authenticate true\nspark.authenticate.secret %s\n' "$BINLAKE_SPARK_AUTH_SECRET" \
  > "$SPARK_CONF_DIR/spark-defaults.conf"
exec "$@"
