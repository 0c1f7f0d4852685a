"""The public home of the dashboard (``from neuronkit.widget import RecompileDashboard``); it lives
with the other views in :mod:`neuronkit.views.widget`."""
from .views.widget import RecompileDashboard

__all__ = ["RecompileDashboard"]
