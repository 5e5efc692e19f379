"""``vmc audit RUN``: the command line of :mod:`vmc_sim.rundir.audit` (membership inference on a
run's models against its removed clients), its parser built without torch."""

from __future__ import annotations

import argparse

from .directory import AUDIT_FILE, MODELS_FILE


def _cmd(args: argparse.Namespace) -> int:
    from fl_core.mia import AttackKind  # here: building the parser imports no torch
    from fl_core.mia_audit import AuditConfig

    from .audit import audit_run

    attacks = tuple(AttackKind) if args.attack == "all" else (AttackKind(args.attack),)
    config = AuditConfig(
        attacks=attacks,
        max_samples=args.max_samples,
        match_labels=not args.no_label_match,
        num_shadows=args.shadows,
        shadow_epochs=args.shadow_epochs,
    )
    audit_run(
        args.run,
        clients=args.client,
        methods=args.method,
        checkpoint=args.checkpoint,
        config=config,
        seed=args.seed,
        out=args.out,
        force=args.force,
    )
    return 0


def add_audit_parser(sub: argparse._SubParsersAction) -> None:
    """The ``vmc audit`` subcommand."""
    a = sub.add_parser("audit", help="membership inference on a run's models against its removed clients")
    a.add_argument("run", help="run directory (of vmc oneshot or vmc run)")
    a.add_argument(
        "--client",
        action="append",
        metavar="ID",
        help="audit this client (repeatable; default: every client removed and not back at the end)",
    )
    a.add_argument("--attack", choices=["loss", "confidence", "shadow", "all"], default="all")
    a.add_argument("--method", action="append", metavar="NAME", help="only this method's model (repeatable)")
    a.add_argument("--checkpoint", default=MODELS_FILE, help="safetensors file in RUN holding <method>.weights")
    a.add_argument("--max-samples", type=int, default=2000, help="members (and as many non-members) at most")
    a.add_argument("--shadows", type=int, default=4, help="shadow models")
    a.add_argument("--shadow-epochs", type=int, default=None, help="shadow training epochs (default: the run's)")
    a.add_argument("--no-label-match", action="store_true", help="draw non-members without matching labels")
    a.add_argument("--seed", type=int, default=None, help="audit seed (default: the run's seed)")
    a.add_argument("--out", help=f"output JSON (default: RUN/{AUDIT_FILE}, written under the run's lock)")
    a.add_argument("--force", action="store_true", help="replace --out if it exists")
    a.set_defaults(func=_cmd)
