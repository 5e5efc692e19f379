#!/usr/bin/env bash
# Prepares, on this machine, what bench/gpu_check.py needs on a machine with a CUDA GPU, where the
# project is not installed and nothing can be fetched: the wheels its image lacks (for its
# Python 3.12; torch, numpy, scipy, safetensors, PyYAML and the rest are there) and the data
# files, into .gpu/ (git-ignored, carried by the device call's `carry`).
#   bash bench/gpu_carry.sh [DATASET ...]        (default: mnist; read from ../shared/data or $VMC_DATA)
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu
mkdir -p .gpu/whl .gpu/data
read -r pydantic core < <(python -c "import pydantic, pydantic_core; print(pydantic.VERSION, pydantic_core.__version__)")
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
python -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .gpu/whl "pydantic==$pydantic" "pydantic-core==$core" annotated-types typing-inspection simpy
data="${VMC_DATA:-../shared/data}"
for d in "${@:-mnist}"; do
  [ -d "$data/$d" ] || { echo "gpu_carry: no data set $data/$d" >&2; exit 2; }
  cp -r "$data/$d" .gpu/data/
done
du -sh .gpu/whl .gpu/data
