# Sourced by the device scripts (device_gpu.sh, device_sampled_quality.sh), from the
# repository root on a lent machine: its Python lacks the project's pure-Python needs, so
# the carried .whl/ is installed into /tmp/site, and the three source folders are put
# under the `pacekeeper` namespace they install as; $OUT exists afterwards.
OUT=${OUT:-/tmp/pk-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/pk/pacekeeper
for d in detector cupti_ext controller; do ln -sfn "$PWD/$d" "/tmp/pk/pacekeeper/$d"; done
export PYTHONPATH=/tmp/pk:/tmp/site PYTHONUNBUFFERED=1
