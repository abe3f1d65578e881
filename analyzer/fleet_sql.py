"""The fleet dataset for distributed SQL engines: DDL and the straggler query (docs/scale.md).

``python -m analyzer.fleet_sql ENGINE DATASET [--location URI]`` prints, for ``spark``
(Spark SQL 3.2+) or ``trino`` (Hive connector), the statements that expose every table
of a fleet dataset under its own name, followed by the straggler query of
`analyzer.fleet_detect` in that engine's spelling. ``duckdb`` prints the views
`analyzer.query.attach_fleet_views` creates. ``--location`` replaces the dataset path in
the statements (e.g. ``s3://bucket/job-42/fleet.dataset`` after copying it there).

Type mapping (Trino needs declared columns; Spark infers them): Parquet string →
``varchar``, int64 → ``bigint``, int32 → ``integer``, double → ``double``, float →
``real``, bool → ``boolean``, timestamps → ``timestamp(6)`` (values are UTC; the Hive
connector has no zoned timestamp). The partition column ``host`` is ``varchar``, last.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analyzer.fleet_dataset import PART_FILE
from analyzer.fleet_detect import windows_sql
from analyzer.query import SAFE_NAME

ENGINES = ("spark", "trino", "duckdb")
_TRINO_TYPES = {
    "string": "varchar", "large_string": "varchar", "int64": "bigint", "int32": "integer",
    "int16": "smallint", "int8": "tinyint", "double": "double", "float": "real", "bool": "boolean",
    "date32[day]": "date", "null": "varchar",
}  # fmt: skip


def tables(dataset: Path) -> dict[str, Path]:
    """Table name -> one of its Parquet files (the schema is the same in every partition)."""
    out = {}
    for folder in sorted(p for p in dataset.iterdir() if p.is_dir() and SAFE_NAME.match(p.name)):
        part = next(iter(sorted(folder.glob(f"host=*/{PART_FILE}"))), None)
        if part is not None:
            out[folder.name] = part
    return out


def trino_type(arrow_type: object) -> str:
    text = str(arrow_type)
    if text.startswith("timestamp"):
        return "timestamp(6)"
    if text.startswith("decimal"):
        return text.replace("decimal128", "decimal")
    return _TRINO_TYPES.get(text, "varchar")


def ddl(dataset: Path, engine: str, location: str | None = None) -> str:
    """Statements exposing every table of ``dataset`` in ``engine`` (see module docstring)."""
    import pyarrow.parquet as pq

    base = (location or str(dataset.resolve())).rstrip("/")
    lines = []
    if engine == "trino":
        lines.append("CREATE SCHEMA IF NOT EXISTS hive.hindsight;")
    for name, part in tables(dataset).items():
        path = f"{base}/{name}"
        if engine == "spark":
            lines.append(
                f"CREATE OR REPLACE TEMPORARY VIEW {name} USING parquet "
                f"OPTIONS (path '{path}', mergeSchema 'true');"
            )
        elif engine == "duckdb":
            lines.append(
                f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/host=*/*.parquet', "
                "hive_partitioning = true, hive_types = {'host': VARCHAR}, union_by_name = true);"
            )
        else:
            schema = pq.read_schema(part)
            cols = [f"  {f.name} {trino_type(f.type)}" for f in schema if f.name != "host"]
            cols.append("  host varchar")
            uri = path if "://" in path else "file://" + path
            lines.append(
                f"CREATE TABLE IF NOT EXISTS hive.hindsight.{name} (\n" + ",\n".join(cols) + "\n)"
                f" WITH (external_location = '{uri}', format = 'PARQUET', partitioned_by = ARRAY['host']);"
            )
            lines.append(
                f"CALL hive.system.sync_partition_metadata('hindsight', '{name}', 'FULL');"
            )
    return "\n".join(lines) + "\n"


def straggler_sql(engine: str) -> str:
    """The divergence-window query of `analyzer.fleet_detect` in ``engine``'s spelling."""
    sql = windows_sql()
    if engine == "trino":
        sql = sql.replace(
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY v)", "approx_percentile(v, 0.5)"
        ).replace(
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY abs(m.v - peer.med))",
            "approx_percentile(abs(m.v - peer.med), 0.5)",
        )
        sql = sql.replace("FROM signals", "FROM hive.hindsight.signals")
    return sql.strip() + "\nORDER BY divergent_s DESC;\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analyzer.fleet_sql", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("engine", choices=ENGINES)
    parser.add_argument("dataset", type=Path)
    parser.add_argument(
        "--location", help="dataset URI as the engine sees it (default: the local path)"
    )
    args = parser.parse_args(argv)
    if not args.dataset.is_dir():
        parser.error(f"{args.dataset}: not a directory")
    sys.stdout.write("-- tables\n" + ddl(args.dataset, args.engine, args.location))
    sys.stdout.write("-- hosts diverging from their peers (windows of divergent seconds)\n")
    sys.stdout.write(straggler_sql(args.engine))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
