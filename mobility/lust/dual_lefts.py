"""Second left-turn lanes at the LuST rebuild's lights: a netconvert connection patch written from the network.

The LuST OSM export has no turn lanes, so at a light netconvert lets one lane, the leftmost, turn
left even where three lanes arrive and the road turned into has two or more. On the corridor of
ways -30314 and -32710 that one lane carries most of the approach: at light -19038, 90 % of the
1,985 routes on ``--30314#6`` turn left there, the left lane backs up past the straight lanes'
entries and the 07:00-09:00 peak ends in teleports on the leftmost lanes upstream.

:func:`find_dual_lefts` picks, in a network built without the patch, every edge of the chosen
ways (or of every way) with at least ``min_lanes`` lanes that ends at a traffic light, whose
only left-turning lane is the leftmost and whose left turn enters a road of two or more lanes
while leaving its rightmost lane free (the leftmost may enter one lane or fan out into several).
:func:`write_dual_lefts` writes a plain-XML connection file that keeps every connection such an
edge has and adds one: the lane beside the leftmost turns left too, into the lane right of the
rightmost one the leftmost enters (the turning paths do not cross; the lane still goes straight
as well). netconvert drops its guessed connections of an edge named
in a connection file, which is why the patch repeats the edge's existing ones. Given to
netconvert with ``--connection-files`` next to the OSM; the lights' programs are recomputed.

Measured on the full network, 07:00-09:00 with the calibration run (bench/RESULTS.md;
106 teleports and 10.5 m/s at 08:00 without it): the 31 approaches of ways -30314 and -32710
give 24 teleports and 11.1 m/s, the 133 approaches of every way 13 teleports and 10.5 m/s, every
other target met in both. On by default at every way (``LustConfig.dual_lefts``): the rule is the
network's own (three lanes in, one turning left into a wider road), not a list of ways picked from
where the teleports were.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mobility.lust.turn_bays import LEFT, way_matches


@dataclass(frozen=True)
class DualLeft:
    """One approach to widen: its id, the connections it has (from lane, to edge, to lane) and the one added."""

    edge: str
    connections: tuple[tuple[int, str, int], ...]
    added: tuple[int, str, int]


def find_dual_lefts(net_file: str | Path, ways: Sequence[str] | None, *, min_lanes: int = 3) -> list[DualLeft]:
    """Approaches that get a second left-turn lane (see the module docstring for the rule)."""
    import sumolib

    net = sumolib.net.readNet(str(net_file), withInternal=False)
    out: list[DualLeft] = []
    for e in sorted(net.getEdges(), key=lambda x: x.getID()):
        n = e.getLaneNumber()
        if n < min_lanes or e.getToNode().getType() != "traffic_light" or not way_matches(e.getID(), ways):
            continue
        lanes = e.getLanes()
        turning = [lane.getIndex() for lane in lanes if any(c.getDirection() in LEFT for c in lane.getOutgoing())]
        if turning != [n - 1]:
            continue
        lefts = [c for c in lanes[-1].getOutgoing() if c.getDirection() == "l"]
        if not lefts or len({c.getTo().getID() for c in lefts}) != 1:
            continue
        target, to_lane = lefts[0].getTo(), min(c.getToLane().getIndex() for c in lefts)
        if target.getLaneNumber() < 2 or to_lane < 1:
            continue
        conns = tuple(
            (lane.getIndex(), c.getTo().getID(), c.getToLane().getIndex()) for lane in lanes for c in lane.getOutgoing()
        )
        out.append(DualLeft(e.getID(), conns, (n - 2, target.getID(), to_lane - 1)))
    return out


def write_dual_lefts(approaches: Sequence[DualLeft], path: str | Path) -> Path:
    """Write the netconvert connection patch: each approach's connections plus its added left turn."""
    root = ET.Element("connections")
    for a in approaches:
        for from_lane, to, to_lane in (*a.connections, a.added):
            ET.SubElement(
                root, "connection", {"from": a.edge, "to": to, "fromLane": str(from_lane), "toLane": str(to_lane)}
            )
    ET.indent(root)
    p = Path(path)
    p.write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
    return p
