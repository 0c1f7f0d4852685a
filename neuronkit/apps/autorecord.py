"""The startup hook of ``neuronkit record``: with ``$NEURONKIT_RECORD`` set to a folder, every
Python process records its compiles into that folder once it imports torch, without a change to
its code (coverage.py's ``COVERAGE_PROCESS_START`` is the model).

It is run at interpreter start, by the ``sitecustomize.py`` that ``neuronkit record`` writes to a
folder it puts on ``PYTHONPATH`` (:data:`SITECUSTOMIZE`), or by the ``.pth`` file that
``neuronkit record --install-hook`` writes (:data:`PTH_LINE`; for jobs you cannot wrap, e.g. a
SLURM script that only sets the variable). It imports nothing but the
standard library: a process that never imports torch pays only this module. The recording itself
(``record_process.py``) starts right after ``import torch`` completes.
"""
from __future__ import annotations

import os
from types import ModuleType

from neuronkit.apps.import_hooks import after_import

__all__ = ["ENV", "PTH_LINE", "PTH_NAME", "SITECUSTOMIZE", "install"]

ENV = "NEURONKIT_RECORD"
PTH_NAME = "neuronkit-record.pth"
# one line a .pth file runs at every interpreter start: a dict lookup unless $NEURONKIT_RECORD is set
PTH_LINE = ("import os; os.environ.get('NEURONKIT_RECORD') and "
            "__import__('neuronkit.apps.autorecord', fromlist=['install']).install()\n")
_installed = False


def _start(torch: ModuleType) -> None:
    from neuronkit.apps.record_process import start

    start(os.environ[ENV])


def install() -> None:
    """Record this process into ``$NEURONKIT_RECORD`` once it imports torch (idempotent)."""
    global _installed
    if _installed or not os.environ.get(ENV):
        return
    _installed = True
    after_import("torch", _start)


# ``neuronkit record`` writes this as sitecustomize.py into a folder it puts first on PYTHONPATH:
# it starts the hook, then runs the sitecustomize it hides, if there is one
SITECUSTOMIZE = '''"""neuronkit record: start the recording hook, then the sitecustomize this one hides."""
import os
import sys

if os.environ.get("NEURONKIT_RECORD"):
    try:
        from neuronkit.apps import autorecord
        autorecord.install()
    except Exception as exc:  # e.g. a Python without neuronkit: the command runs unrecorded
        print(f"neuronkit record: not recording {sys.argv[:1]} ({exc!r})", file=sys.stderr)


def _next_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_next_sitecustomize()
'''
