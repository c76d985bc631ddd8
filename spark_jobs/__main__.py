"""The one command line of the Spark steps: ``python -m spark_jobs STEP --source NAME[,NAME...] --run-id RUN``.

It is also the application that ``spark-submit`` runs in ``submit`` mode (Airflow's
SparkSubmitOperator passes this file's path): ``spark-submit [conf] spark_jobs/__main__.py decode
--source orders --run-id scheduled__2026-01-01T02:00:00+00:00``; several sources (a batch of
``[pipeline] sources_per_task``) run one after another in one application. The steps are those of
:mod:`spark_jobs.steps`; the run's plan must exist (the run's ``discover`` wrote it). ``reconcile``
runs here too, without starting Spark (delta-rs; the DAGs run it in the task process in every mode).

Exit status: 0 done (each source's step document is printed as one line of JSON), 3 a binlake error
the operator must read (a GAP, a failed file, a failed data check: the message is on stderr; the
batch's other sources ran and printed theirs), anything else a bug.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repo's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from binlake.config import load_config
from binlake.errors import BinlakeError
from binlake.runs import run_for_sources
from binlake.step_results import to_doc
from spark_jobs.steps import STEPS, WITHOUT_JVM, run_spark_step


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run the step, print its document."""
    parser = argparse.ArgumentParser(prog="python -m spark_jobs", description="Run one Spark step of a binlake run.")
    parser.add_argument("step", choices=[*STEPS, *WITHOUT_JVM])
    parser.add_argument("--source", required=True, help="the configured source name (several: comma-separated)")
    parser.add_argument("--run-id", required=True, help="the run (the Airflow run id) whose plan to follow")
    parser.add_argument("--config", default=None, help="config file (default: $BINLAKE_CONFIG, conf/binlake.toml)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = load_config(args.config)
    outcome = run_for_sources(args.step, args.source.split(","), args.run_id, cfg,
                              lambda source: run_spark_step(args.step, source, args.run_id, cfg))
    for result in outcome.results.values():
        print(json.dumps(to_doc(result), sort_keys=True))
    try:
        outcome.raise_failures()
    except BinlakeError as exc:
        print(str(exc), file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
