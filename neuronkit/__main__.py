"""``python -m neuronkit`` runs the ``neuronkit`` command line."""
from .cli import main

raise SystemExit(main())
