"""Spark settings from the environment: `SLUICE_SPARK_CONF_<key>` variables and a conf file.

Three sources, later ones win on the same key:

1. `SLUICE_SPARK_CONF_FILE`: a file in Spark's `spark-defaults.conf` format (one
   `key value` per line, separated by whitespace or `=`; `#` starts a comment line);
2. `SLUICE_SPARK_CONF`: a JSON object (`{"spark.executor.memory": "2g"}`);
3. `SLUICE_SPARK_CONF_<key>` variables, one per setting: the Spark key with every `.`
   written as `__` and its case kept, e.g. `SLUICE_SPARK_CONF_spark__executor__memory=2g`
   or `SLUICE_SPARK_CONF_spark__sql__streaming__stateStore__providerClass=...`.

Why `__` and case-preserving: shells and Kubernetes refuse `.` in variable names, Linux
keeps their case, and Spark keys are camelCase in places (`stateStore.providerClass`), so a
lower- or upper-casing convention could not round-trip. A single `_` stays `_`
(`spark.executorEnv.MY_VAR` is `SLUICE_SPARK_CONF_spark__executorEnv__MY_VAR`); a key that
itself contains `__` cannot be written this way (use the JSON or the file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

ENV_PREFIX = "SLUICE_SPARK_CONF_"
#: Variables with the prefix that are Sluice settings, not Spark keys.
RESERVED = frozenset({"SLUICE_SPARK_CONF_FILE"})
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9_\-]$|^[A-Za-z0-9]$")


def env_name_for(key: str) -> str:
    """The `SLUICE_SPARK_CONF_*` variable that sets a Spark key.

    Raises:
        ValueError: When the key cannot be written as a variable name.
    """
    if "__" in key or not _KEY.fullmatch(key) or ".." in key:
        raise ValueError(f"Spark key {key!r} cannot be written as a SLUICE_SPARK_CONF_ variable")
    return ENV_PREFIX + key.replace(".", "__")


def key_for_env(name: str) -> str:
    """The Spark key a `SLUICE_SPARK_CONF_*` variable sets (inverse of `env_name_for`).

    Raises:
        ValueError: When the name is not a well-formed setting variable.
    """
    if not name.startswith(ENV_PREFIX) or name in RESERVED:
        raise ValueError(f"{name}: not a {ENV_PREFIX}<key> variable")
    key = name[len(ENV_PREFIX) :].replace("__", ".")
    if not key or not _KEY.fullmatch(key) or ".." in key or "_." in key or "._" in key:
        msg = (
            f"{name}: expected {ENV_PREFIX}<Spark key with '.' written as '__'>, "
            f"e.g. {ENV_PREFIX}spark__executor__memory"
        )
        raise ValueError(msg)
    return key


def conf_from_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """Every Spark setting given as a `SLUICE_SPARK_CONF_<key>` variable.

    Raises:
        ValueError: Naming the first malformed variable.
    """
    return {
        key_for_env(name): value
        for name, value in sorted(environ.items())
        if name.startswith(ENV_PREFIX) and name not in RESERVED
    }


def read_spark_defaults(path: Path) -> dict[str, str]:
    """Settings of a `spark-defaults.conf`-style file.

    Raises:
        ValueError: Naming the file and line when the file cannot be read or a line is not
            `key value`.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"SLUICE_SPARK_CONF_FILE: cannot read {path}: {error}") from None
    conf: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        # Spark's own loader (java.util.Properties) splits on the first whitespace, ':' or '='.
        match = re.match(r"^([^\s=:]+)\s*[\s=:]\s*(.*)$", line)
        if match is None:
            msg = f"SLUICE_SPARK_CONF_FILE: {path}:{number}: expected 'key value', got {line!r}"
            raise ValueError(msg)
        conf[match.group(1)] = match.group(2).strip()
    return conf


def merged_conf(
    *,
    file: Path | None,
    json_conf: Mapping[str, str],
    environ: Mapping[str, str],
) -> dict[str, str]:
    """File, then JSON, then per-key variables (see the module docstring for precedence)."""
    conf = read_spark_defaults(file) if file is not None else {}
    conf.update(json_conf)
    conf.update(conf_from_environ(environ))
    return conf


def environment_conf(environ: Mapping[str, str]) -> dict[str, str]:
    """The Spark settings the environment gives, read as the service reads them (file, then
    `SLUICE_SPARK_CONF`, then per-key variables), for commands without the service's
    settings (`sluice process`).

    Raises:
        ValueError: Naming the variable (or file line) that is malformed.
    """
    file = environ.get("SLUICE_SPARK_CONF_FILE", "").strip()
    raw = environ.get("SLUICE_SPARK_CONF", "").strip()
    try:
        json_conf = json.loads(raw) if raw else {}
    except json.JSONDecodeError as error:
        raise ValueError(f"SLUICE_SPARK_CONF: not valid JSON ({error.msg})") from None
    if not isinstance(json_conf, dict) or not all(
        isinstance(value, str) for value in json_conf.values()
    ):
        raise ValueError('SLUICE_SPARK_CONF: expected a JSON object of strings, e.g. {"k": "v"}')
    return merged_conf(file=Path(file) if file else None, json_conf=json_conf, environ=environ)
