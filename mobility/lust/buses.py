"""LuST's bus lines and stops placed on the rebuilt network, matched by OSM way id.

LuST's edge ids are OSM way ids with a direction and a split suffix: ``-32278#1`` is piece 1 of way
``-32278`` (way ids in the LuST OSM are negative), ``--32278#1`` the same piece driven the other
way. The rebuilt network keeps the way ids and the direction but splits the ways differently
(``-32278`` is one edge in the rebuild, four pieces in LuST), and ``--ramps.guess`` adds
``-AddedOnRampEdge``/``-AddedOffRampEdge`` pieces. So a LuST edge is matched by its *base*
(the id without ``#k`` and without those suffixes):

* a **route** is the sequence of bases it drives through; it is placed as the shortest path
  (for vClass ``bus``) that starts on the first base (at the LuST edge itself if that id exists,
  else at the start of the way), goes through the bases in order, each entered from the previous
  one, and ends on the last base. A base with no edge in the rebuild is skipped over. A route
  with no such path is not placed.
* a **stop** keeps its edge when that id exists; otherwise it goes on the rebuilt edge of the same
  base at the same fraction of the way (LuST's piece ``k`` of the ``N`` pieces seen in LuST's
  files, pieces taken as equally long), its length and lane (or the nearest lane a bus may use).
  A vehicle keeps the stops that lie on its placed route in order; the others are dropped.

Way ids only say something if the OSM the rebuild starts from is the one LuST's network was made
from. Before placing anything, :func:`id_agreement` checks that: of the consecutive ways of
LuST's bus routes (both present in the rebuild), how many meet (an edge of the one leads into an
edge of the other). With matching ids nearly all do; below ``min_agreement`` nothing is placed
and the counts say why. (With the LuST OSM in ``shared/scenarios/lust``, 5 of 593 pairs meet:
that export's JOSM ids were renumbered after LuST was built, and LuST's light ids are not its
signal nodes either, so the lines cannot be placed by id; a LuST clone runs them as they are.)

:func:`place_bus_lines` writes the buses departing in a window and the placed stops, and returns
how many lines, routes, vehicles and stops were placed.
"""

from __future__ import annotations

import heapq
import itertools
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

_BASE = re.compile(r"^(-*\d+)(?:#(\d+))?")


def edge_base(edge_id: str) -> str:
    """The OSM way id with direction of an edge id: ``--31648#5`` -> ``--31648``,
    ``-31616#10-AddedOnRampEdge`` -> ``-31616``; ids of another form are their own base."""
    m = _BASE.match(edge_id)
    return m.group(1) if m else edge_id


def edge_piece(edge_id: str) -> int | None:
    """The split suffix ``k`` of ``W#k`` (None without one)."""
    m = _BASE.match(edge_id)
    return int(m.group(2)) if m and m.group(2) is not None else None


def line_of(vehicle_id: str) -> str:
    """A LuST bus vehicle's line: its id without the trailing ``_<n>`` counter."""
    return vehicle_id.rsplit("_", 1)[0] if "_" in vehicle_id else vehicle_id


class BusNetwork:
    """The rebuilt network seen by bus routes: edges by base, chains, bus-allowed successors."""

    def __init__(self, net: Any, vclass: str = "bus") -> None:
        self.net = net
        self.vclass = vclass
        self.by_base: dict[str, list[Any]] = {}
        for e in net.getEdges():
            if e.allows(vclass) and not e.isSpecial():
                self.by_base.setdefault(edge_base(e.getID()), []).append(e)
        self._chains: dict[str, list[Any]] = {}

    def has(self, edge_id: str) -> bool:
        return self.net.hasEdge(edge_id) and self.net.getEdge(edge_id).allows(self.vclass)

    def successors(self, e: Any) -> list[Any]:
        return [o for o in e.getAllowedOutgoing(self.vclass) if o.allows(self.vclass)]

    def chain(self, base: str) -> list[Any]:
        """The base's edges in driving order (following connections; unconnected pieces last)."""
        if base not in self._chains:
            edges = self.by_base.get(base, [])
            ids = {e.getID() for e in edges}
            has_pred = {o.getID() for e in edges for o in self.successors(e) if o.getID() in ids}
            order: list[Any] = []
            seen: set[str] = set()
            for head in sorted((e for e in edges if e.getID() not in has_pred), key=lambda e: e.getID()) + sorted(
                edges, key=lambda e: e.getID()
            ):
                cur = head
                while cur is not None and cur.getID() not in seen:
                    seen.add(cur.getID())
                    order.append(cur)
                    nxt = [o for o in self.successors(cur) if o.getID() in ids and o.getID() not in seen]
                    cur = nxt[0] if nxt else None
            self._chains[base] = order
        return self._chains[base]

    def route(self, lust_edges: Sequence[str]) -> list[str] | None:
        """The placed route (edge ids) of a LuST route, or None (see the module docstring)."""
        seq = base_sequence(lust_edges)
        present = [i for i, b in enumerate(seq) if self.by_base.get(b)]
        if not present:
            return None
        # layer index in the sequence of present bases; a missing base is skipped over
        layers = [seq[i] for i in present]
        first, last = lust_edges[0], lust_edges[-1]
        starts = [self.net.getEdge(first)] if self.has(first) else self.chain(layers[0])[:1]
        ends = {last} if self.has(last) else {e.getID() for e in self.chain(layers[-1])[-1:]}
        dist: dict[tuple[str, int], float] = {}
        prev: dict[tuple[str, int], tuple[str, int] | None] = {}
        heap: list[tuple[float, str, int]] = []
        for s in starts:
            key = (s.getID(), 0)
            dist[key] = s.getLength()
            prev[key] = None
            heapq.heappush(heap, (s.getLength(), s.getID(), 0))
        goal = None
        while heap:
            d, eid, i = heapq.heappop(heap)
            if d > dist.get((eid, i), float("inf")):
                continue
            if i == len(layers) - 1 and eid in ends:
                goal = (eid, i)
                break
            for o in self.successors(self.net.getEdge(eid)):
                ob = edge_base(o.getID())
                if ob == layers[i]:
                    j = i
                elif i + 1 < len(layers) and ob == layers[i + 1]:
                    j = i + 1
                else:
                    continue
                nd = d + o.getLength()
                if nd < dist.get((o.getID(), j), float("inf")):
                    dist[(o.getID(), j)] = nd
                    prev[(o.getID(), j)] = (eid, i)
                    heapq.heappush(heap, (nd, o.getID(), j))
        if goal is None:
            return None
        path: list[str] = []
        node: tuple[str, int] | None = goal
        while node is not None:
            path.append(node[0])
            node = prev[node]
        return path[::-1]

    def place_stop(
        self, lane_id: str, start: float, end: float, pieces: dict[str, int]
    ) -> tuple[str, int, float, float] | None:
        """(edge, lane index, startPos, endPos) of a LuST stop on the rebuild, or None."""
        edge_id, _, lane_txt = lane_id.rpartition("_")
        lane_index = int(lane_txt) if lane_txt.isdigit() else 0
        length = max(1.0, end - start)
        if self.has(edge_id):
            edge, offset = self.net.getEdge(edge_id), start
        else:
            base = edge_base(edge_id)
            chain = self.chain(base)
            if not chain:
                return None
            n = max(pieces.get(base.lstrip("-"), 0), (edge_piece(edge_id) or 0) + 1, 1)
            k = edge_piece(edge_id) or 0
            if base.startswith("--"):
                k = n - 1 - k  # the reverse direction drives the pieces from the last to the first
            total = sum(e.getLength() for e in chain)
            target = (k / n) * total + min(start, total / n)
            edge, offset = chain[-1], target - sum(e.getLength() for e in chain[:-1])
            acc = 0.0
            for e in chain:
                if target <= acc + e.getLength():
                    edge, offset = e, target - acc
                    break
                acc += e.getLength()
        lanes = edge.getLanes()
        allowed = [i for i, ln in enumerate(lanes) if ln.allows(self.vclass)]
        if not allowed:
            return None
        idx = min(allowed, key=lambda i: abs(i - lane_index))
        elen = edge.getLength()
        length = min(length, elen)
        s = min(max(0.0, offset), elen - length)
        return edge.getID(), idx, round(s, 2), round(s + length, 2)


def base_sequence(edges: Sequence[str]) -> list[str]:
    """The bases a route drives through, consecutive repeats removed."""
    seq: list[str] = []
    for e in edges:
        b = edge_base(e)
        if not seq or seq[-1] != b:
            seq.append(b)
    return seq


def id_agreement(bn: BusNetwork, routes: Iterable[Sequence[str]]) -> tuple[int, int]:
    """(pairs that meet, pairs checked): consecutive ways of the routes, both in the rebuild,
    where an edge of the first leads into an edge of the second."""
    pairs: set[tuple[str, str]] = set()
    for r in routes:
        seq = [b for b in base_sequence(r) if bn.by_base.get(b)]
        pairs.update(itertools.pairwise(seq))
    met = sum(1 for a, b in pairs if any(edge_base(o.getID()) == b for e in bn.by_base[a] for o in bn.successors(e)))
    return met, len(pairs)


def _way_pieces(ids: Iterable[str]) -> dict[str, int]:
    """Number of pieces of each way seen in LuST ids (max ``k`` + 1, both directions together)."""
    out: dict[str, int] = {}
    for e in ids:
        k = edge_piece(e)
        way = edge_base(e).lstrip("-")
        out[way] = max(out.get(way, 0), (k or 0) + 1)
    return out


def place_bus_lines(
    net: Any,
    buslines: str | Path,
    busstops: str | Path,
    routes_out: str | Path,
    stops_out: str | Path,
    begin: float = 0.0,
    end: float = 86400.0,
    min_agreement: float = 0.5,
) -> dict[str, Any]:
    """Write the LuST buses departing in ``[begin, end)`` (``routes_out``) and the placed stops
    (``stops_out``) for the rebuilt network ``net`` (a sumolib net); returns the counts.

    Nothing is placed when fewer than ``min_agreement`` of the way pairs checked by
    :func:`id_agreement` meet (the counts then carry ``refused``)."""
    bn = BusNetwork(net)
    stops_xml = list(ET.parse(busstops).iter("busStop"))
    vehicles = []
    for _, el in ET.iterparse(buslines, events=("end",)):
        if el.tag == "vehicle":
            route = el.find("route")
            vehicles.append(
                {
                    "id": el.get("id", ""),
                    "type": el.get("type", "bus"),
                    "depart": float(el.get("depart", "0")),
                    "edges": route.get("edges", "").split() if route is not None else [],
                    "stops": [(s.get("busStop"), s.get("duration", "20")) for s in el.findall("stop")],
                    "attrs": {k: el.get(k) for k in ("departLane", "departPos", "arrivalPos", "color") if el.get(k)},
                }
            )
            el.clear()
    met, checked = id_agreement(bn, {tuple(v["edges"]) for v in vehicles})
    agreement = {"way_pairs_checked": checked, "way_pairs_meeting": met}
    if checked == 0 or met < min_agreement * checked:
        vehicles_window = sum(1 for v in vehicles if begin <= v["depart"] < end)
        for path, root in ((routes_out, "routes"), (stops_out, "additional")):
            Path(path).write_text(f"<{root}>\n</{root}>\n")
        return {
            "lines": len({line_of(v["id"]) for v in vehicles}),
            "lines_placed": 0,
            "routes": len({tuple(v["edges"]) for v in vehicles}),
            "routes_placed": 0,
            "stops": len(stops_xml),
            "stops_placed": 0,
            "stops_served": 0,
            "stops_exact": sum(1 for s in stops_xml if bn.has(s.get("lane", "").rpartition("_")[0])),
            "vehicles_in_window": vehicles_window,
            "vehicles_placed": 0,
            "vehicle_stops_kept": 0,
            "vehicle_stops_dropped": 0,
            "window": [begin, end],
            **agreement,
            "refused": (
                f"LuST's way ids do not match this network: only {met} of {checked} consecutive ways "
                f"of its bus routes meet here (need {min_agreement:.0%})"
            ),
        }
    pieces = _way_pieces(
        [s.get("lane", "").rpartition("_")[0] for s in stops_xml] + [e for v in vehicles for e in v["edges"]]
    )
    placed_stops: dict[str, tuple[str, int, float, float]] = {}
    for s in stops_xml:
        p = bn.place_stop(s.get("lane", ""), float(s.get("startPos", 0)), float(s.get("endPos", 10)), pieces)
        if p is not None:
            placed_stops[s.get("id", "")] = p
    route_cache: dict[tuple[str, ...], list[str] | None] = {}
    lines_all: set[str] = set()
    lines_placed: set[str] = set()
    stops_used: set[str] = set()
    n_window = n_placed = stops_dropped = stops_kept = 0
    out_rows = []
    for v in vehicles:
        lines_all.add(line_of(v["id"]))
        key = tuple(v["edges"])
        if key not in route_cache:
            route_cache[key] = bn.route(v["edges"]) if v["edges"] else None
        if not begin <= v["depart"] < end:
            continue
        n_window += 1
        route = route_cache[key]
        if route is None:
            continue
        position: dict[str, list[int]] = {}
        for i, e in enumerate(route):
            position.setdefault(e, []).append(i)
        kept, at = [], 0
        for stop_id, duration in v["stops"]:
            p = placed_stops.get(stop_id)
            idx = [i for i in position.get(p[0], []) if i >= at] if p else []
            if not idx:
                stops_dropped += 1
                continue
            at = idx[0]
            kept.append((stop_id, duration))
        stops_kept += len(kept)
        stops_used.update(s for s, _ in kept)
        n_placed += 1
        lines_placed.add(line_of(v["id"]))
        out_rows.append((v, route, kept))
    with open(routes_out, "w", encoding="utf-8") as f:
        f.write("<routes>\n")
        for v, route, kept in sorted(out_rows, key=lambda r: (r[0]["depart"], r[0]["id"])):
            attrs = "".join(f" {k}={quoteattr(str(val))}" for k, val in v["attrs"].items())
            f.write(
                f'    <vehicle id={quoteattr(v["id"])} type={quoteattr(v["type"])} depart="{v["depart"]:.2f}"{attrs}>\n'
                f'        <route edges="{" ".join(route)}"/>\n'
            )
            for stop_id, duration in kept:
                f.write(f"        <stop busStop={quoteattr(stop_id)} duration={quoteattr(duration)}/>\n")
            f.write("    </vehicle>\n")
        f.write("</routes>\n")
    with open(stops_out, "w", encoding="utf-8") as f:
        f.write("<additional>\n")
        for sid in sorted(placed_stops):
            edge, lane, start, stop = placed_stops[sid]
            f.write(
                f'    <busStop id={quoteattr(sid)} lane="{edge}_{lane}" startPos="{start:.2f}" endPos="{stop:.2f}"/>\n'
            )
        f.write("</additional>\n")
    routes_total = len(route_cache)
    return {
        "lines": len(lines_all),
        "lines_placed": len(lines_placed),
        "routes": routes_total,
        "routes_placed": sum(1 for r in route_cache.values() if r is not None),
        "stops": len(stops_xml),
        "stops_placed": len(placed_stops),
        "stops_served": len(stops_used),
        "stops_exact": sum(1 for s in stops_xml if bn.has(s.get("lane", "").rpartition("_")[0])),
        "vehicles_in_window": n_window,
        "vehicles_placed": n_placed,
        "vehicle_stops_kept": stops_kept,
        "vehicle_stops_dropped": stops_dropped,
        "window": [begin, end],
        **agreement,
    }
