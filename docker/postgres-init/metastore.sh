#!/bin/bash
# The catalog's metastore database in the Airflow Postgres (docs/sql.md, "The catalog"): its own
# role and database, created on the data volume's first start only (the image runs
# /docker-entrypoint-initdb.d once). Skipped unless BINLAKE_METASTORE_PASSWORD is set; on an existing
# volume create them by hand with the same two statements (psql -U airflow).
set -euo pipefail
if [ -z "${BINLAKE_METASTORE_PASSWORD:-}" ]; then
  echo "metastore: BINLAKE_METASTORE_PASSWORD not set, no metastore database created"
  exit 0
fi
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v password="$BINLAKE_METASTORE_PASSWORD" <<'SQL'
CREATE ROLE metastore LOGIN PASSWORD :'password';
CREATE DATABASE metastore OWNER metastore;
SQL
