#!/usr/bin/env bash
# The GPU tier and the GPU benches on a lent GPU machine (the device tool), from the
# repository root, as the figures in docs/performance.md were made. The machine has
# torch with CUDA but none of the project's other dependencies and no registry, so what
# it needs travels along (name these in the device call's ``carry``):
#   .whl/    cupti-python 13.0.1, nvidia-resiliency-ext 0.7.0, pydantic, pydantic-core,
#            annotated-types, typing-extensions, typing-inspection (cp312 wheels)
#   cupti_ext/_native*.so   the compiled record path, built here by `make venv`
#   .cupti/  (probe only) other CUPTI libraries: 134/libcupti.so.13 and
#            135/libcupti.so.13 from the nvidia-cuda-cupti 13.4.92 and 13.5.25 wheels,
#            w134/ cupti-python 13.4.0 with cuda-pathfinder and pyelftools
# `bash bench/fetch_device_wheels.sh [--cupti]` downloads both folders here.
# Usage: bash bench/device_gpu.sh STEP... where STEP is
#   tests     the whole GPU tier (tests/gpu), log in $OUT/gpu_tests.log
#   report    generate_report, ours against NVRx ($REPORT_MODES, $REPORT_ROUNDS rounds)
#   paired    the paired-block step overhead ($PAIRED_MODES)
#   interleaved  overhead at the defaults by per-step interleaving ($INTERLEAVED_PAIRS)
#   policies  generate_report under each CUPTI buffer policy ($POLICIES: threads:zero[:modes],
#             modes +-separated, else $REPORT_MODES; one process per policy and round, the
#             policies taking turns): every process's JSON in $OUT/report_policies.json. CUPTI's
#             attributes are the process's: NVRx after ours in one process inherits ours
#   overhead_policies  overhead at the defaults (interleaved) under each of $POLICIES
#             (threads:zero), one process per policy and round, taking turns; every
#             process's JSON in $OUT/overhead_policies.json
#   probe     can two CUPTI clients trace side by side, with each CUPTI library carried
#   cupti134  the backend's and the shared-CUPTI GPU tests with CUPTI 13.4, cupti-python 13.4
#   nvrx      NVRx's own straggler tests, imports swapped (tests/nvrx_own_tests.py), from the
#             NVRx checkout in $NVRX_CHECKOUT (default .nvrx/: its tests/straggler, carried);
#             log in $OUT/nvrx_tests.log, JUnit XML in $OUT/nvrx_junit.xml; $NVRX_TIMEOUT_S
#             bounds the step, $NVRX_TEST_TIMEOUT_S each test, $NVRX_ARGS adds pytest
#             arguments (-n 4: pytest-xdist, on the machine)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
PYTEST=(python3 -m pytest -c /dev/null --rootdir . -p no:cacheprovider -ra
        -W ignore::pytest.PytestConfigWarning --timeout 300)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' \
    | tee -a "$OUT/machine.txt"

merge_runs() {  # FOLDER NAME: every process's JSON under $OUT/FOLDER in $OUT/NAME.json, the
    # folder removed (the device tool returns eight files at most)
    python3 -c 'import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
runs = {p.parent.name: json.loads(p.read_text()) for p in sorted(out.glob(sys.argv[2] + "/*/gpu_overhead.json"))}
(out / (sys.argv[3] + ".json")).write_text(json.dumps(runs, indent=1))' "$OUT" "$1" "$2" && rm -rf "${OUT:?}/$1"
}

for step in "$@"; do
    echo "=== $step $(date -u +%H:%M:%S)"
    case $step in
    tests)
        "${PYTEST[@]}" tests/gpu -v -s 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "PASS|FAIL|SKIP|ERROR|passed|failed"
        ;;
    report)
        python3 bench/gpu_overhead.py --out "$OUT" --workloads "" --modes "" --diagnostics "" \
            --skip-decode --report-workloads "${REPORT_WORKLOADS:-gemm_bound,launch_bound}" \
            --report-modes "${REPORT_MODES:-ours_i1,ours_i1_by_markers,ours_default,nvrx}" \
            --report-repeats "${REPORT_REPEATS:-8}" --report-rounds "${REPORT_ROUNDS:-4}" \
            2>&1 | tail -40
        ;;
    policies)
        for round in $(seq 1 "${POLICY_ROUNDS:-3}"); do
            for policy in ${POLICIES:-per-thread:cupti one:cupti per-thread:ours one:ours}; do
                IFS=: read -r threads zero modes <<< "$policy"
                modes=${modes:-${REPORT_MODES:-ours_default,nvrx}}
                dir="$OUT/policies/${threads}_${zero}_${modes//[+,]/_}_r$round"
                mkdir -p "$dir"
                PACEKEEPER_CUPTI_THREAD_BUFFERS=$threads PACEKEEPER_CUPTI_ZERO=$zero \
                    python3 bench/gpu_overhead.py --out "$dir" --workloads "" --modes "" \
                    --diagnostics "" --skip-decode --report-workloads "${REPORT_WORKLOADS:-launch_bound}" \
                    --report-modes "${modes//+/,}" --report-repeats "${REPORT_REPEATS:-8}" \
                    --report-rounds 1 2>&1 | grep -E "^generate_report" | cut -c1-400 | sed "s/^/$policy r$round /"
            done
        done
        merge_runs policies report_policies
        ;;
    overhead_policies)
        for round in $(seq 1 "${POLICY_ROUNDS:-2}"); do
            for policy in ${POLICIES:-per-thread:cupti one:ours}; do
                IFS=: read -r threads zero _ <<< "$policy"
                dir="$OUT/opolicies/${threads}_${zero}_r$round"
                mkdir -p "$dir"
                PACEKEEPER_CUPTI_THREAD_BUFFERS=$threads PACEKEEPER_CUPTI_ZERO=$zero \
                    python3 bench/gpu_overhead.py --out "$dir" --diagnostics "" --skip-decode \
                    --report-modes "" --workloads "" --modes "" \
                    --interleaved-pairs "${INTERLEAVED_PAIRS:-3000}" 2>&1 \
                    | grep -o '"aa": {[^}]*}\|"ours_default": {[^}]*}' | cut -c1-300 | sed "s/^/$policy r$round /"
            done
        done
        merge_runs opolicies overhead_policies
        ;;
    paired)
        python3 bench/gpu_overhead.py --out "$OUT" --diagnostics "" --skip-decode \
            --report-modes "" --workloads launch_bound,gemm_bound \
            --modes "${PAIRED_MODES:-aa,ours_i1,ours_i1_by_markers,ours_default}" \
            --pairs "${PAIRS:-10}" --gemm-pairs "${GEMM_PAIRS:-6}" 2>&1 | tail -30
        ;;
    interleaved)
        python3 bench/gpu_overhead.py --out "$OUT" --diagnostics "" --skip-decode \
            --report-modes "" --workloads "" --modes "" \
            --interleaved-pairs "${INTERLEAVED_PAIRS:-3000}" 2>&1 | tail -30
        ;;
    probe)
        [ "${PROBE_IMAGE:-1}" = 1 ] && python3 bench/cupti_subscribers_probe.py \
            --out "$OUT" --name subscribers_13_0.json
        for v in ${PROBE_LIBS:-134 135}; do
            [ -f ".cupti/$v/libcupti.so.13" ] && python3 bench/cupti_subscribers_probe.py \
                --out "$OUT" --lib ".cupti/$v/libcupti.so.13" --name "subscribers_${v}.json"
        done
        ;;
    cupti134)
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --target /tmp/site134 .cupti/w134/*.whl || exit 1
        PYTHONPATH=/tmp/pk:/tmp/site134:/tmp/site LD_PRELOAD="$PWD/.cupti/134/libcupti.so.13" \
            "${PYTEST[@]}" -v tests/gpu/test_cupti_backend.py tests/gpu/test_cupti_subscribers.py -s 2>&1 | tee "$OUT/gpu_tests_cupti_13_4.log" | tail -45
        ;;
    nvrx)
        python3 -m pip list 2>/dev/null | grep -i -E "^(pytest|cupti|cuda|nvidia-cuda-cupti|numpy)" \
            | tee -a "$OUT/machine.txt"
        timeout "${NVRX_TIMEOUT_S:-360}" python3 tests/nvrx_own_tests.py "${NVRX_CHECKOUT:-.nvrx}" \
            -rA -v --timeout "${NVRX_TEST_TIMEOUT_S:-60}" ${NVRX_ARGS:-} --durations 12 \
            --junitxml "$OUT/nvrx_junit.xml" 2>&1 \
            | tee "$OUT/nvrx_tests.log" | grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed|s (call|setup) "
        ;;
    *) echo "unknown step $step"; exit 2 ;;
    esac
done
