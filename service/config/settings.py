"""Service settings: `Settings(BaseSettings)`, read from `SLUICE_*` variables, checked at startup.

Every setting has an environment variable named `SLUICE_<FIELD>` (e.g. `SLUICE_DATA_DIR`,
`SLUICE_STORE_URL`, `SLUICE_API_KEYS`, `SLUICE_SPARK_MASTER`). `Settings()` refuses
inconsistent values with a message naming the variable, so a bad deployment fails at start,
not on the first request. Spark settings also come from `SLUICE_SPARK_CONF_<key>` variables
and `SLUICE_SPARK_CONF_FILE` (`service.config.spark_conf`); `Settings.effective_spark_conf` is the
merged result.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from service.config.private_files import check_private_directory, make_private_dir
from service.config.spark_conf import merged_conf

#: Spark's processing-time trigger syntax, as Sluice accepts it.
_INTERVAL = re.compile(
    r"^\d+(\.\d+)?\s*(ms|millisecond|milliseconds|s|second|seconds|minute|minutes)$"
)
#: Milliseconds per unit of `_INTERVAL`.
_UNIT_MS = {
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "second", "seconds"), 1000),
    **dict.fromkeys(("minute", "minutes"), 60_000),
}
_DLQ_TARGET = re.compile(r"^[A-Za-z0-9_-]{1,64}/[^/\s]{1,63}/[^/\s]{1,255}$")
#: Master URLs Sluice can drive (Spark Connect `sc://` is not one: Sluice needs the
#: SparkContext for Python dependencies and the executor check).
_MASTER = re.compile(r"^(local(\[[^\]]+\])?|local-cluster\[[^\]]+\]|spark://\S+|k8s://\S+|yarn)$")
#: Spark master URLs whose executors run in this process or on this machine.
LOCAL_MASTER_PREFIXES = ("local",)

#: Pipelines are at most 16 MB (atlas-semantics.md §2); leave room for the rest of the body.
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024 + 64 * 1024


def default_data_dir() -> Path:
    """`~/.sluice`: where the service and the CLI on the same machine meet by default."""
    return Path.home() / ".sluice"


class Settings(BaseSettings):
    """Everything the service reads from its environment.

    Attributes:
        env: `dev` or `prod`; prod refuses dev conveniences (a default DLQ target).
        data_dir: Checkpoints, spools, the SQLite store and the generated API key live here.
        store_url: `sqlite:///...` or `mongodb://...`; default `<data_dir>/sluice.db`.
        api_keys: Accepted API keys (comma-separated in `SLUICE_API_KEYS`). When empty, the
            service generates one on first start in `<data_dir>/api_key` (mode 0600).
        host: Interface `sluice serve` binds (loopback by default).
        port: Port `sluice serve` listens on.
        spark_master: Any Spark master URL; `local[*]` runs Spark inside the service.
        spark_conf: Extra Spark settings (JSON object in `SLUICE_SPARK_CONF`).
        spark_conf_file: A `spark-defaults.conf`-style file of Spark settings.
        spark_executor_memory: `spark.executor.memory` (e.g. `2g`) on cluster masters.
        spark_executor_cores: `spark.executor.cores` on cluster masters.
        spark_ship_code: `auto` ships Sluice's packages to executors (a zip, `addPyFile`)
            when the master is not local; `always` / `never` force it (`never`: executors
            have Sluice installed, e.g. the Docker image).
        executor_check_timeout_seconds: How long session start waits for executors to run
            the Python-version check on a cluster master.
        shared_storage: Asserts that the local checkpoint, data and File directories are on
            storage every Spark node reads at the same path (an NFS mount, a shared volume).
        checkpoint_root_uri: `SLUICE_CHECKPOINT_ROOT`: a path, `file://` URI or Hadoop URI
            (`hdfs://`, `s3a://`...) for Spark's checkpoints.
        spark_eager: Start the JVM when the service starts, not on the first processor.
        trigger_interval: How often an idle processor looks for new input, and the clock
            tick of windows that close on the wall clock (e.g. `1 second`); with input
            waiting, micro-batches run back to back (`_engine.session.start_query`).
        checkpoint_dir: Root of the per-processor checkpoint directories.
        instance_name: The workspace name written into DLQ records (`instanceName`).
        default_dlq: `connection/db/coll` for processors without `options.dlq` (dev only).
        sample_size: Output and DLQ messages kept per processor for `sample`.
        restart_attempts: Restarts of a failed query before the processor becomes FAILED.
        restart_backoff_seconds: First restart delay; it doubles on every attempt.
        stats_flush_seconds: How often live stats are persisted to the store.
        max_body_bytes: Largest accepted request body (413 above).
        engine_start_timeout_seconds: How long a request waits for the JVM to come up.
        secret_key: `SLUICE_SECRET_KEY`: the Fernet key(s) sealing connection secrets at rest
            (comma-separated; the first seals). Unset: the key file below.
        secret_key_file: `SLUICE_SECRET_KEY_FILE`: where the generated key lives when
            `SLUICE_SECRET_KEY` is unset (default `<data_dir>/secret.key`, mode 0600).
    """

    model_config = SettingsConfigDict(env_prefix="SLUICE_", extra="ignore", populate_by_name=True)

    env: Literal["dev", "prod"] = "dev"
    data_dir: Path = Field(default_factory=default_data_dir)
    store_url: str | None = None
    api_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = Field(default=8420, ge=1, le=65535)
    spark_master: str = "local[*]"
    spark_conf: dict[str, str] = Field(default_factory=dict)
    spark_conf_file: Path | None = None
    spark_executor_memory: str | None = Field(default=None, pattern=r"^\d+[kmgtKMGT]?$")
    spark_executor_cores: int | None = Field(default=None, ge=1, le=1024)
    spark_ship_code: Literal["auto", "always", "never"] = "auto"
    executor_check_timeout_seconds: float = Field(default=180.0, gt=0)
    shared_storage: bool = False
    checkpoint_root_uri: str | None = Field(default=None, validation_alias="SLUICE_CHECKPOINT_ROOT")
    spark_eager: bool = True
    trigger_interval: str = "1 second"
    checkpoint_dir: Path | None = None
    instance_name: str = Field(default="sluice", min_length=1, max_length=64)
    default_dlq: str | None = None
    sample_size: int = Field(default=1000, ge=1, le=100_000)
    restart_attempts: int = Field(default=3, ge=0, le=20)
    restart_backoff_seconds: float = Field(default=1.0, gt=0, le=300)
    stats_flush_seconds: float = Field(default=5.0, gt=0, le=3600)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024)
    engine_start_timeout_seconds: float = Field(default=180.0, gt=0)
    secret_key: SecretStr | None = None
    secret_key_file: Path | None = None

    _spark_conf: dict[str, str] = PrivateAttr(default_factory=dict)
    _checkpoint_uri: str | None = PrivateAttr(default=None)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value

    @field_validator("api_keys")
    @classmethod
    def _keys_long_enough(cls, keys: list[str]) -> list[str]:
        if any(len(key) < 16 for key in keys):
            raise ValueError("SLUICE_API_KEYS: every key must be at least 16 characters")
        return keys

    @field_validator("trigger_interval")
    @classmethod
    def _interval(cls, value: str) -> str:
        if not _INTERVAL.fullmatch(value.strip()):
            msg = (
                "SLUICE_TRIGGER_INTERVAL: expected e.g. '1 second' or '500 milliseconds', "
                f"got {value!r}"
            )
            raise ValueError(msg)
        return value.strip()

    @field_validator("default_dlq")
    @classmethod
    def _dlq_target(cls, value: str | None) -> str | None:
        if value is not None and not _DLQ_TARGET.fullmatch(value):
            msg = f"SLUICE_DEFAULT_DLQ: expected 'connection/db/coll', got {value!r}"
            raise ValueError(msg)
        return value

    @field_validator("spark_master")
    @classmethod
    def _master(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("SLUICE_SPARK_MASTER must not be empty (e.g. 'local[*]')")
        if not _MASTER.fullmatch(value.strip()):
            msg = (
                "SLUICE_SPARK_MASTER: expected local[*], local[N], spark://host:port, "
                f"k8s://https://host:port or yarn, got {value.strip()!r}"
            )
            raise ValueError(msg)
        return value.strip()

    @model_validator(mode="after")
    def _check_paths_and_env(self) -> Settings:
        if self.env != "dev" and self.default_dlq is not None:
            msg = (
                "SLUICE_DEFAULT_DLQ is a development convenience and is refused when "
                "SLUICE_ENV is not 'dev': give each processor options.dlq instead"
            )
            raise ValueError(msg)
        self.data_dir = self.data_dir.expanduser().absolute()
        self._resolve_checkpoint_root()
        if self.checkpoint_dir is None:
            self.checkpoint_dir = self.data_dir / "checkpoints"
        self.checkpoint_dir = self.checkpoint_dir.expanduser().absolute()
        if self.store_url is not None and not self.store_url.startswith(
            ("sqlite:///", "mongodb://", "mongodb+srv://")
        ):
            msg = f"SLUICE_STORE_URL: use sqlite:///path or mongodb://..., got {self.store_url.split(':', 1)[0]}:..."
            raise ValueError(msg)
        self._spark_conf = self._resolve_spark_conf()
        return self

    def _resolve_checkpoint_root(self) -> None:
        """`SLUICE_CHECKPOINT_ROOT`: a path or `file://` URI moves the checkpoint directory;
        a Hadoop URI receives Spark's checkpoints while Sluice's own bookkeeping (lock files,
        pinned source positions) stays in the local checkpoint directory."""
        raw = (self.checkpoint_root_uri or "").strip()
        if not raw:
            return
        parts = urlsplit(raw)
        if parts.scheme in ("", "file"):
            path = Path(parts.path if parts.scheme else raw).expanduser().absolute()
            if self.checkpoint_dir is not None and self.checkpoint_dir.absolute() != path:
                msg = "SLUICE_CHECKPOINT_ROOT and SLUICE_CHECKPOINT_DIR name different directories"
                raise ValueError(msg)
            self.checkpoint_dir = path
        elif not parts.netloc and not parts.path.strip("/"):
            raise ValueError(f"SLUICE_CHECKPOINT_ROOT: expected scheme://host/path, got {raw!r}")
        else:
            self._checkpoint_uri = raw.rstrip("/")

    def _resolve_spark_conf(self) -> dict[str, str]:
        conf: dict[str, str] = {}
        if self.spark_executor_memory is not None:
            conf["spark.executor.memory"] = self.spark_executor_memory
        if self.spark_executor_cores is not None:
            conf["spark.executor.cores"] = str(self.spark_executor_cores)
        conf.update(
            merged_conf(file=self.spark_conf_file, json_conf=self.spark_conf, environ=os.environ)
        )
        return conf

    @property
    def effective_spark_conf(self) -> dict[str, str]:
        """Spark settings from every source: executor settings, file, JSON, variables."""
        return dict(self._spark_conf)

    @property
    def is_local_master(self) -> bool:
        """Whether executors run on this machine (Spark's `local*` masters)."""
        return self.spark_master.startswith(LOCAL_MASTER_PREFIXES)

    @property
    def trigger_interval_ms(self) -> int:
        """`trigger_interval` in milliseconds (at least 1)."""
        match = _INTERVAL.fullmatch(self.trigger_interval)
        assert match is not None  # validated
        number = float(self.trigger_interval[: match.start(2)])
        return max(1, round(number * _UNIT_MS[match.group(2)]))

    @property
    def spark_checkpoint_uri(self) -> str | None:
        """The Hadoop URI Spark checkpoints go to, when `SLUICE_CHECKPOINT_ROOT` is one."""
        return self._checkpoint_uri

    @property
    def checkpoint_root(self) -> Path:
        """The checkpoint root (always set after validation)."""
        return self.checkpoint_dir or self.data_dir / "checkpoints"

    @property
    def default_dlq_target(self) -> tuple[str, str, str] | None:
        """`(connection, db, coll)` of `default_dlq`, or None."""
        if self.default_dlq is None:
            return None
        connection, db, coll = self.default_dlq.split("/")
        return connection, db, coll

    def prepare_directories(self) -> None:
        """Create the data and checkpoint directories (0700), check they are writable by the
        service and by nobody else (`service.config.private_files`).

        Raises:
            ValueError: Naming the variable whose directory cannot be used
                (`UnsafeDirectory` when group or others may write to it, with the fix).
        """
        for variable, directory in (
            ("SLUICE_DATA_DIR", self.data_dir),
            ("SLUICE_CHECKPOINT_DIR", self.checkpoint_root),
        ):
            try:
                make_private_dir(directory)
            except OSError as error:
                raise ValueError(f"{variable}: cannot create {directory}: {error}") from None
            if not os.access(directory, os.W_OK | os.X_OK):
                raise ValueError(f"{variable}: {directory} is not writable")
            check_private_directory(directory, variable=variable)
