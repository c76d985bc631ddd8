"""binlake's command lines, on top of every layer (they may use Spark, Airflow and the test tooling).

``app`` is the ``binlake`` console script (typer); ``sql`` the SQL prompt and one-shot queries;
``archive`` the archiver's command line and service entry (``python -m binlake_cli.archive``), kept
free of the console script's imports so the archiver's small image can run it.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The ``binlake`` console script (imports typer and the app only when run)."""
    from binlake_cli.app import main as app_main

    return app_main(argv)
