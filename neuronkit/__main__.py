"""``python -m neuronkit`` runs the ``neuronkit`` command line."""
from neuronkit.apps.cli import main

raise SystemExit(main())
