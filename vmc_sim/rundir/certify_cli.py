"""``vmc certify RUN``: the command line of :mod:`vmc_sim.rundir.certify`, its parser built
without torch."""

from __future__ import annotations

import argparse

from .directory import CERTIFICATE_FILE as CERTIFICATE
from .directory import CERTIFY_TOLERANCE as DEFAULT_TOLERANCE


def _cmd(args: argparse.Namespace) -> int:
    from .certify import certify_run  # here: building the parser imports no torch

    cert = certify_run(args.run, args.tolerance, args.method, args.out, args.force)
    return 0 if cert["passed"] else 1


def add_certify_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vmc certify`` subcommand."""
    c = sub.add_parser(
        "certify",
        help="prove every model a run released equals a fresh fit on its members (certificate.json)",
        description="Recompute, from the run's verified contributions, the model a fresh fit on each record's "
        "members gives, compare it with the model the run released, and write RUN/certificate.json. Exits 1 "
        "naming the record when a method that claims exactness differs by more than the tolerance or an input "
        "fails verification.",
    )
    c.add_argument("run", help="a completed run directory of vmc run")
    c.add_argument(
        "--tolerance", type=float, default=DEFAULT_TOLERANCE, help="largest absolute difference per value that passes"
    )
    c.add_argument("--method", action="append", metavar="NAME", help="only this method (repeatable)")
    c.add_argument("--out", help=f"output JSON (default: RUN/{CERTIFICATE}, written under the run's lock)")
    c.add_argument("--force", action="store_true", help="replace --out if it exists")
    c.set_defaults(func=_cmd)
