# The pacekeeper controller image: `pacekeeper operator run` and the rest of the
# `pacekeeper` command, with only the controller's dependencies (the core plus the
# `kubernetes` extra, pinned by constraints.txt): no torch, no Ray, no CUDA.
#
# Two stages on one base. `build` makes a virtual environment in /opt/pacekeeper;
# `runtime` copies only that environment onto a fresh copy of the base and runs it as
# UID/GID 65532. Nothing is written outside /tmp at run time (bytecode is compiled at
# build time), so a read-only root filesystem works.
#
# BASE_IMAGE is any Debian-based CPython 3.11+ image with `python3 -m venv`. The default
# is pinned by digest: the official python:3.11-slim-bookworm image index of 25 Aug 2026
# (Python 3.11.16), as docker-library/repo-info lists it (repos/python/remote/
# 3.11-slim-bookworm.md). Move it on purpose, for the base's security updates
# (docs/install.md says how). `make image` builds this same file offline, with a Debian
# bookworm root filesystem made by debootstrap as the base (tests/image/build.sh).
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1
# Set only where the build's network re-signs TLS: the path of a CA bundle mounted for
# the build (tests/image/build.sh mounts the host's). It never lands in a layer.
ARG PIP_CERT
WORKDIR /src
# The build backend, pinned; it stays in this stage (setuptools builds wheels itself).
ARG SETUPTOOLS_VERSION=84.2.1
COPY pyproject.toml constraints.txt ./
# Dependencies in a layer of their own, read from pyproject.toml: a source change does
# not reinstall them.
RUN python3 -m venv /opt/pacekeeper \
 && python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["kubernetes"]))' > requirements.txt \
 && /opt/pacekeeper/bin/pip install -q -c constraints.txt -r requirements.txt \
      "setuptools==${SETUPTOOLS_VERSION}"
COPY setup.py README.md ./
COPY detector/ detector/
COPY cupti_ext/ cupti_ext/
COPY controller/ controller/
# No compiler in this stage: the optional CUPTI record extension is skipped (the
# controller never loads it). Then the build tools and pip leave the environment.
RUN /opt/pacekeeper/bin/pip install -q --no-deps --no-build-isolation . \
 && /opt/pacekeeper/bin/pip uninstall -q -y setuptools pip \
 && /opt/pacekeeper/bin/python -c 'import importlib.util as u; bad = [m for m in ("torch", "ray", "cupti") if u.find_spec(m)]; assert not bad, bad' \
 && /opt/pacekeeper/bin/pacekeeper --help > /dev/null

FROM ${BASE_IMAGE} AS runtime
ARG BASE_IMAGE
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="pacekeeper-controller" \
      org.opencontainers.image.description="pacekeeper's Kubernetes remediation controller" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
# A name for UID 65532 ("nonroot", as distroless images call it), for tools that look
# the user up. Its home does not exist: nothing is written there.
RUN echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'nonroot:x:65532:' >> /etc/group
COPY --from=build /opt/pacekeeper /opt/pacekeeper
ENV PATH=/opt/pacekeeper/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/home/nonroot \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TMPDIR=/tmp
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["pacekeeper"]
CMD ["operator", "run", "--policy", "/etc/pacekeeper/policy.yaml"]
