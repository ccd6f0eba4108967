"""`sluice validate FILE`: a pipeline's problems, found locally in about a second.

No service and no Spark: the checks are those of `pipeline_stages` (shapes, stages, specs,
placement, unknown and unsupported operators, option-dependent errors, lint warnings). What
needs the service's registry (connection names and types) is checked by
`POST /api/v1/pipelines:validate` and at create. The file holds a pipeline array or a
`{"pipeline": [...], "options": {...}}` object (the validation route's body).

Exit codes: 0 valid, 1 invalid, 2 usage (the file cannot be read, or is not of that shape).
"""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from pipeline_stages import check_options, lint_pipeline, parse_pipeline
from pipeline_stages._base import PipelineInvalid, Problem
from service.cli.output import CliState, print_line, usage_error

EXIT_VALID = 0
EXIT_PROBLEMS = 1


def split_document(state: CliState, document: Any) -> tuple[Any, bool]:
    """`(pipeline, has_dlq)` of a pipeline array or a validation body; exit 2 otherwise."""
    if isinstance(document, list):
        return document, False
    if isinstance(document, dict) and "pipeline" in document:
        options = document.get("options") or {}
        return document["pipeline"], isinstance(options, dict) and bool(options.get("dlq"))
    usage_error(state, 'expected a pipeline array or {"pipeline": [...], "options": {...}}')


def local_problems(pipeline: Any, *, has_dlq: bool) -> tuple[list[Problem], list[Problem]]:
    """`(problems, warnings)` of every Spark-free, registry-free check."""
    try:
        parsed = parse_pipeline(pipeline)
    except PipelineInvalid as error:
        return list(error.problems), list(error.warnings)
    problems = check_options(parsed, has_dlq=has_dlq)
    return problems, lint_pipeline(parsed, has_dlq=has_dlq)


def report(
    state: CliState, problems: list[Problem], warnings: list[Problem], *, as_json: bool
) -> int:
    """Print problems and warnings (a table, or JSON lines) and return the exit code."""
    rows = [("error", p) for p in problems] + [("warning", w) for w in warnings]
    if as_json:
        for severity, item in rows:
            print_line(state, {"severity": severity, **item.to_dict()})
    elif rows:
        grid = Table("severity", header_style="bold")
        grid.add_column("path", overflow="fold")
        grid.add_column("code")
        grid.add_column("message")
        for severity, item in rows:
            grid.add_row(severity, item.path or "/", item.code, item.message)
        state.stdout.print(grid)
    if not problems and not as_json:
        state.stdout.print("valid", markup=False, highlight=False)
    elif not as_json:
        count = len(problems)
        state.stdout.print(f"{count} problem{'s' if count != 1 else ''}", markup=False)
    return EXIT_PROBLEMS if problems else EXIT_VALID


def run_validate(state: CliState, text: str, *, as_json: bool) -> int:
    """Validate a file's text; JSON syntax errors are problems of the file (exit 1)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        problem = Problem("invalid_json", "", f"not JSON: {error}")
        return report(state, [problem], [], as_json=as_json)
    pipeline, has_dlq = split_document(state, document)
    problems, warnings = local_problems(pipeline, has_dlq=has_dlq)
    return report(state, problems, warnings, as_json=as_json)
