"""The density sweep on the idealised link, on the city's radio, and on the city's radio without
the embedded city's buildings (a probability standing in for them), side by side from the three
sweeps' ``results.csv``: per density and method, the simulated time, the bytes, the failed
transfers, the withdrawals and the final accuracy. Prints a Markdown table.

    python bench/radio_rerun.py LOS/results.csv CITY/results.csv BARE/results.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

COLUMNS = (("sim_time_s", "sim time s", ".2f"), ("total_MB", "MB", ".2f"), ("failed_transfers", "failed", "d"))


def read(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(path, newline="") as f:
        return {(r["density"], r["method"]): r for r in csv.DictReader(f)}


def cell(row: dict[str, str], key: str, spec: str) -> str:
    value = row.get(key, "")
    if value == "":
        return "-"
    return format(int(value) if spec == "d" else float(value), spec)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("los", type=Path)
    p.add_argument("city", type=Path)
    p.add_argument("bare", type=Path)
    args = p.parse_args(argv)
    runs = [read(args.los), read(args.city), read(args.bare)]
    head = "| density | method | requests |"
    rule = "|---:|---|---:|"
    for _, label, _ in COLUMNS:
        head += f" {label}: LOS / city / no buildings |"
        rule += "---|"
    head += " withdrawn | final acc % |"
    rule += "---|---|"
    print(head)
    print(rule)
    for key in sorted(runs[0], key=lambda k: (float(k[0]), k[1])):
        rows = [r[key] for r in runs]
        line = f"| {key[0]} | {key[1]} | {rows[0]['requests']} |"
        for name, _, spec in COLUMNS:
            line += " " + " / ".join(cell(r, name, spec) for r in rows) + " |"
        line += " " + " / ".join(cell(r, "withdrawn", "d") for r in rows) + " |"
        line += (
            " "
            + " / ".join(
                format(100 * float(r["final_accuracy"]), ".2f") if r["final_accuracy"] else "withdrawn" for r in rows
            )
            + " |"
        )
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
