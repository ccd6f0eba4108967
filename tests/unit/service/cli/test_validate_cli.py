"""`sluice validate FILE`: local problems without a service or Spark, and its exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
VALID = [
    {"$source": {"connectionName": "in1"}},
    {"$match": {"a": {"$gt": 1}}},
    {"$addFields": {"b": {"$add": ["$a", 1]}}},
]
INVALID = [
    {"$source": {"connectionName": "in1"}},
    {"$groop": {}},
    {"$addFields": {"a": {"$foo": 1}}},
    {"$match": {"b": {"$gtt": 1}}},
]


def sluice(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    # A wide terminal, so the table's paths are not folded over several lines.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    command = [sys.executable, "-m", "service.cli.app", *args]
    return subprocess.run(
        command, capture_output=True, text=True, input=stdin, env=env, check=False
    )


def write(tmp_path: Path, document: object) -> str:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_a_valid_pipeline_exits_0(tmp_path: Path) -> None:
    result = sluice("validate", write(tmp_path, VALID))
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_every_problem_is_a_json_line_and_the_exit_is_1(tmp_path: Path) -> None:
    result = sluice("validate", "--json", write(tmp_path, INVALID))
    assert result.returncode == 1, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert {(p["code"], p["path"]) for p in lines} == {
        ("unknown_stage", "/pipeline/1"),
        ("unknown_operator", "/pipeline/2/$addFields/a/$foo"),
        ("unknown_operator", "/pipeline/3/$match/b/$gtt"),
    }
    assert {p["severity"] for p in lines} == {"error"}


def test_the_table_names_each_path(tmp_path: Path) -> None:
    result = sluice("validate", write(tmp_path, INVALID))
    assert result.returncode == 1
    assert "/pipeline/2/$addFields/a/$foo" in result.stdout
    assert result.stdout.rstrip().endswith("3 problems")


def test_a_validation_body_carries_the_dlq_option(tmp_path: Path) -> None:
    check = {"$validate": {"validator": {"a": {"$exists": True}}, "validationAction": "dlq"}}
    body = {"pipeline": [VALID[0], check]}
    without = sluice("validate", "--json", write(tmp_path, body))
    assert without.returncode == 1
    assert json.loads(without.stdout)["path"] == "/pipeline/1/$validate/validationAction"
    body["options"] = {"dlq": {"connectionName": "local", "db": "d", "coll": "c"}}
    assert sluice("validate", write(tmp_path, body)).returncode == 0


def test_stdin_and_json_syntax_errors(tmp_path: Path) -> None:
    assert sluice("validate", "-", stdin=json.dumps(VALID)).returncode == 0
    broken = sluice("validate", "--json", "-", stdin="[{")
    assert broken.returncode == 1 and json.loads(broken.stdout)["code"] == "invalid_json"


@pytest.mark.parametrize("args", [["validate", "/no/such/file.json"], ["validate"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    assert sluice(*args).returncode == 2


def test_a_document_of_another_shape_exits_2(tmp_path: Path) -> None:
    result = sluice("validate", write(tmp_path, {"stages": []}))
    assert result.returncode == 2 and "pipeline" in result.stderr


def test_validation_imports_no_spark(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from service.cli.app import app\n"
        f"result = CliRunner().invoke(app, ['validate', {write(tmp_path, INVALID)!r}])\n"
        "assert result.exit_code == 1, result.output\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
