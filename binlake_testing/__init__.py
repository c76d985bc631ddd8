"""Test, demo and generator tooling (as delta-spark ships ``delta.testing``): not the runtime.

* :mod:`binlake_testing.synthetic` - archives of generated binlogs with ground truth and faults;
* :mod:`binlake_testing.s3server` - a real S3 API (moto server mode) on loopback;
* :mod:`binlake_testing.demo` - the end-to-end demo (``make demo`` / ``binlake demo``), whose sample
  binlogs ship in ``binlake_testing/samples/`` as package data;
* :mod:`binlake_testing.airflow_services`, :mod:`binlake_testing.spark_cluster` - Airflow's scheduler,
  dag-processor and api-server, and a Spark standalone cluster, started on loopback for tests;
* :mod:`binlake_testing.table_digest` - row counts and order-independent checksums of Delta tables.

Install with the ``testing`` extra (``pip install binlake[testing]``): the S3 server needs moto.
Nothing in ``binlake``'s runtime modules imports this package.
"""
