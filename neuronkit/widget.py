"""The public home of the dashboard (``from neuronkit.widget import RecompileDashboard``); it lives
with the other views in :mod:`neuronkit.apps.dashboard.widget`."""
from neuronkit.apps.dashboard.widget import RecompileDashboard

__all__ = ["RecompileDashboard"]
