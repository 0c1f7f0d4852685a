"""The recompile dashboard: its state (session, worker, status line, runs, compiles in progress:
no drawing, testable without a browser) and the ipywidget built from panels. Public name:
``neuronkit.widget``."""
