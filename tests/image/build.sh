#!/usr/bin/env bash
# Builds the controller image from the repository's Dockerfile, offline apart from
# Debian's package archive and PyPI: no image registry is needed.
#
# The Dockerfile's base (BASE_IMAGE, a python slim image elsewhere) is replaced by a
# Debian bookworm root filesystem that debootstrap makes from Debian's packages (python3,
# python3-venv, ca-certificates), imported as `localhost/pacekeeper-base:<suite>-<key>`.
# buildah then builds the Dockerfile on it; podman runs the result (tests/k8s/test_image.py).
# Both come from Debian's packages, with runc: crun refuses this kind of machine's hybrid
# cgroups.
#
#   bash tests/image/build.sh            build (or find cached) localhost/pacekeeper-controller:<version>
#   bash tests/image/build.sh ref        print the image built from the current inputs; exit 1 if none
#   bash tests/image/build.sh push DEST  push it (e.g. REGISTRY/pacekeeper-controller:0.1.0) and
#                                        print DEST's repository@sha256 digest to pin in the chart
#   bash tests/image/build.sh podman ... podman on the image store below (run, inspect, save, ...)
#
# Cached in ${PACEKEEPER_IMAGE_CACHE:-$HOME/.cache/pacekeeper-image}: the container store
# (storage/), and images tagged by a hash of every input (Dockerfile, .dockerignore, this
# script, pyproject.toml, setup.py, README.md, constraints.txt, detector/, cupti_ext/,
# controller/), so an unchanged tree builds nothing. Needs root (debootstrap, a rootful
# store); installs buildah, podman, runc and debootstrap with apt when they are missing.
set -euo pipefail

readonly SUITE=bookworm
readonly BASE_PACKAGES=python3,python3-venv,ca-certificates
readonly BASE_RECIPE_VERSION=1 # bump when base_rootfs changes what it makes
readonly REPOSITORY=localhost/pacekeeper-controller
readonly BASE_REPOSITORY=localhost/pacekeeper-base
readonly CACHE="${PACEKEEPER_IMAGE_CACHE:-${HOME:-/root}/.cache/pacekeeper-image}"
readonly TOOLS=(buildah podman runc debootstrap)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
readonly ROOT
readonly INPUTS=(Dockerfile .dockerignore tests/image/build.sh pyproject.toml setup.py README.md
  constraints.txt detector cupti_ext controller)
# The store, and runc: every buildah and podman call goes through these.
readonly STORE=(--root "${CACHE}/storage" --runroot "${CACHE}/run")

started_all=$(date +%s)

log() { echo "build.sh: $*" >&2; }

# Runs "$@" as one named step and prints how long it took.
step() {
  local name=$1
  shift
  local t0
  t0=$(date +%s)
  log "${name} ..."
  "$@"
  log "${name} took $(($(date +%s) - t0)) s"
}

version() {
  sed -n 's/^version = "\(.*\)"$/\1/p' "${ROOT}/pyproject.toml" | head -n 1
}

require_root() {
  if [[ $(id -u) -ne 0 ]]; then
    log "needs root (debootstrap and a rootful container store): run it as root or with sudo"
    exit 2
  fi
}

ensure_tools() {
  local missing=() t
  for t in "${TOOLS[@]}"; do
    command -v "${t}" >/dev/null 2>&1 || missing+=("${t}")
  done
  if ((${#missing[@]})); then
    step "apt update" apt-get update -q
    step "apt install ${missing[*]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

# The Debian mirror apt already uses for ${SUITE} (deb822 .sources or one-line lists), so
# a machine with its own mirror or proxy keeps it; debootstrap's default otherwise.
debian_mirror() {
  python3 - "${SUITE}" <<'PY'
import glob, sys
suite = sys.argv[1]
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in open(path, encoding="utf-8").read().split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if ":" in line and not line.startswith((" ", "#")):
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.split()
        if "deb" in fields.get("types", []) and suite in fields.get("suites", []) \
                and "main" in fields.get("components", []) and fields.get("uris"):
            print(fields["uris"][0])
            sys.exit(0)
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        continue
    for line in lines:
        words = [w for w in line.split("#")[0].split() if not w.startswith("[")]
        if len(words) >= 4 and words[0] == "deb" and words[2] == suite and "main" in words[3:]:
            print(words[1])
            sys.exit(0)
PY
}

# A hash of the named files and folders' contents and paths (caches and builds left out).
inputs_hash() {
  (
    cd "${ROOT}"
    find "${INPUTS[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*.so' \
      -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    echo "base ${1}"
  ) | sha256sum | cut -c1-16
}

base_key() {
  echo "${SUITE} ${BASE_PACKAGES} ${BASE_RECIPE_VERSION}" | sha256sum | cut -c1-12
}

image_exists() {
  buildah "${STORE[@]}" inspect --type image "$1" >/dev/null 2>&1
}

base_rootfs() {
  local base=$1 work="${CACHE}/work"
  local rootfs="${work}/rootfs" mirror
  mirror=$(debian_mirror)
  rm -rf "${work}"
  mkdir -p "${work}"
  log "debootstrap ${SUITE} from ${mirror:-the default mirror of debootstrap}"
  # shellcheck disable=SC2086 # an empty mirror must vanish, not be an empty argument
  debootstrap --variant=minbase --include="${BASE_PACKAGES}" "${SUITE}" "${rootfs}" ${mirror} \
    >"${work}/debootstrap.log" 2>&1 || {
    tail -n 30 "${work}/debootstrap.log" >&2
    return 1
  }
  # What a slim image leaves out: package lists and caches, documentation, translations.
  rm -rf "${rootfs}"/var/lib/apt/lists/* "${rootfs}"/var/cache/apt/* "${rootfs}"/var/log/* \
    "${rootfs}"/usr/share/doc/* "${rootfs}"/usr/share/man/* "${rootfs}"/usr/share/info/* \
    "${rootfs}"/usr/share/locale/*
  tar -C "${rootfs}" --numeric-owner -c . |
    podman "${STORE[@]}" import -q --change 'CMD ["python3"]' - "${base}" >/dev/null
  rm -rf "${work}"
}

build_image() {
  local base=$1 target=$2 version=$3
  local args=(--build-arg "BASE_IMAGE=${base}" --build-arg "VERSION=${version}")
  # A machine whose network re-signs TLS trusts its own CA bundle: lend it to the build's
  # pip (a mount, never a layer). Harmless elsewhere: it is the host's trust store.
  if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    args+=(--volume /etc/ssl/certs/ca-certificates.crt:/run/pacekeeper-host-ca.crt:ro
      --build-arg PIP_CERT=/run/pacekeeper-host-ca.crt)
  fi
  if [[ -n ${PIP_INDEX_URL:-} ]]; then
    args+=(--build-arg "PIP_INDEX_URL=${PIP_INDEX_URL}")
  fi
  # --layers: a source change reuses the dependency layer. Host network: PyPI, as the host
  # reaches it.
  buildah "${STORE[@]}" bud --runtime "$(command -v runc)" --layers --network host \
    "${args[@]}" -f "${ROOT}/Dockerfile" -t "${target}" "${ROOT}" >"${CACHE}/bud.log" 2>&1 || {
    tail -n 40 "${CACHE}/bud.log" >&2
    return 1
  }
}

# Older builds of this repository's image (now tagged input-* only): their layers are
# freed; the base and the build stage's cached layers are kept.
prune_old() {
  local keep=$1 ref
  while read -r ref; do
    [[ ${ref} == "${keep}" ]] || buildah "${STORE[@]}" rmi "${ref}" >/dev/null 2>&1 || true
  done < <(buildah "${STORE[@]}" images --format '{{.Name}}:{{.Tag}}' | grep -F "${REPOSITORY}:input-")
}

cmd_build() {
  require_root
  mkdir -p "${CACHE}"
  exec 9>"${CACHE}/.lock"
  flock -w 1800 9 # two builds at once would race on one store
  ensure_tools

  local version base key target
  version=$(version)
  base="${BASE_REPOSITORY}:${SUITE}-$(base_key)"
  key=$(inputs_hash "${base}")
  target="${REPOSITORY}:input-${key}"
  if image_exists "${target}"; then
    log "cached: ${target}"
  else
    image_exists "${base}" || step "base image ${base} (debootstrap)" base_rootfs "${base}"
    step "image ${target} (buildah bud)" build_image "${base}" "${target}" "${version}"
  fi
  buildah "${STORE[@]}" tag "${target}" "${REPOSITORY}:${version}"
  prune_old "${target}"
  log "done in $(($(date +%s) - started_all)) s: ${REPOSITORY}:${version} (${target})"
  echo "${REPOSITORY}:${version}"
}

cmd_ref() {
  local base target
  base="${BASE_REPOSITORY}:${SUITE}-$(base_key)"
  target="${REPOSITORY}:input-$(inputs_hash "${base}")"
  if image_exists "${target}"; then
    echo "${target}"
  else
    log "no image built from the current tree; run: make image"
    return 1
  fi
}

cmd_push() {
  local dest=${1:?usage: build.sh push REGISTRY/REPOSITORY:TAG}
  local source digest_file repo=${dest#docker://}
  # The repository without the tag (a registry's :port is not a tag).
  [[ ${repo##*/} == *:* ]] && repo=${repo%:*}
  source=$(cmd_ref)
  digest_file=$(mktemp)
  podman "${STORE[@]}" push --digestfile "${digest_file}" "${source}" "docker://${dest#docker://}"
  # The digest pins what was pushed: set controller.image.digest to it.
  echo "${repo}@$(cat "${digest_file}")"
  rm -f "${digest_file}"
}

case "${1:-build}" in
  build) cmd_build ;;
  ref) cmd_ref ;;
  push) cmd_push "${@:2}" ;;
  podman) exec podman "${STORE[@]}" --runtime "$(command -v runc)" "${@:2}" ;;
  *)
    log "unknown command '$1' (build | ref | push DEST | podman ARGS...)"
    exit 2
    ;;
esac
