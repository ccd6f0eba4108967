"""The README and the documentation site cannot drift from the code.

* The site builds with `mkdocs build --strict`: a broken link or anchor fails it.
* Every ```json block is JSON; every one that is a pipeline (an array whose first stage is
  `$source`) parses with `parse_pipeline` and compiles to a Spark plan.
* Every ```jsonl block (several documents, e.g. `sluice process` output) is one JSON value per
  line.
* Every `sluice ...` command in a ```sh / ```bash / ```console block names a real command
  (its `--help` exits 0) with options that command has, and every `curl` call names a route
  of the service with a method it accepts.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pipeline_stages import parse_pipeline

ROOT = Path(__file__).resolve().parents[2]
MKDOCS_CONFIG = ROOT / "docs" / "mkdocs.yml"
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELL_LANGS = frozenset({"sh", "bash", "shell", "console"})
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    """One fenced code block: its file, its index among the file's blocks, language, text."""

    file: str
    index: int
    lang: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.file}#{self.index}-{self.lang or 'plain'}"


def _blocks() -> list[Block]:
    found = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT).as_posix()
        for index, match in enumerate(FENCE.finditer(text)):
            found.append(Block(name, index, match.group(1).lower(), match.group(2)))
    return found


def _is_pipeline(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and isinstance(value[0], dict)
        and "$source" in value[0]
    )


def _pipeline_of(value: Any) -> list[Any] | None:
    """The pipeline a JSON value is or holds (a request body's `pipeline`), else None."""
    if _is_pipeline(value):
        return value
    if isinstance(value, dict) and _is_pipeline(value.get("pipeline")):
        return value["pipeline"]
    return None


def _loads_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


BLOCKS = _blocks()
JSON_BLOCKS = [b for b in BLOCKS if b.lang == "json"]
JSONL_BLOCKS = [b for b in BLOCKS if b.lang == "jsonl"]
PIPELINE_BLOCKS = [b for b in JSON_BLOCKS if _pipeline_of(_loads_or_none(b.text)) is not None]
SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL_LANGS]


def _ids(blocks: list[Block]) -> list[str]:
    return [b.id for b in blocks]


# --------------------------------------------------------------------------- the site


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """Broken links and anchors are warnings in mkdocs.yml, and --strict makes them errors."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(MKDOCS_CONFIG),
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build failed:\n{result.stderr}\n{result.stdout}"
    assert (tmp_path / "site" / "index.html").is_file()


def test_every_page_is_in_the_nav() -> None:
    """A page left out of the nav is unreachable from the site's menu."""
    config = MKDOCS_CONFIG.read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs" / "content").rglob("*.md")):
        relative = page.relative_to(ROOT / "docs" / "content").as_posix()
        assert f": {relative}" in config, f"{relative} is not in the nav of {MKDOCS_CONFIG}"


# --------------------------------------------------------------------------- JSON examples


def test_there_are_examples_to_check() -> None:
    readme = [b for b in PIPELINE_BLOCKS if b.file == "README.md"]
    assert readme, "the README shows no pipeline"
    assert len(PIPELINE_BLOCKS) >= 10
    assert SHELL_BLOCKS and JSONL_BLOCKS


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=_ids(JSON_BLOCKS))
def test_json_block_is_json_and_pipelines_parse(block: Block) -> None:
    pipeline = _pipeline_of(json.loads(block.text))
    if pipeline is not None:
        parsed = parse_pipeline(pipeline)
        assert parsed.stages[0].key == "$source"


@pytest.mark.parametrize("block", JSONL_BLOCKS, ids=_ids(JSONL_BLOCKS))
def test_jsonl_block_has_one_json_value_per_line(block: Block) -> None:
    lines = [line for line in block.text.splitlines() if line.strip()]
    assert lines
    for number, line in enumerate(lines, 1):
        try:
            json.loads(line)
        except json.JSONDecodeError as error:
            pytest.fail(f"line {number} is not JSON: {error}\n{line}")


@pytest.mark.spark
@pytest.mark.parametrize("block", PIPELINE_BLOCKS, ids=_ids(PIPELINE_BLOCKS))
def test_pipeline_compiles_to_a_spark_plan(spark: object, block: Block, tmp_path: Path) -> None:
    """Compiling catches what parsing cannot: unknown expression operators, connections."""
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._connectors.sources.register import register_all
    from pipeline_stages._engine.plan import compile_pipeline
    from pipeline_stages._stream.context import CompileContext, ConnectionInfo
    from service.runtime.lookup_stores import StoreLookupOpener

    register_all(spark)
    # The connections the examples name, as `sluice connections create` makes them.
    connections = {
        "atlas": ConnectionInfo("atlas", "Cluster", {"uri": "mongodb://localhost:27017"}),
        "files": ConnectionInfo("files", "File", {"directory": str(tmp_path / "files")}),
        "orders": ConnectionInfo("orders", "HttpIngest", {}),
        "events": ConnectionInfo("events", "Kafka", {"bootstrapServers": "localhost:1"}),
        "api": ConnectionInfo("api", "Https", {"url": "https://api.example.com/v1"}),
    }
    ctx = CompileContext(
        spark=spark,  # type: ignore[arg-type]
        processor_name="docs",
        problems=ProblemCollector(),
        connections=connections,
        data_dir=str(tmp_path / "data"),
        # Compiling never opens the store; the executors would (`lookup_stores`).
        lookup_stores=StoreLookupOpener(f"sqlite:///{tmp_path / 'lookups.db'}"),
    )
    compiled = compile_pipeline(parse_pipeline(_pipeline_of(json.loads(block.text))), ctx)
    assert compiled.envelopes.isStreaming


# --------------------------------------------------------------------------- shell examples


def _logical_lines(text: str) -> Iterator[str]:
    """Lines of a shell block with continuations joined, heredoc bodies and comments dropped,
    and quoted newlines kept inside their line ("$ " prompts of console blocks removed)."""
    raw = text.replace("\\\n", " ").splitlines()
    current: list[str] = []
    quote = ""
    heredoc = ""
    for line in raw:
        if heredoc:
            if line.strip() == heredoc:
                heredoc = ""
            continue
        if not current and line.startswith("$ "):
            line = line[2:]
        kept = []
        for i, char in enumerate(line):
            if quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "#" and (i == 0 or line[i - 1].isspace()):
                break
            kept.append(char)
        current.append("".join(kept))
        if quote:
            continue
        joined = "\n".join(current)
        current = []
        marker = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", joined)
        if marker:
            heredoc = marker.group(1)
        if joined.strip():
            yield joined
    assert not quote, f"unterminated quote in:\n{text}"


def _simple_commands(line: str) -> Iterator[list[str]]:
    """The words of each simple command of a line (split at | && || ; $( ) outside quotes),
    without leading VAR=value assignments."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(line):
        char = line[i]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif line.startswith(("$(", "&&", "||"), i):
            parts.append("".join(current))
            current = []
            i += 2
            continue
        elif char in "|;()`":
            parts.append("".join(current))
            current = []
            i += 1
            continue
        current.append(char)
        i += 1
    parts.append("".join(current))
    for part in parts:
        words = shlex.split(part)
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words.pop(0)
        if words:
            yield words


# Typer ships its own copy of click, so commands are recognised by what they have.
def _is_group(command: Any) -> bool:
    return hasattr(command, "list_commands")


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if getattr(p, "param_type_name", "") == "option"]


def _option_names(command: Any) -> set[str]:
    names = {"--help"}
    for param in _options(command):
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def _takes_value(command: Any, name: str) -> bool:
    for param in _options(command):
        if name in (*param.opts, *param.secondary_opts):
            return not param.is_flag and not param.count
    return False


def _check_sluice(words: list[str], root: Any) -> str | None:
    """None if `sluice <words>` names a command with options it has, else what is wrong."""
    from service.cli.app import app

    command = root
    path: list[str] = []
    rest = words[1:]
    while rest:
        word = rest[0]
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            if name not in _option_names(command):
                return f"{' '.join(['sluice', *path])} has no option {name}"
            rest = rest[2:] if "=" not in word and _takes_value(command, name) else rest[1:]
            continue
        if not _is_group(command):
            break
        sub = command.get_command(None, word)
        if sub is None:
            return f"no command `sluice {' '.join([*path, word])}`"
        command, path, rest = sub, [*path, word], rest[1:]
    if _is_group(command):
        return f"`sluice {' '.join(path)}` is a group, not a command"
    for word in rest:
        if word.startswith("-") and word != "-" and not re.match(r"^-\d", word):
            name = word.split("=", 1)[0]
            if name not in _option_names(command):
                return f"`sluice {' '.join(path)}` has no option {name}"
    result = CliRunner().invoke(app, [*path, "--help"])
    if result.exit_code != 0:
        return f"`sluice {' '.join(path)} --help` exited {result.exit_code}: {result.output}"
    return None


CURL_VALUE_OPTIONS = frozenset(
    {"-H", "--header", "-d", "--data", "--data-binary", "--data-raw", "-X", "--request",
     "-o", "--output", "-u", "--user", "-F", "--form", "-m", "--max-time"}
)  # fmt: skip
CURL_DATA_OPTIONS = frozenset({"-d", "--data", "--data-binary", "--data-raw", "-F", "--form"})


def _check_curl(words: list[str], routes: list[Route]) -> str | None:
    """None if the curl call's URL path is a route accepting its method, else what is wrong."""
    method = "GET"
    urls = []
    rest = words[1:]
    while rest:
        word = rest[0]
        if word in CURL_VALUE_OPTIONS:
            if word in ("-X", "--request"):
                method = rest[1].upper()
            elif word in CURL_DATA_OPTIONS and method == "GET":
                method = "POST"
            rest = rest[2:]
        elif word.startswith("-"):
            rest = rest[1:]
        else:
            urls.append(word)
            rest = rest[1:]
    if len(urls) != 1:
        return f"expected one URL in {words}, found {urls}"
    path = re.sub(r"^(https?://)?[^/]+", "", urls[0]).split("?", 1)[0]
    matching = [r for r in routes if r.matches(path)]
    if not matching:
        return f"no route for {path}"
    if not any(method in r.methods for r in matching):
        return f"no {method} route for {path}"
    return None


@dataclass(frozen=True)
class Route:
    """One path of the service's OpenAPI document, as a regex, with its methods."""

    template: str
    methods: frozenset[str]

    def matches(self, path: str) -> bool:
        parts = re.split(r"(\{[^}]+\})", self.template)
        pattern = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
        return re.fullmatch(pattern, path) is not None


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Route]]:
    """The service's routes, from an app built on a temporary data directory (as
    tests/unit/service/api/test_api.py builds it), read from its OpenAPI document."""
    from service.config.settings import Settings
    from service.main import create_app
    from tests.unit.service.fake_engine import FakeEngine

    data_dir = tmp_path_factory.mktemp("docs-service")
    settings = Settings(data_dir=data_dir, api_keys=["docs-test-key-0123456789"])
    app = create_app(settings, engine=FakeEngine())
    paths = app.openapi()["paths"]
    yield [Route(path, frozenset(m.upper() for m in ops)) for path, ops in paths.items()]
    app.state.services.stores.close()


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_ids(SHELL_BLOCKS))
def test_shell_block_names_real_commands_and_routes(block: Block, routes: list[Route]) -> None:
    from service.cli.app import app

    root = typer.main.get_command(app)
    assert _is_group(root)
    problems = []
    for line in _logical_lines(block.text):
        for words in _simple_commands(line):
            if words[0] == "sluice":
                problem = _check_sluice(words, root)
            elif words[0] == "curl":
                problem = _check_curl(words, routes)
            else:
                continue
            if problem:
                problems.append(f"{problem}\n    in: {line}")
    assert not problems, "\n".join(problems)


def test_the_shell_checker_sees_every_form(routes: list[Route]) -> None:
    """The checker finds commands behind pipes, &&, $( ), assignments and continuations, and
    skips comments and heredoc bodies."""
    text = (
        "MASTER=$(sluice cluster up --workers 2)  # sluice nope\n"
        "echo '[1,\n 2]' | sluice process - && sluice processors stop p\n"
        "cat > p.json <<'JSON'\nsluice nope\nJSON\n"
        "X=1 Y=2 sluice serve \\\n  --port 1\n"
    )
    commands = [w for line in _logical_lines(text) for w in _simple_commands(line)]
    sluice = [w for w in commands if w[0] == "sluice"]
    assert sluice == [
        ["sluice", "cluster", "up", "--workers", "2"],
        ["sluice", "process", "-"],
        ["sluice", "processors", "stop", "p"],
        ["sluice", "serve", "--port", "1"],
    ]
    from service.cli.app import app

    root = typer.main.get_command(app)
    assert _is_group(root)
    assert _check_sluice(["sluice", "processors", "sampel", "p"], root)
    assert _check_sluice(["sluice", "processors", "create", "p", "f", "--dql", "x"], root)
    assert _check_sluice(["sluice", "processors"], root)
    assert _check_sluice(["sluice", "--json", "processors", "list"], root) is None
    assert (
        _check_curl(["curl", "-X", "POST", "localhost:8420/api/v1/processors/p:start"], routes)
        is None
    )
    assert _check_curl(["curl", "-d", "{}", "localhost:8420/api/v1/ingest/orders"], routes) is None
    assert _check_curl(["curl", "localhost:8420/api/v1/processor"], routes)
    assert _check_curl(["curl", "-X", "PUT", "localhost:8420/api/v1/processors/p"], routes)
