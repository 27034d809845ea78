#!/usr/bin/env bash
# One chunk of the sampled detection-quality space (docs/detection-quality.md, "Sampled
# noise and faults") on a lent machine's CPU cores (the device tool), from the repository
# root. That machine has numpy, rich and PyYAML but not pydantic: carry `.whl` (bash
# bench/fetch_device_wheels.sh fetches it). Scenario indices FIRST .. FIRST+RUNS-1, one
# process a core, each judged by docs/policies/enforce-recommended.yaml and NVRx's rules;
# writes $OUT/dq_FIRST.json, its table $OUT/dq_FIRST.md and the log $OUT/dq_FIRST.log.
# Chunks of one space merge here into the whole table:
#   .venv/bin/python bench/detection_quality.py --merge dq_0.json dq_240.json \
#       --out bench/results/detection_quality_space.json
# Usage: bash bench/device_sampled_quality.sh FIRST RUNS [extra bench arguments]
set -uo pipefail
first=${1:?first scenario index}
runs=${2:?number of scenarios}
shift 2
source "$(dirname "$0")/device_env.sh"
# One process a core. The count is taken before OMP_NUM_THREADS is set: GNU nproc
# honours that variable, and read after it a 16-core host ran one process (2026-12-05).
jobs=${JOBS:-$(nproc --all)}
# numpy's own threads would only contend with the pool's.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
echo "cores $jobs, indices $first..$((first + runs - 1)), commit $(git rev-parse --short HEAD 2>/dev/null)"
python3 bench/detection_quality.py --policy docs/policies/enforce-recommended.yaml \
    --jobs "$jobs" --first "$first" --runs "$runs" --out "$OUT/dq_$first.json" "$@" \
    >"$OUT/dq_$first.log" 2>&1
rc=$?
grep -E "PASS|FAIL|wrote|Error|error" "$OUT/dq_$first.log" | tail -20
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('wall', d['wallS'], 's, cpu', d['cpuS'], 's')" \
    "$OUT/dq_$first.json" 2>/dev/null
exit $rc
