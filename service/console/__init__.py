"""The operator's console: a web dashboard served by `sluice serve` at `/`.

`install_console(app, api, services)` adds three things to the app:
- the stats history route (`routes.py`) under the authenticated API router;
- `/` (the single-page app, which is also its login page) and `/assets/*` (its built
  JavaScript and CSS). Both are public: they hold no data, and every call the page makes goes
  to the API with the key the user typed, as a bearer header;
- the stats history and its sampler thread, which the app's lifespan starts and stops
  (`start_console` / `stop_console`).
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

from service.api.deps import Services
from service.console import routes
from service.console.assets import STATIC_DIR
from service.console.history import HistorySampler, StatsHistory

__all__ = ["install_console", "start_console", "stop_console"]

_MISSING_BUILD = (
    "<!doctype html><title>Sluice</title><p>The console's front-end is not built: run "
    "<code>npm ci &amp;&amp; npm run build</code> in <code>service/console/frontend</code>.</p>"
)


def install_console(app: FastAPI, api: APIRouter, services: Services) -> None:
    """Add the history route to `api` and serve the dashboard (call before including `api`)."""
    manager = services.manager
    history = StatsHistory(lambda: [manager.stats(r, verbose=True) for r in manager.all_records()])
    app.state.stats_history = history
    app.state.stats_sampler = HistorySampler(history)
    api.include_router(routes.router)
    index = STATIC_DIR / "index.html"

    @app.get("/", include_in_schema=False, response_model=None)
    def console_index() -> FileResponse | HTMLResponse:
        """The dashboard's single page (its login page too)."""
        if not index.is_file():
            return HTMLResponse(_MISSING_BUILD, status_code=503)
        return FileResponse(index, headers={"Cache-Control": "no-cache"})

    if (STATIC_DIR / "assets").is_dir():
        app.mount("/assets", StaticFiles(directory=STATIC_DIR / "assets"), name="console-assets")


def start_console(app: FastAPI) -> None:
    """Start sampling stats for the charts (the app's lifespan calls this)."""
    sampler: HistorySampler = app.state.stats_sampler
    sampler.start()


def stop_console(app: FastAPI) -> None:
    """Stop the sampler."""
    sampler: HistorySampler = app.state.stats_sampler
    sampler.stop()
