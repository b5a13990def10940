"""The live dashboard: one self-contained page and one JSON endpoint, served read-only by ``kai scheduler
--dashboard-listen`` and by ``kai dashboard``. Its data comes from ``kai.explain``'s functions."""

from kai.dashboard._data import History, overview
from kai.dashboard._page import CSP, page
from kai.dashboard._server import Overview, serve, split_listen

__all__ = ["CSP", "History", "Overview", "overview", "page", "serve", "split_listen"]
