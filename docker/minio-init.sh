#!/bin/sh
# MinIO's one-shot init (docker-compose.yml, service minio-init): the only place the root
# credentials are used. Creates the buckets, one policy and one user per kind of client, and
# attaches them; re-running it is harmless (a re-attached policy is not an error).
#
#   archiver  (BINLAKE_ARCHIVER_ACCESS_KEY): read/write binlake-archive, nothing else
#   pipeline  (BINLAKE_PIPELINE_ACCESS_KEY): Airflow's task processes (the Spark drivers) and the
#             Spark workers (executors): read binlake-archive, read/write binlake-lake
set -eu
: "${MINIO_ROOT_USER:?}" "${MINIO_ROOT_PASSWORD:?}"
: "${BINLAKE_ARCHIVER_ACCESS_KEY:?}" "${BINLAKE_ARCHIVER_SECRET_KEY:?}"
: "${BINLAKE_PIPELINE_ACCESS_KEY:?}" "${BINLAKE_PIPELINE_SECRET_KEY:?}"
policies=/binlake/minio-policies

mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null
mc mb --ignore-existing local/binlake-archive local/binlake-lake

user() {  # user <name> <access key> <secret key>
  mc admin policy create local "binlake-$1" "$policies/$1.json"
  mc admin user add local "$2" "$3"
  mc admin policy attach local "binlake-$1" --user "$2" 2>/dev/null \
    || mc admin user info local "$2" | grep -q "binlake-$1"
}
user archiver "$BINLAKE_ARCHIVER_ACCESS_KEY" "$BINLAKE_ARCHIVER_SECRET_KEY"
user pipeline "$BINLAKE_PIPELINE_ACCESS_KEY" "$BINLAKE_PIPELINE_SECRET_KEY"
echo "buckets, users and policies ready"
