"""``python -m neuronkit`` runs the ``neuronkit`` command line."""
from .views.cli import main

raise SystemExit(main())
