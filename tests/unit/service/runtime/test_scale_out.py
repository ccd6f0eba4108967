"""Scale-out pieces without a JVM: Spark conf from the environment, the shared-storage rule,
the code zip, the executor-check messages, and the cluster CLI's state handling."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from service.config.settings import Settings
from service.config.spark_conf import (
    conf_from_environ,
    env_name_for,
    environment_conf,
    key_for_env,
    merged_conf,
    read_spark_defaults,
)
from service.main import create_app
from service.runtime.cluster import LocalCluster
from service.runtime.engine import Connection
from service.runtime.shared_storage import filesystem_type, storage_problems
from service.runtime.spark_code import (
    ExecutorEnvironmentError,
    build_code_zip,
    content_hash,
    package_files,
    translate_failure,
)
from service.stores import open_stores
from tests.unit.service.fake_engine import FakeEngine

KEY = "unit-test-key-0123456789"
CLUSTER = "spark://10.0.0.1:7077"


@pytest.fixture(autouse=True)
def _no_sluice_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("SLUICE_"):
            monkeypatch.delenv(name)


# --------------------------------------------------------------------------- conf keys


@pytest.mark.parametrize(
    ("key", "variable"),
    [
        ("spark.executor.memory", "SLUICE_SPARK_CONF_spark__executor__memory"),
        (
            "spark.sql.streaming.stateStore.providerClass",
            "SLUICE_SPARK_CONF_spark__sql__streaming__stateStore__providerClass",
        ),
        ("spark.executorEnv.MY_VAR", "SLUICE_SPARK_CONF_spark__executorEnv__MY_VAR"),
        (
            "spark.kubernetes.container.image",
            "SLUICE_SPARK_CONF_spark__kubernetes__container__image",
        ),
        ("spark.jars.packages", "SLUICE_SPARK_CONF_spark__jars__packages"),
    ],
)
def test_conf_keys_round_trip_dots_and_case(key: str, variable: str) -> None:
    assert env_name_for(key) == variable
    assert key_for_env(variable) == key


@pytest.mark.parametrize(
    "variable",
    ["SLUICE_SPARK_CONF_", "SLUICE_SPARK_CONF_spark____x", "SLUICE_SPARK_CONF___spark", "X_y"],
)
def test_malformed_conf_variables_are_refused(variable: str) -> None:
    with pytest.raises(ValueError, match="SLUICE_SPARK_CONF_|not a"):
        key_for_env(variable)


def test_keys_with_double_underscores_cannot_be_variables() -> None:
    with pytest.raises(ValueError, match="cannot be written"):
        env_name_for("spark.executorEnv.A__B")


def test_conf_sources_merge_file_then_json_then_variables(tmp_path: Path) -> None:
    conf_file = tmp_path / "spark-defaults.conf"
    conf_file.write_text(
        "# comment\n\nspark.executor.memory   4g\nspark.executor.cores=2\n"
        "spark.sql.shuffle.partitions 8\nspark.driver.extraJavaOptions -Da=1 -Db=2\n"
    )
    assert read_spark_defaults(conf_file)["spark.driver.extraJavaOptions"] == "-Da=1 -Db=2"
    merged = merged_conf(
        file=conf_file,
        json_conf={"spark.executor.cores": "3", "spark.sql.shuffle.partitions": "6"},
        environ={
            "SLUICE_SPARK_CONF_spark__sql__shuffle__partitions": "4",
            "SLUICE_SPARK_CONF_FILE": str(conf_file),
            "OTHER": "x",
        },
    )
    assert merged == {
        "spark.executor.memory": "4g",
        "spark.executor.cores": "3",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.extraJavaOptions": "-Da=1 -Db=2",
    }
    assert conf_from_environ({"SLUICE_SPARK_CONF": "{}", "SLUICE_SPARK_CONF_FILE": "x"}) == {}


def test_environment_conf_reads_every_source_as_the_service_does(tmp_path: Path) -> None:
    conf_file = tmp_path / "spark-defaults.conf"
    conf_file.write_text("spark.executor.memory 4g\nspark.executor.cores 2\n")
    environ = {
        "SLUICE_SPARK_CONF_FILE": str(conf_file),
        "SLUICE_SPARK_CONF": '{"spark.executor.cores": "3", "spark.sluice.window.engine": "x"}',
        "SLUICE_SPARK_CONF_spark__sluice__window__engine": "batch",
    }
    assert environment_conf(environ) == {
        "spark.executor.memory": "4g",
        "spark.executor.cores": "3",
        "spark.sluice.window.engine": "batch",
    }
    assert environment_conf({}) == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [("{", "not valid JSON"), ("[1]", "JSON object of strings"), ('{"k": 1}', "of strings")],
)
def test_environment_conf_names_a_malformed_json_variable(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"SLUICE_SPARK_CONF: .*{message}"):
        environment_conf({"SLUICE_SPARK_CONF": raw})


def test_settings_merge_every_spark_conf_source(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conf_file = tmp_path / "spark.conf"
    conf_file.write_text("spark.executor.memory 4g\nspark.ui.enabled true\n")
    monkeypatch.setenv("SLUICE_SPARK_CONF_FILE", str(conf_file))
    monkeypatch.setenv("SLUICE_SPARK_CONF", '{"spark.ui.enabled": "false"}')
    monkeypatch.setenv("SLUICE_SPARK_CONF_spark__sql__shuffle__partitions", "3")
    monkeypatch.setenv("SLUICE_SPARK_EXECUTOR_CORES", "2")
    monkeypatch.setenv("SLUICE_SPARK_MASTER", "k8s://https://kubernetes.default.svc:443")
    settings = Settings(data_dir=tmp_path)
    assert settings.effective_spark_conf == {
        "spark.executor.cores": "2",
        "spark.executor.memory": "4g",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "3",
    }
    assert not settings.is_local_master


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("SLUICE_SPARK_CONF_FILE", "/nonexistent/spark.conf", "SLUICE_SPARK_CONF_FILE"),
        ("SLUICE_SPARK_CONF_spark____x", "1", "SLUICE_SPARK_CONF_spark____x"),
        ("SLUICE_SPARK_MASTER", "sc://connect:15002", "SLUICE_SPARK_MASTER"),
        ("SLUICE_SPARK_EXECUTOR_MEMORY", "lots", "spark_executor_memory"),
        ("SLUICE_CHECKPOINT_ROOT", "hdfs://", "SLUICE_CHECKPOINT_ROOT"),
    ],
)
def test_bad_scale_out_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, named: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError, match=named):
        Settings()


def test_checkpoint_root_takes_paths_file_uris_and_hadoop_uris(tmp_path: Path) -> None:
    local = Settings(data_dir=tmp_path, checkpoint_root_uri=f"file://{tmp_path}/cp")
    assert local.checkpoint_root == tmp_path / "cp" and local.spark_checkpoint_uri is None
    remote = Settings(data_dir=tmp_path, checkpoint_root_uri="s3a://bucket/sluice/")
    assert remote.spark_checkpoint_uri == "s3a://bucket/sluice"
    assert remote.checkpoint_root == tmp_path / "checkpoints"  # lock files stay local


# --------------------------------------------------------------------------- shared storage

HTTP_PIPELINE = [{"$source": {"connectionName": "orders"}}, {"$match": {"a": 1}}]
FILE_PIPELINE = [{"$source": {"connectionName": "files"}}]
CONNECTIONS = {
    "orders": Connection("orders", "HttpIngest"),
    "files": Connection("files", "File", {"directory": "/srv/nfs/in"}),
}


def mountinfo(tmp_path: Path) -> Path:
    path = tmp_path / "mountinfo"
    path.write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "40 22 0:50 / /srv/nfs rw,relatime shared:20 - nfs4 fs:/export rw,vers=4.2\n"
    )
    return path


def test_filesystem_type_uses_the_longest_mount_point(tmp_path: Path) -> None:
    info = mountinfo(tmp_path)
    assert filesystem_type(Path("/srv/nfs/in/x"), mountinfo=info) == "nfs4"
    assert filesystem_type(Path("/srv/nfsother"), mountinfo=info) == "ext4"


def test_local_storage_on_a_cluster_master_is_reported_per_location(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", spark_master=CLUSTER)
    info = mountinfo(tmp_path)
    problems = storage_problems(
        settings, pipeline=HTTP_PIPELINE, connections=CONNECTIONS, mountinfo=info
    )
    assert [(p.code, p.path) for p in problems] == [
        ("storage_not_shared", "/settings/SLUICE_CHECKPOINT_ROOT"),
        ("storage_not_shared", "/pipeline/0/$source/connectionName"),
    ]
    assert str(settings.checkpoint_root) in problems[0].message
    assert "SLUICE_SHARED_STORAGE=true" in problems[0].message
    assert str(tmp_path / "data" / "spool") in problems[1].message
    # A File connection on an NFS mount is fine; the checkpoint still is not.
    on_nfs = storage_problems(
        settings, pipeline=FILE_PIPELINE, connections=CONNECTIONS, mountinfo=info
    )
    assert [p.path for p in on_nfs] == ["/settings/SLUICE_CHECKPOINT_ROOT"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"spark_master": "local[4]"},
        {"spark_master": CLUSTER, "shared_storage": True},
    ],
)
def test_local_masters_and_declared_shared_storage_pass(
    tmp_path: Path, overrides: dict[str, object]
) -> None:
    settings = Settings(data_dir=tmp_path, **overrides)  # type: ignore[arg-type]
    assert storage_problems(settings, pipeline=HTTP_PIPELINE, connections=CONNECTIONS) == []


def test_a_hadoop_checkpoint_root_is_shared(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, spark_master=CLUSTER, checkpoint_root_uri="hdfs://nn:8020/sluice"
    )
    assert storage_problems(settings, pipeline=[], connections={}) == []


def test_starting_a_processor_on_unshared_storage_is_a_409_with_problems(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=[KEY], spark_master=CLUSTER)
    engine = FakeEngine()
    app = create_app(settings, engine=engine, stores=open_stores(data_dir=tmp_path))
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as client:
        client.post("/api/v1/connections", json={"name": "orders", "type": "HttpIngest"})
        body = {"name": "p1", "pipeline": HTTP_PIPELINE}
        assert client.post("/api/v1/processors", json=body).status_code == 201
        refused = client.post("/api/v1/processors/p1:start")
        assert refused.status_code == 409, refused.text
        error = refused.json()
        assert error["errorCode"] == "STORAGE_NOT_SHARED"
        assert {p["path"] for p in error["problems"]} == {
            "/settings/SLUICE_CHECKPOINT_ROOT",
            "/pipeline/0/$source/connectionName",
        }
        assert all(set(p) == {"code", "path", "message"} for p in error["problems"])
        assert client.get("/api/v1/processors/p1").json()["state"] == "CREATED"
        assert engine.launches == []


# --------------------------------------------------------------------------- code zip


def test_the_code_zip_holds_both_packages_and_is_cached_by_content(tmp_path: Path) -> None:
    first = build_code_zip(tmp_path / "cache")
    names = set(zipfile.ZipFile(first).namelist())
    assert {"pipeline_stages/__init__.py", "service/config/settings.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert first.name.startswith("sluice-code-")
    mtime = first.stat().st_mtime_ns
    assert build_code_zip(tmp_path / "cache") == first and first.stat().st_mtime_ns == mtime


def test_a_changed_package_gets_a_new_zip_and_the_old_one_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "src" / "demo_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("X = 1\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    cache = tmp_path / "cache"
    old = build_code_zip(cache, packages=["demo_pkg"])
    assert zipfile.ZipFile(old).namelist() == ["demo_pkg/__init__.py"]
    before = content_hash(package_files(["demo_pkg"]))
    (package / "__init__.py").write_text("X = 2\n")
    assert content_hash(package_files(["demo_pkg"])) != before
    new = build_code_zip(cache, packages=["demo_pkg"])
    assert new != old and not old.exists()
    assert zipfile.ZipFile(new).read("demo_pkg/__init__.py") == b"X = 2\n"


def test_a_missing_package_cannot_be_shipped(tmp_path: Path) -> None:
    with pytest.raises(ExecutorEnvironmentError, match="not importable"):
        build_code_zip(tmp_path, packages=["no_such_package_here"])


def test_sparks_version_mismatch_error_becomes_an_actionable_message() -> None:
    spark_error = RuntimeError(
        "An error occurred while calling o53.collectToPython.\n: org.apache.spark.SparkException:"
        " Job aborted ... pyspark.errors.exceptions.base.PySparkRuntimeError: "
        "[PYTHON_VERSION_MISMATCH] Python in worker has different version: 3.12 than that in "
        "driver: 3.11, PySpark cannot run with different minor versions."
    )
    message = str(translate_failure(spark_error))
    assert message.startswith("executors run Python 3.12 but the Sluice service")
    assert "driver) runs Python 3.11" in message
    assert "(PYSPARK_PYTHON of the service)" in message
    other = str(translate_failure(RuntimeError("boom\nJVM stacktrace:\nat x")))
    assert other == "the executor environment check failed: boom"


# --------------------------------------------------------------------------- cluster state


def test_cluster_down_and_status_without_a_cluster(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster")
    assert cluster.down() == []
    assert cluster.status() == {"running": False}


def test_cluster_up_validates_its_arguments(tmp_path: Path) -> None:
    from service.runtime.cluster import ClusterError

    with pytest.raises(ClusterError, match="at least 1"):
        LocalCluster(tmp_path).up(workers=0)


def test_cluster_cli_reports_no_cluster(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from service.cli.app import app

    runner = CliRunner()
    result = runner.invoke(app, ["cluster", "status", "--data-dir", str(tmp_path), "--json"])
    assert result.exit_code == 1 and '"running": false' in result.stdout
    stopped = runner.invoke(app, ["cluster", "down", "--data-dir", str(tmp_path)])
    assert stopped.exit_code == 0 and "nothing was running" in stopped.stdout
