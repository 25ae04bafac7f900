"""The property-based tests (spec loader and every reader: random bytes, truncations, wrong
encodings) with many more examples than ``make test`` runs, and the outcome in RESULTS.md.

    python benchmarks/property_checks.py [--examples 2000]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from results_md import write_section  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
TESTS = ["tests/platform/test_spec_properties.py", "tests/components/readers/test_reader_properties.py"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=2000, help="examples per property (make test: 25-40)")
    args = parser.parse_args(argv)
    started = time.time()
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], cwd=ROOT,
                         env={**os.environ, "MULTIGRAIN_HYPOTHESIS_EXAMPLES": str(args.examples)},
                         capture_output=True, text=True)
    summary = (re.findall(r"^\d+ (?:passed|failed).*$", out.stdout, re.M) or [out.stdout.strip()[-200:]])[-1]
    print(out.stdout[-3000:])
    write_section("## Property checks", [
        "",
        f"`python benchmarks/property_checks.py --examples {args.examples}` ({time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} CPU cores): {args.examples} examples per property over the spec loader and the "
        f"{12} readers (random bytes, a valid file cut anywhere, wrong encodings): **{summary}** "
        f"in {time.time() - started:.0f} s. A failure would print the smallest falsifying file.",
        ""])
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())
