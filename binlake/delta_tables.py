"""Opening binlake's Delta tables without a JVM (delta-rs), local or on any S3-compatible store.

Why one module: the SQL fast path, the coverage page, the data checks, the ingest state reads and
the test digests all read Delta tables with delta-rs; they must agree on how an ``s3a://`` location
is spelled for delta-rs and which endpoint and credentials it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from binlake.config import S3Settings, is_s3_uri

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable


def delta_uri(location: str) -> str:
    """delta-rs spells every S3 flavour (``s3a://``, ``s3n://``) ``s3://``."""
    if is_s3_uri(location):
        return "s3://" + location.split("://", 1)[1]
    return location


def storage_options(s3: S3Settings, location: str | None = None) -> dict[str, str]:
    """delta-rs (object_store) options for the configured S3 endpoint; credentials from the AWS chain.

    Empty for a local ``location``. boto3 resolves the credentials (env vars, profiles, roles: the
    same chain as discovery and ingestion) and hands them over explicitly, since object_store alone
    reads env vars only.
    """
    if location is not None and not is_s3_uri(location):
        return {}
    options: dict[str, str] = {"AWS_REGION": s3.region}
    if s3.endpoint_url:
        options["AWS_ENDPOINT_URL"] = s3.endpoint_url
        if s3.endpoint_url.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if s3.path_style_access:
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    import boto3

    credentials = boto3.Session(region_name=s3.region).get_credentials()
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        options["AWS_ACCESS_KEY_ID"] = frozen.access_key
        options["AWS_SECRET_ACCESS_KEY"] = frozen.secret_key
        if frozen.token:
            options["AWS_SESSION_TOKEN"] = frozen.token
    return options


def open_delta_table(location: str, s3: S3Settings | None = None) -> DeltaTable | None:
    """The Delta table at ``location`` (a path, ``s3://`` / ``s3a://``), or None when there is none yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    uri = delta_uri(location)
    options = storage_options(s3 or S3Settings(), location) or None
    # Not DeltaTable.is_deltatable: it holds the GIL while it waits on S3 (deltalake 1.x), so an
    # S3 API served by a thread of this process (the tests' moto server) never answers it.
    try:
        return DeltaTable(uri, storage_options=options)
    except TableNotFoundError:
        return None


def add_actions(table: DeltaTable) -> dict[str, list[Any]]:
    """The table's live data files, one list per column: ``path``, ``partition.<col>``,
    ``min.<col>`` / ``max.<col>`` statistics ... (delta-rs's flattened add actions). Read through
    pyarrow because delta-rs returns an arro3 table, which has no ``to_pydict``."""
    import pyarrow as pa

    return dict(pa.table(table.get_add_actions(flatten=True)).to_pydict())
