"""`sluice cluster up|down|status`: a Spark standalone cluster on this machine (`service.runtime.cluster`).

The cluster's state lives in `<data dir>/cluster/` (`--data-dir`, else `SLUICE_DATA_DIR`,
else `~/.sluice`), next to the service's own data, so `up` in one shell and `down` in another
find the same daemons.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from service.cli.output import EXIT_ERROR, JsonOption, print_json, state_of, wants_json
from service.config.settings import default_data_dir
from service.runtime.cluster import ClusterError, LocalCluster

cluster_app = typer.Typer(
    help="A local Spark standalone cluster (master + workers on 127.0.0.1).",
    no_args_is_help=True,
)

DataDir = Annotated[
    str | None, typer.Option("--data-dir", help="Where the cluster state lives (SLUICE_DATA_DIR).")
]


def _cluster(data_dir: str | None) -> LocalCluster:
    root = data_dir or os.environ.get("SLUICE_DATA_DIR")
    base = Path(root).expanduser() if root else default_data_dir()
    return LocalCluster(base.absolute() / "cluster")


@cluster_app.command()
def up(
    ctx: typer.Context,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Number of workers.")] = 2,
    cores: Annotated[int, typer.Option("--cores", min=1, help="Cores per worker.")] = 1,
    memory: Annotated[str, typer.Option("--memory", help="Memory per worker (e.g. 1g).")] = "1g",
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the workers.")
    ] = 120.0,
    data_dir: DataDir = None,
    as_json: JsonOption = False,
) -> None:
    """Start a master and N workers; print the master URL once every worker is ALIVE."""
    state = state_of(ctx)
    cluster = _cluster(data_dir)
    try:
        started = cluster.up(workers=workers, cores=cores, memory=memory, timeout=timeout)
    except ClusterError as error:
        state.stderr.print(f"error: {error}", markup=False, highlight=False)
        raise typer.Exit(EXIT_ERROR) from None
    if wants_json(ctx, as_json):
        print_json(state, cluster.status())
        return
    state.stdout.file.write(started.master_url + "\n")
    state.stderr.print(
        f"{workers} worker(s) x {cores} core(s), {memory} each; master UI "
        f"http://127.0.0.1:{started.master_webui_port}; use SLUICE_SPARK_MASTER="
        f"{started.master_url} SLUICE_SHARED_STORAGE=true",
        markup=False,
        highlight=False,
    )


@cluster_app.command()
def down(ctx: typer.Context, data_dir: DataDir = None, as_json: JsonOption = False) -> None:
    """Stop the master and workers started by `up` and wait for them to exit."""
    state = state_of(ctx)
    stopped = _cluster(data_dir).down()
    if wants_json(ctx, as_json):
        print_json(state, {"stopped": stopped})
    else:
        state.stdout.print(f"stopped: {', '.join(stopped) or 'nothing was running'}", markup=False)


@cluster_app.command()
def status(ctx: typer.Context, data_dir: DataDir = None, as_json: JsonOption = False) -> None:
    """Show the master URL and the state of each daemon and worker (exit 1 if not running)."""
    state = state_of(ctx)
    report = _cluster(data_dir).status()
    if wants_json(ctx, as_json):
        print_json(state, report)
    elif not report["running"]:
        state.stdout.print("no cluster is running", markup=False)
    else:
        state.stdout.print(
            f"{report['masterUrl']}  {report['aliveWorkers']} ALIVE worker(s)  "
            f"UI {report['masterWebUi']}",
            markup=False,
        )
        for daemon in report["daemons"]:
            running = "running" if daemon["running"] else "stopped"
            state.stdout.print(f"  {daemon['role']:<10} pid {daemon['pid']:<8} {running}")
    if not report["running"]:
        raise typer.Exit(EXIT_ERROR)
