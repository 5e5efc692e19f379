"""Left-turn bays for the LuST rebuild: a netconvert edge patch written from the network itself.

The LuST OSM export has no turn lanes, so on its wide primaries (three lanes a direction,
90 km/h) netconvert lets left turns and U-turns share the leftmost lane with straight traffic.
At priority junctions those turners wait for gaps in three opposing lanes and block the lane
behind them; in the 07:00-09:00 peak that lane jams until vehicles teleport (measured: 82 of
106 teleports on ways -30314 and -32710, 64 of them on the leftmost lane).

:func:`find_turn_bays` picks, in a network built without the patch, every edge of the chosen
ways (or of every way) with at least ``min_lanes`` lanes whose leftmost lane carries straight
traffic and a left turn (optionally only before junctions of given types), and
:func:`write_turn_bays` writes a plain-XML edge file that splits each such edge ``length`` m
before its end and adds one lane there: the new leftmost lane (the bay) takes the left turns and
U-turns, the lanes beside it go straight (netconvert's own connection guessing does this once the
lane exists; at lights it also gives the bay a protected left phase unless
``--tls.left-green.time`` is 0). Given to netconvert with ``--edge-files`` next to the OSM.

Measured on the full network (bench/RESULTS.md): the bays do not bring the teleports
under 50, with or without netconvert's protected left phases (``LustConfig.left_green_time``);
the corridor's jam is straight traffic backing up from its lights. Off by default.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mobility.lust.buses import edge_base

BAY_SUFFIX = "-LeftTurnBay"
"""Appended to an edge's id to name its bay section (the part before the split keeps the id)."""
LEFT = frozenset({"l", "L"})


@dataclass(frozen=True)
class TurnBay:
    """One edge to split: its id, its lanes, its length (m) and the bay's length (m, from its end)."""

    edge: str
    lanes: int
    edge_length: float
    bay_length: float


def way_matches(edge_id: str, ways: Sequence[str] | None) -> bool:
    """Whether an edge belongs to one of the OSM ``ways`` in either direction (``None``: any way).

    netconvert names a way's edges ``W#k`` and its reverse ``-W#k``; LuST's way ids are negative,
    so way ``-30314`` has edges ``-30314#6`` and ``--30314#6``."""
    if ways is None:
        return True
    base = edge_base(edge_id)
    return base in ways or (base.startswith("-") and base[1:] in ways)


def find_turn_bays(
    net_file: str | Path,
    ways: Sequence[str] | None,
    *,
    min_lanes: int = 3,
    junction_types: Sequence[str] | None = None,
    length: float = 40.0,
    min_length: float = 15.0,
    keep: float = 10.0,
) -> tuple[list[TurnBay], int]:
    """Edges that get a bay, and how many candidates were too short for one.

    A candidate is an edge of ``ways`` (``None``: all) with ``min_lanes`` or more lanes, ending at a
    junction of one of ``junction_types`` (SUMO's node types, ``priority``, ``traffic_light``, ...;
    ``None``: any), whose leftmost lane has both a straight and a left connection. Its bay is ``length`` m, shortened to
    leave ``keep`` m of the edge before it; an edge where that leaves less than ``min_length`` m
    of bay is counted as too short and left as it is."""
    import sumolib

    net = sumolib.net.readNet(str(net_file), withInternal=False)
    bays: list[TurnBay] = []
    short = 0
    for e in sorted(net.getEdges(), key=lambda x: x.getID()):
        if e.getLaneNumber() < min_lanes or not way_matches(e.getID(), ways):
            continue
        if junction_types is not None and e.getToNode().getType() not in junction_types:
            continue
        dirs = {c.getDirection() for c in e.getLanes()[-1].getOutgoing()}
        if "s" not in dirs or not dirs & LEFT:
            continue
        bay = min(length, e.getLength() - keep)
        if bay < min_length:
            short += 1
            continue
        bays.append(TurnBay(e.getID(), e.getLaneNumber(), round(e.getLength(), 2), round(bay, 1)))
    return bays, short


def write_turn_bays(bays: Sequence[TurnBay], path: str | Path) -> Path:
    """Write the netconvert edge patch: each edge split ``bay_length`` m before its end, the section
    after the split (``<edge><BAY_SUFFIX>``) one lane wider."""
    root = ET.Element("edges")
    for b in bays:
        el = ET.SubElement(root, "edge", {"id": b.edge})
        ET.SubElement(
            el,
            "split",
            {
                "pos": f"{-b.bay_length:g}",
                "lanes": " ".join(str(i) for i in range(b.lanes + 1)),
                "idBefore": b.edge,
                "idAfter": b.edge + BAY_SUFFIX,
            },
        )
    ET.indent(root)
    p = Path(path)
    p.write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
    return p
