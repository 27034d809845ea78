#!/usr/bin/env bash
# What bench/device_gpu.sh needs carried to the lent GPU machine, downloaded here (that
# machine reaches no registry): .whl/ with the cp312 wheels its Python installs, and,
# with --cupti, .cupti/ with the other CUPTI libraries of the probe and cupti134 steps.
# Both folders are ignored by git (.gitignore, .git/info/exclude). From the repository
# root: bash bench/fetch_device_wheels.sh [--cupti]
set -euo pipefail
get() {  # cp312 wheels for manylinux x86_64; pip matches a manylinux_2_N tag exactly
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_39_x86_64 --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
        -d "$@"
}
mkdir -p .whl
get .whl cupti-python==13.0.1 nvidia-resiliency-ext==0.7.0 pydantic==2.14.4 \
    pydantic-core==2.50.5 annotated-types==0.8.0 typing-extensions==4.16.0 \
    typing-inspection==0.4.5
ls .whl
if [ "${1:-}" = --cupti ]; then
    grep -qx '.cupti/' .git/info/exclude 2>/dev/null || echo '.cupti/' >> .git/info/exclude
    tmp=$(mktemp -d)
    for v in 13.4.92:134 13.5.25:135; do
        python3 -m pip download -q --no-deps -d "$tmp/${v#*:}" "nvidia-cuda-cupti==${v%:*}"
        mkdir -p ".cupti/${v#*:}"
        unzip -o -j -q "$tmp/${v#*:}"/*.whl '*/libcupti.so.13' -d ".cupti/${v#*:}"
    done
    mkdir -p .cupti/w134
    get .cupti/w134 cupti-python==13.4.0 cuda-pathfinder==1.9.1 pyelftools==0.33
    rm -rf "$tmp"
    ls .cupti/*
fi
