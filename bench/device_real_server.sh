#!/usr/bin/env bash
# The time-to-act bench against the real kube-apiserver on a larger machine than the
# 2-core development VM: the issue's rate (1,000 jobs x 256 ranks every 30 s) needs about
# 1.3 cores of kube-apiserver for the reporters' status PATCHes alone (docs/performance.md).
#
# Made for the lent GPU machine (16 cores, Python 3.12 with no registry): run from the
# repository root there, with these carried from the development machine
#   .whl/        the controller's wheels for cp312 (kopf, kubernetes, pydantic, ... as pinned)
#   .kube/kube-apiserver.xz, .kube/etcd.xz   tests/realserver/build.sh's kube-apiserver and
#                Debian's etcd, xz-compressed (the carried tree is limited to 64 MiB)
#   .kube/chart.json  the chart rendered for the bench's values:
#                .venv/bin/python bench/controller_time_to_act.py --server real \
#                    --workers 4 --save-chart .kube/chart.json
# Arguments go to bench/controller_time_to_act.py; results and logs land in $OUT.
set -euo pipefail
OUT=${OUT:-/tmp/pk-out}
mkdir -p "$OUT" /tmp/pk/pacekeeper /tmp/kube/1.20.2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
for d in detector cupti_ext controller; do ln -sfn "$PWD/$d" /tmp/pk/pacekeeper/$d; done
mkdir -p /tmp/kube/1.20.2/bin
for b in kube-apiserver etcd; do
    python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)' ".kube/$b.xz" "/tmp/kube/1.20.2/bin/$b"
    chmod +x "/tmp/kube/1.20.2/bin/$b"
done
export PYTHONPATH=/tmp/pk:/tmp/site PYTHONUNBUFFERED=1
export PACEKEEPER_KUBE_CACHE=/tmp/kube PACEKEEPER_CHART_RENDERED="$PWD/.kube/chart.json"
export PATH="/tmp/kube/1.20.2/bin:$PATH"
# e2e_operator starts the chart's command, `pacekeeper ...`, beside the interpreter.
py=$(python3 -c 'import sys; print(sys.executable)')
printf '#!%s\nfrom pacekeeper.controller.cli.app import main\nmain()\n' "$py" \
    >"$(dirname "$py")/pacekeeper"
chmod +x "$(dirname "$py")/pacekeeper"
nproc
status=0
python3 bench/controller_time_to_act.py --server real --save-logs /tmp/pk-logs "$@" \
    >"$OUT/bench.log" 2>&1 || status=$?
tail -n 60 "$OUT/bench.log"
cp bench/results/controller_time_to_act*.json "$OUT/" 2>/dev/null || true
# What comes back is limited in size and depth: the logs' ends, flattened.
find /tmp/pk-logs -type f -name '*.log' | head -5 | while read -r f; do
    tail -c 4000000 "$f" >"$OUT/$(basename "$(dirname "$f")")-$(basename "$f")"
done
exit "$status"
