"""The executor environment check and code shipping, on the shared local SparkSession."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from service.runtime.spark_code import ExecutorEnvironmentError, check_executors, ship_code

pytestmark = [pytest.mark.spark]


def test_executors_report_the_drivers_python_and_where_sluice_comes_from(spark: Any) -> None:
    reports = check_executors(spark, timeout=120, partitions=2)
    assert {r.python for r in reports} == {tuple(sys.version_info[:2])}
    assert all(r.sluice_from.endswith("pipeline_stages/__init__.py") for r in reports)


def test_a_python_mismatch_fails_with_what_to_fix(spark: Any) -> None:
    here = "{}.{}".format(*sys.version_info[:2])
    with pytest.raises(ExecutorEnvironmentError) as raised:
        check_executors(spark, timeout=120, driver_python=(2, 7), partitions=1)
    message = str(raised.value)
    assert message.startswith(f"executors run Python {here} but the Sluice service")
    assert "runs Python 2.7" in message and "PYSPARK_PYTHON" in message


def test_a_shipped_zip_is_importable_in_python_workers(spark: Any, tmp_path: Path) -> None:
    # A package only the zip has: the workers can import it only through addPyFile.
    package = tmp_path / "src" / "sluice_ship_probe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("ANSWER = 42\n")
    sys.path.insert(0, str(tmp_path / "src"))
    try:
        archive = ship_code(spark, tmp_path / "cache", packages=["sluice_ship_probe"])
    finally:
        sys.path.remove(str(tmp_path / "src"))
        sys.modules.pop("sluice_ship_probe", None)
    assert not any(archive.name in entry for entry in sys.path)  # not on the driver's path

    def probe(_: Any) -> Any:
        import sluice_ship_probe

        yield sluice_ship_probe.ANSWER, sluice_ship_probe.__file__

    found = spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()
    assert found[0][0] == 42 and archive.name in found[0][1]
