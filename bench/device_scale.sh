#!/usr/bin/env bash
# The report path at scale (issue 42) on a lent machine's CPU cores (the device tool),
# from the repository root: what needs more cores than the 2-core VM has. Carry `.whl`
# (bash bench/fetch_device_wheels.sh). Steps, in order given:
#   culprit  every culprit world on both report paths, those CI skips for want of cores
#            (DDP at 10%, 8 ranks) included; log in $OUT/culprit.log
#   worlds   bench/detector_scale.py on real gloo worlds of $WORLDS ranks (default
#            4 8 16 32 64 128), flat against the tree, and the fitted model
#   rank0    bench/detector_scale.py's rank-0 part at 16,384 and 131,072 ranks, with
#            $KERNELS kernels a rank (default 0 200), flat against the tree
# Results: $OUT/detector_scale_$NAME*.json (NAME default h100host) and the logs.
# Usage: bash bench/device_scale.sh STEP...
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONPATH="$PYTHONPATH:$PWD/examples"
name=detector_scale_${NAME:-h100host}
echo "cores $(nproc --all), commit $(git rev-parse --short HEAD 2>/dev/null)"
rc=0
for step in "$@"; do
    echo "=== $step $(date -u +%H:%M:%S)"
    case $step in
    culprit)
        python3 -m pytest -c /dev/null --rootdir . -p no:cacheprovider -ra \
            -W ignore::pytest.PytestConfigWarning tests/multiprocess/test_culprit_victims.py \
            -v >"$OUT/culprit.log" 2>&1 || rc=1
        grep -E "PASS|FAIL|SKIP|ERROR|passed|failed" "$OUT/culprit.log" | tail -12
        ;;
    worlds)
        # shellcheck disable=SC2086
        python3 bench/detector_scale.py --worlds ${WORLDS:-4 8 16 32 64 128} --reports 4 \
            --name "$name" >"$OUT/worlds.log" 2>&1 || rc=1
        tail -30 "$OUT/worlds.log"
        cp bench/results/"$name".json bench/results/"$name"_model.json "$OUT"/ 2>/dev/null
        ;;
    rank0)
        # shellcheck disable=SC2086
        python3 bench/detector_scale.py --worlds --rank0-at 16384 131072 \
            --kernels ${KERNELS:-0 200} --name "$name" >"$OUT/rank0.log" 2>&1 || rc=1
        tail -14 "$OUT/rank0.log"
        cp bench/results/"$name"_rank0.json "$OUT"/ 2>/dev/null
        ;;
    *) echo "unknown step $step"; rc=2 ;;
    esac
done
exit $rc
