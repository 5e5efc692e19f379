"""The overview at the top of reports/lust_case_study/: the headline claims of the replicate
directories named, in one "paper | ours | replicates that agree" table, from their claims.csv and
provenance.json (:mod:`vmc_sim.reproduction.case_study_analysis.overview`). Regenerate each
directory's report first (``tools/lust_case_study_replicates.py --report-only --out DIR``).

    python tools/lust_case_study_overview.py plan_mnist plan_kfac plan_physics plan_mnist_kfac plan_diagonal
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vmc_sim.reproduction.case_study_analysis.overview import write_overview

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", help="replicate directories under --root, in the order the table lists them")
    p.add_argument("--root", type=Path, default=ROOT / "reports" / "lust_case_study")
    args = p.parse_args(argv)
    bad = [d for d in args.dirs if Path(d).name != d or d in (".", "..")]
    if bad:
        p.error(f"name directories under --root, not paths: {', '.join(bad)}")
    if not args.root.is_dir():
        p.error(f"--root {args.root} is not a directory")
    from vmc_sim.rundir.outputs import OutputRefused, claim_parent

    try:  # overview.md is written into --root: never inside a run or sweep directory
        claim_parent(args.root)
    except OutputRefused as e:
        p.error(str(e))
    print(write_overview(args.root, args.dirs).read_text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
