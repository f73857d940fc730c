"""``make bench``: run every ``bench/bench_*.py`` and every package under ``bench/`` with a
``__main__`` (``bench/peers/``) in turn, each in its own process.

``python -m bench [--quick] [name ...]`` — names are module suffixes or package names, e.g.
``store executor peers``.
Results are printed and kept as JSON under ``bench/results/``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    here = Path(__file__).parent
    modules = sorted(p.stem for p in here.glob("bench_*.py"))
    modules += sorted(p.parent.name for p in here.glob("*/__main__.py"))
    if args.names:
        modules = [m for m in modules if m.removeprefix("bench_") in args.names]
    failed = []
    for module in modules:
        print(f"\n=== {module}", flush=True)
        command = [sys.executable, "-m", f"bench.{module}", *(["--quick"] if args.quick else [])]
        if subprocess.run(command, cwd=here.parent, check=False).returncode != 0:
            failed.append(module)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
