"""The page and its assets, read once from the package (the server runs offline: the
charting library, uPlot, ships inside the wheel with its licence, no CDN)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

__all__ = ["ASSETS", "Asset", "load_assets"]

#: URL path -> (file under static/, Content-Type); nothing else is served
ASSETS: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/static/console.css": ("console.css", "text/css; charset=utf-8"),
    "/static/uPlot.iife.min.js": ("uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    "/static/uPlot.min.css": ("uPlot.min.css", "text/css; charset=utf-8"),
    "/static/uPlot.LICENSE": ("uPlot.LICENSE", "text/plain; charset=utf-8"),
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str


def load_assets() -> dict[str, Asset]:
    folder = resources.files("cubequeue.server.console").joinpath("static")
    return {
        path: Asset(folder.joinpath(name).read_bytes(), content_type)
        for path, (name, content_type) in ASSETS.items()
    }
