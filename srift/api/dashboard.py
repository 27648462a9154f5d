"""The dashboard at `/`: server-rendered page shells whose scripts call the same /v1 API as everyone else."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from srift import __version__
from srift.settings import Settings

HERE = Path(__file__).resolve().parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
PLOTLY_URL = "/static/vendor/plotly.min.js"


@dataclass(frozen=True, slots=True)
class Page:
    """One dashboard page: its id (template and script name), path and navigation title."""

    id: str
    path: str
    title: str
    summary: str


PAGES: tuple[Page, ...] = (
    Page("plan", "/", "Plan", "Which VMs to rent and how to split the global batch."),
    Page("predict", "/predict", "Predict", "What-if: the predicted time and cost of a fleet you choose."),
    Page(
        "bandwidth",
        "/bandwidth",
        "Bandwidth",
        "Allreduce bus bandwidth: model curves, probe samples, versions.",
    ),
    Page("jobs", "/jobs", "Jobs", "Probe and profile jobs, and tracked training runs with their re-plans."),
    Page("catalog", "/catalog", "Catalog", "Instance types and their prices."),
)


def plotly_js_path() -> Path | None:
    """The plotly.min.js bundled in the installed `plotly` package (found without importing plotly)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "package_data" / "plotly.min.js"
        if candidate.is_file():
            return candidate
    return None


def mount(app: FastAPI) -> None:
    """Attach the dashboard's pages, its vendored chart library and static files to the app."""
    from srift.api.limits import ERROR_RESPONSES, document_errors
    from srift.api.routes import bandwidth_curves, training_runs
    from srift.documents import field_defaults
    from srift.domain.requests import PlanQuery
    from srift.services.views import UNALIGNED_NOTE, UNALIGNED_NOTE_SHARE

    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    plan_defaults = field_defaults(PlanQuery)  # the Plan form's placeholders say what an empty field means
    for module in (bandwidth_curves, training_runs):
        document_errors(module.router)
        app.include_router(module.router, prefix="/v1", responses=ERROR_RESPONSES)

    def page_handler(page: Page):  # type: ignore[no-untyped-def]
        async def render(request: Request) -> HTMLResponse:
            settings: Settings = request.app.state.settings
            context = {
                "page": page,
                "pages": PAGES,
                "version": __version__,
                "auth_enabled": settings.auth_enabled,
                "read_requires_token": settings.read_requires_token,
                "default_region": settings.default_region,
                "plotly_url": PLOTLY_URL,
                "plan_defaults": plan_defaults,
                # the Plan page's caution on unaligned half-precision products: the CLI's threshold and words
                "unaligned_note_share": UNALIGNED_NOTE_SHARE,
                "unaligned_note": UNALIGNED_NOTE,
            }
            return templates.TemplateResponse(request, f"{page.id}.html", context)

        render.__name__ = f"dashboard_{page.id}"
        return render

    for page in PAGES:
        app.add_api_route(page.path, page_handler(page), methods=["GET"], include_in_schema=False)

    async def plotly_js() -> Response:
        path = plotly_js_path()
        if path is None:
            return PlainTextResponse(
                "console.error('plotly is not installed: charts are unavailable. "
                "To fix: pip install plotly (a Srift dependency)');",
                status_code=503,
                media_type="text/javascript",
            )
        return FileResponse(
            path, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
        )

    app.add_api_route(PLOTLY_URL, plotly_js, methods=["GET"], include_in_schema=False)
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
