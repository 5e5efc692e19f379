"""The LuST road network rebuilt from its OSM export with ``netconvert`` (cached), and its statistics.

Options (:data:`NETCONVERT_OPTIONS`), measured with SUMO 1.28 on the LuST OSM:

* ``--ramps.guess`` adds the acceleration and deceleration lanes of the motorway ramps: 2,370
  junctions / 5,965 edges / 905.2 km with 76 edges of four lanes, against LuST's 2,365 / 5,959 /
  929.5 km and 87 (netconvert's defaults: 2,316 / 5,911 / 903.4 km and 21). Both have 16 dead ends.
* ``--tls.join`` clusters the lights of one crossing under one id (``joinedS_...``) as LuST does:
  200 traffic lights (203 without it; LuST 201). LuST's own light ids are not found in the
  rebuild (1 of 201): the OSM export's ids were renumbered after LuST was built (see
  :mod:`mobility.lust.buses`).
* lights get actuated programs (they change no junction or edge and roughly halve the queues of
  netconvert's fixed-time default).

``--junctions.join``, ``--roundabouts.guess`` and ``--tls.guess-signals`` were measured to make
the flow slightly worse and are not used. ``LustConfig.netconvert_args`` adds or replaces options.
With ``LustConfig.turn_bays`` the build converts twice: the network without the patch, from it the
left-turn bay patch (``turn_bays.edg.xml``, :mod:`mobility.lust.turn_bays`), then the network
with the patch as an ``--edge-files`` input; the bay settings are part of the cache key and the
manifest names the patch, its hash and the edges it splits. ``LustConfig.dual_lefts`` (on by
default) works the same way with one more conversion: the second-left-lane patch
(``dual_lefts.con.xml``, :mod:`mobility.lust.dual_lefts`) is found in the network built so far and
given as a ``--connection-files`` input; it takes the 07:00-09:00 teleports from 106 to 13.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from mobility.cache import cached_build, file_sha256, strip_generated_header
from mobility.lust.config import (
    LUST_BUILDER_VERSION,
    LUST_TLL_NAME,
    LUST_VTYPES_NAME,
    PUBLISHED_NETWORK,
    LustConfig,
)
from mobility.lust.dual_lefts import find_dual_lefts, write_dual_lefts
from mobility.lust.turn_bays import find_turn_bays, write_turn_bays
from mobility.sumo import (
    merge_args,
    options_dict,
    run_command,
    sumo_binary,
    sumo_version,
)

NETCONVERT_OPTIONS: tuple[str, ...] = (
    "--ramps.guess",
    "true",
    "--tls.join",
    "true",
    "--tls.default-type",
    "actuated",
)


def netconvert_options(cfg: LustConfig) -> list[str]:
    """:data:`NETCONVERT_OPTIONS`, ``cfg.left_green_time`` as ``--tls.left-green.time`` when set,
    then ``cfg.netconvert_args`` merged on top."""
    left = [] if cfg.left_green_time is None else ["--tls.left-green.time", f"{float(cfg.left_green_time):g}"]
    return merge_args(NETCONVERT_OPTIONS, left, cfg.netconvert_args)


TURN_BAY_FILE = "turn_bays.edg.xml"


def turn_bay_params(cfg: LustConfig) -> dict[str, Any] | None:
    """The bay settings that shape the patch (for the cache key), None when bays are off."""
    if not cfg.turn_bays:
        return None
    return {
        "ways": cfg.turn_bay_ways,
        "length": float(cfg.turn_bay_length),
        "min_lanes": cfg.turn_bay_min_lanes,
        "junctions": cfg.turn_bay_junctions,
    }


DUAL_LEFT_FILE = "dual_lefts.con.xml"


def dual_left_params(cfg: LustConfig) -> dict[str, Any] | None:
    """The second-left-lane settings that shape the patch (for the cache key), None when off."""
    if not cfg.dual_lefts:
        return None
    return {"ways": cfg.dual_left_ways, "min_lanes": cfg.dual_left_min_lanes}


def with_input_file(options: list[str], option: str, path: str | Path) -> list[str]:
    """``options`` with ``path`` added to netconvert's ``--<option>`` file list (comma-joined to any given)."""
    given = options_dict(options).get(option)
    files = f"{given},{path}" if given else str(path)
    return merge_args(options, [f"--{option}", files])


def network_stats(net_file: str | Path, lust_tll: str | Path | None = None) -> dict[str, Any]:
    """Junctions (non-internal nodes), edges (non-internal), total edge length (km), edges by lane
    count (``four_lane_edges``: four or more), dead ends, traffic lights, and (given LuST's
    ``tll.static.xml``) how many of LuST's light ids exist in this network."""
    import sumolib

    net = sumolib.net.readNet(str(net_file), withInternal=False)
    nodes = [n for n in net.getNodes() if n.getType() != "internal"]
    edges = net.getEdges()
    lanes: dict[int, int] = {}
    for e in edges:
        lanes[e.getLaneNumber()] = lanes.get(e.getLaneNumber(), 0) + 1
    tls_ids = {t.getID() for t in net.getTrafficLights()}
    out: dict[str, Any] = {
        "nodes": len(nodes),
        "edges": len(edges),
        "length_km": round(sum(e.getLength() for e in edges) / 1000.0, 1),
        "four_lane_edges": sum(n for k, n in lanes.items() if k >= 4),
        "edges_by_lanes": {str(k): lanes[k] for k in sorted(lanes)},
        "dead_ends": sum(1 for n in nodes if n.getType() == "dead_end"),
        "traffic_lights": len(tls_ids),
    }
    if lust_tll is not None and Path(lust_tll).is_file():
        lust_ids = {el.get("id") for el in ET.parse(lust_tll).iter("tlLogic")}
        out["lust_traffic_lights"] = len(lust_ids)
        out["lust_traffic_light_ids_found"] = len(lust_ids & tls_ids)
    return out


def clip_osm(src: str | Path, dst: str | Path, bbox: tuple[float, float, float, float]) -> dict[str, int]:
    """Write the part of an OSM file inside ``bbox`` = (min lon, min lat, max lon, max lat) to ``dst``
    (gzipped if it ends in ``.gz``): the nodes inside, and of each way its longest run of
    consecutive nodes inside, under its own id and tags (for small test networks)."""
    import gzip

    opener = gzip.open if str(src).endswith(".gz") else open
    lon0, lat0, lon1, lat1 = bbox
    nodes: dict[str, ET.Element] = {}
    ways: list[ET.Element] = []
    with opener(src, "rb") as f:
        for _, el in ET.iterparse(f, events=("end",)):
            if el.tag == "node":
                if lon0 <= float(el.get("lon", "nan")) <= lon1 and lat0 <= float(el.get("lat", "nan")) <= lat1:
                    nodes[el.get("id", "")] = el
            elif el.tag == "way":
                ways.append(el)
    kept_ways: list[ET.Element] = []
    used: set[str] = set()
    for w in ways:
        runs: list[list[str]] = []
        cur: list[str] = []
        for nd in w.findall("nd"):
            ref = nd.get("ref")
            if ref is not None and ref in nodes:
                cur.append(ref)
            else:
                runs.append(cur)
                cur = []
        runs.append(cur)
        best = max(runs, key=len)
        if len(best) < 2:
            continue
        out = ET.Element("way", {k: v for k, v in w.attrib.items()})
        for ref in best:
            ET.SubElement(out, "nd", {"ref": ref})
        for tag in w.findall("tag"):
            ET.SubElement(out, "tag", dict(tag.attrib))
        kept_ways.append(out)
        used.update(best)
    root = ET.Element("osm", {"version": "0.6", "generator": "vmc-sim clip_osm"})
    ET.SubElement(root, "bounds", {"minlat": str(lat0), "minlon": str(lon0), "maxlat": str(lat1), "maxlon": str(lon1)})
    for nid, el in nodes.items():
        if nid in used or el.find("tag") is not None:
            root.append(el)
    root.extend(kept_ways)
    data = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    if str(dst).endswith(".gz"):
        with gzip.GzipFile(dst, "wb", mtime=0) as g:
            g.write(data)
    else:
        Path(dst).write_bytes(data)
    return {"nodes": sum(1 for n in nodes if n in used), "ways": len(kept_ways)}


def build_lust_network(config: LustConfig | None = None, *, force: bool = False) -> tuple[Path, dict[str, Any]]:
    """Convert the LuST OSM with netconvert (cached); returns the net file and its manifest."""
    cfg = config or LustConfig()
    osm = cfg.resolve_osm()
    options = netconvert_options(cfg)
    params: dict[str, Any] = {
        "osm_sha256": file_sha256(osm),
        "netconvert": options,
        "builder": LUST_BUILDER_VERSION,
        "sumo": sumo_version(),
    }
    bay_params = turn_bay_params(cfg)
    if bay_params is not None:
        params["turn_bays"] = bay_params
    dual_params = dual_left_params(cfg)
    if dual_params is not None:
        params["dual_lefts"] = dual_params

    def _convert(out: Path, net: Path, opts: list[str]) -> None:
        run_command(
            [str(sumo_binary("netconvert")), "--osm-files", str(osm), "-o", str(net), *opts, "--no-warnings", "true"],
            what="netconvert (LuST OSM)",
            cwd=out,
        )

    def _build(out: Path) -> dict[str, Any]:
        net = out / "lust.net.xml"
        extra: dict[str, Any] = {}
        used = options
        _convert(out, net, options)
        if bay_params is not None:
            bays, short = find_turn_bays(
                net,
                cfg.turn_bay_ways,
                min_lanes=cfg.turn_bay_min_lanes,
                junction_types=cfg.turn_bay_junctions,
                length=cfg.turn_bay_length,
            )
            patch = write_turn_bays(bays, out / TURN_BAY_FILE)
            used = with_input_file(options, "edge-files", patch.name)
            _convert(out, net, used)
            extra["turn_bays"] = {
                **bay_params,
                "file": patch.name,
                "sha256": file_sha256(patch),
                "edges": len(bays),
                "too_short": short,
                "bay_m": round(sum(b.bay_length for b in bays), 1),
            }
        if dual_params is not None:
            approaches = find_dual_lefts(net, cfg.dual_left_ways, min_lanes=cfg.dual_left_min_lanes)
            patch = write_dual_lefts(approaches, out / DUAL_LEFT_FILE)
            if approaches:  # an empty patch changes nothing: no second conversion
                used = with_input_file(used, "connection-files", patch.name)
                _convert(out, net, used)
            extra["dual_lefts"] = {
                **dual_params,
                "file": patch.name,
                "sha256": file_sha256(patch),
                "approaches": len(approaches),
            }
        strip_generated_header(net)
        vtypes = osm.parent / LUST_VTYPES_NAME
        if vtypes.is_file():
            shutil.copyfile(vtypes, out / LUST_VTYPES_NAME)
        stats = network_stats(net, osm.parent / LUST_TLL_NAME)
        return {
            "osm": str(osm),
            "netconvert": used,
            "network": {"file": net.name, "sha256": file_sha256(net), **stats, **extra, "published": PUBLISHED_NETWORK},
        }

    directory, manifest = cached_build("lust-net", params, _build, root=cfg.cache_dir, force=force)
    return directory / "lust.net.xml", manifest
