# `binlake archive` as a long-running service (docker-compose.yml, service `archiver`): Python 3.11
# and only the archiver's dependencies, pinned by requirements.lock (no JVM, no Airflow, no Spark).
# The code and config are mounted by docker-compose.yml, not baked in.
FROM python:3.11-slim

COPY requirements.lock /tmp/requirements.lock
RUN pip install --no-cache-dir -c /tmp/requirements.lock PyMySQL pydantic tenacity boto3 zstandard \
 && useradd --uid 50000 --gid 0 --no-create-home binlake
USER 50000:0
WORKDIR /opt/binlake
