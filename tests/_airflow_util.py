"""Reading what a DAG run left in Airflow's metadata DB (the tests' dag.test() runs)."""

from __future__ import annotations


def asset_events(dag_id: str, run_id: str, task_id: str) -> list[tuple[int, str, str | None, tuple[str, ...]]]:
    """(map index, asset URI, the asset's ``extra["table"]``, alias names) of each asset event a
    task emitted in a run, sorted."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        events = session.query(AssetEvent).filter(AssetEvent.source_dag_id == dag_id,
                                                   AssetEvent.source_run_id == run_id,
                                                   AssetEvent.source_task_id == task_id).all()
        return sorted((e.source_map_index, e.asset.uri, e.asset.extra.get("table"),
                       tuple(sorted(a.name for a in e.source_aliases))) for e in events)
