#!/bin/bash
# Start-up: the default `vmc run` against a bare `import torch`, alternating, with the bytecode
# written first (as an installed package has it). Prints each time and the ratio of the medians.
# Usage: bash bench/startup.sh [REPEATS]   (figures in bench/RESULTS.md, "Throughput ...", Start-up)
set -euo pipefail
n=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
unset PYTHONDONTWRITEBYTECODE
cd "$work"
vmc run --out "$work/first" --quiet >/dev/null # writes the bytecode
for i in $(seq "$n"); do
    /usr/bin/time -f "torch %e" -a -o "$work/times" python -c "import torch"
    /usr/bin/time -f "vmc %e" -a -o "$work/times" vmc run --out "$work/run$i" --quiet >/dev/null
done
cat "$work/times"
python - "$work/times" <<'PY'
import statistics
import sys

times: dict[str, list[float]] = {}
for line in open(sys.argv[1]):
    name, seconds = line.split()
    times.setdefault(name, []).append(float(seconds))
ratio = statistics.median(times["vmc"]) / statistics.median(times["torch"])
print(f"vmc run / import torch (medians): {ratio:.2f}")
PY
