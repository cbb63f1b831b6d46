"""Parsing the largest YAML file denv accepts (MAX_YAML_BYTES of fleet hosts) with denv's
round-trip parser against PyYAML's C-less safe loader on the same bytes.

    .venv/bin/python benchmarks/yaml_parse.py [--repeats 5] [--json]

The figure is the median wall time over `--repeats` runs, the two interleaved. `--json` prints
one JSON list of objects: parser, median_s, runs. (Moved out of the tests: a time is a
benchmark's to report, not a test's to bound.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import yaml

from reconciler.spec.yamlio import MAX_YAML_BYTES, parse_yaml

LINE = "  - { name: host-0000, address: h.example, gpus: 8 }\n"
DATA = ("hosts:\n" + LINE * ((MAX_YAML_BYTES - 8) // len(LINE))).encode()


def denv_parse() -> None:
    doc, problem = parse_yaml("fleets/big.yaml", DATA)
    assert doc is not None and problem is None


def pyyaml_parse() -> None:
    assert yaml.load(DATA, Loader=yaml.SafeLoader)


PARSERS: dict[str, Callable[[], None]] = {"denv parse_yaml": denv_parse, "PyYAML": pyyaml_parse}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in PARSERS}
    for _ in range(args.repeats):
        for name, parse in PARSERS.items():
            start = time.perf_counter()
            parse()
            times[name].append(time.perf_counter() - start)
    rows = [
        {"parser": name, "median_s": round(statistics.median(t), 3), "runs": len(t)}
        for name, t in times.items()
    ]
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{len(DATA):,} bytes")
    for row in rows:
        print(f"{row['parser']:<16} {row['median_s']:.3f} s (median of {row['runs']})")


if __name__ == "__main__":
    main()
