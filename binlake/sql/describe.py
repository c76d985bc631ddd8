"""``DESCRIBE db.table`` on the JVM-free path: the Delta table's own schema, as Spark shows it.

Why: DuckDB describes the Arrow dataset delta-rs hands it (``VARCHAR``, ``BLOB``, ``TIMESTAMP WITH
TIME ZONE``, no comments), which is not what the table holds nor what Spark, a notebook or a BI tool
over ``binlake serve`` shows for the same name. The Delta log's schema is the truth: its type names
(``string``, ``decimal(12,2)``, ``timestamp_ntz``, ``binary``, ``array<string>``) are Spark's, up to
the integer names Spark prints differently, and a column's comment is its ``comment`` metadata.
Rows and columns follow Spark's ``DESCRIBE TABLE`` (``col_name``, ``data_type``, ``comment``; the
partition columns again under ``# Partition Information``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

_DESCRIBE = re.compile(r"^\s*(?:describe|desc)\s+(?:table\s+)?`?(\w+)`?\s*\.\s*`?(\w+)`?\s*;?\s*$", re.IGNORECASE)
#: Delta's primitive type names Spark prints under another name (catalogString)
_SPARK_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}
COLUMNS = ["col_name", "data_type", "comment"]


def describe_target(statement: str) -> str | None:
    """``DESCRIBE [TABLE] db.table`` -> ``db.table`` (lower case); None for any other statement
    (``DESCRIBE EXTENDED``, a column, ``DESCRIBE DETAIL`` ... go to Spark)."""
    match = _DESCRIBE.match(statement)
    if match is None or match.group(1).lower() in ("extended", "formatted", "detail", "history", "query"):
        return None
    return f"{match.group(1)}.{match.group(2)}".lower()


def spark_type_name(delta_type: Any) -> str:
    """A Delta schema type (its JSON form: a name, or an array/map/struct object) as Spark prints it."""
    if isinstance(delta_type, str):
        return _SPARK_NAMES.get(delta_type, delta_type)
    kind = delta_type["type"]
    if kind == "array":
        return f"array<{spark_type_name(delta_type['elementType'])}>"
    if kind == "map":
        return f"map<{spark_type_name(delta_type['keyType'])},{spark_type_name(delta_type['valueType'])}>"
    fields = ",".join(f"{f['name']}:{spark_type_name(f['type'])}" for f in delta_type["fields"])
    return f"struct<{fields}>"


def describe_rows(schema_json: str, partition_columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """Spark's ``DESCRIBE TABLE`` rows for a Delta schema (``DeltaTable.schema().to_json()``)."""
    fields = json.loads(schema_json)["fields"]
    types = {f["name"]: spark_type_name(f["type"]) for f in fields}
    comments = {f["name"]: (f.get("metadata") or {}).get("comment") for f in fields}
    rows: list[tuple[Any, ...]] = [(f["name"], types[f["name"]], comments[f["name"]]) for f in fields]
    if partition_columns:
        rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
        rows += [(name, types[name], comments[name]) for name in partition_columns]
    return rows
