"""Startup cost of ``neuronkit record``'s hook for a process that never imports torch.

Runs ``python -c "import json"`` N times each way, interleaved, in one run: plain; under the hook
with ``$NEURONKIT_RECORD`` set (what every process of ``neuronkit record`` pays); with the .pth
line of ``--install-hook`` present but the variable unset (what every process of an environment
with the hook installed pays). Prints the median wall time of each and the differences.

    python bench/record_hook_startup.py --runs 40
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neuronkit.apps.autorecord import PTH_LINE, SITECUSTOMIZE

CODE = "import json"


def timed(env: dict[str, str], code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        site, pth_site, logs = Path(tmp, "site"), Path(tmp, "pth"), Path(tmp, "logs")
        site.mkdir()
        pth_site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (pth_site / "neuronkit-record.pth").write_text(PTH_LINE)
        plain = {k: v for k, v in os.environ.items() if k != "NEURONKIT_RECORD"}
        hooked = {**plain, "NEURONKIT_RECORD": str(logs),
                  "PYTHONPATH": os.pathsep.join(filter(None, [str(site), plain.get("PYTHONPATH")]))}
        pth_code = f"import site; site.addsitedir({str(pth_site)!r}); {CODE}"
        times: dict[str, list[float]] = {"plain": [], "record hook, variable set": [],
                                         "plain + addsitedir": [], ".pth hook, variable unset": []}
        for _ in range(runs):  # interleaved: the machine's noise falls on every variant alike
            times["plain"].append(timed(plain, CODE))
            times["record hook, variable set"].append(timed(hooked, CODE))
            times["plain + addsitedir"].append(timed(plain, f"import site; site.addsitedir({tmp!r}); {CODE}"))
            times[".pth hook, variable unset"].append(timed(plain, pth_code))
        wrote = list(logs.glob("*.jsonl")) if logs.exists() else []
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"python -c {CODE!r}, {runs} runs each, median wall ms:")
    for name, ms in med.items():
        print(f"  {name:28s} {ms:7.1f}")
    print(f"record hook (variable set) costs {med['record hook, variable set'] - med['plain']:+.1f} ms "
          f"({med['record hook, variable set'] / med['plain']:.2f}x); logs written: {len(wrote)}")
    print(f".pth hook (variable unset) costs "
          f"{med['.pth hook, variable unset'] - med['plain + addsitedir']:+.1f} ms")


if __name__ == "__main__":
    main()
