#!/usr/bin/env bash
# Builds the real-server tier's Kubernetes binaries (kube-apiserver, kube-controller-manager
# v1.20.2) from Debian's `kubernetes` source package with bullseye's Go 1.15, and installs
# Debian's etcd. Offline apart from Debian's package archive: nothing else is downloaded.
#
# Idempotent: when the cached binaries and etcd are already there it does nothing. The
# cache lives outside the repository:
#   ${PACEKEEPER_KUBE_CACHE:-$HOME/.cache/pacekeeper-kube}/1.20.2/bin/
# Set PACEKEEPER_KUBE_KEEP_BUILD=1 to keep the source tree and Go build cache afterwards
# (about 2 GB; only useful when changing this script).
#
# Why these versions: Debian ships the 1.20.2 tree with its vendor/ folder, and Go 1.15 is
# the toolchain it was released with; newer Go needs source patches (docs/testing.md).
set -euo pipefail

readonly KUBE_VERSION=1.20.2
readonly DEB_SOURCE_VERSION=1.20.5+really1.20.2
readonly GO_ROOT=/usr/lib/go-1.15
readonly APT_LIST=/etc/apt/sources.list.d/pacekeeper-kube.list
readonly CACHE_ROOT="${PACEKEEPER_KUBE_CACHE:-${HOME:-/root}/.cache/pacekeeper-kube}"
readonly CACHE="${CACHE_ROOT}/${KUBE_VERSION}"
readonly BIN="${CACHE}/bin"
readonly WORK="${CACHE}/work"
readonly BINARIES=(kube-apiserver kube-controller-manager)

started_all=$(date +%s)

# Runs "$@" as one named step and prints how long it took.
step() {
  local name=$1
  shift
  local t0
  t0=$(date +%s)
  echo "build.sh: ${name} ..."
  "$@"
  echo "build.sh: ${name} took $(($(date +%s) - t0)) s"
}

binaries_present() {
  local b
  for b in "${BINARIES[@]}"; do
    [[ -x "${BIN}/${b}" ]] || return 1
  done
}

etcd_present() {
  command -v etcd >/dev/null 2>&1
}

# The journey test (test_journey_e2e.py) runs the docs' kubectl commands with the kubectl a
# user has: the one on PATH (this image ships 1.32), else Debian's kubernetes-client.
kubectl_present() {
  command -v kubectl >/dev/null 2>&1
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  else
    sudo "$@"
  fi
}

# Bullseye for golang-1.15-*, and bookworm's source index for the kubernetes source
# package. Bookworm's own versions stay preferred: bullseye's are older.
apt_sources() {
  local want
  want=$(
    cat <<'LIST'
# Written by pacekeeper's tests/realserver/build.sh.
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
LIST
  )
  if [[ ! -f ${APT_LIST} ]] || [[ "$(cat "${APT_LIST}")" != "${want}" ]]; then
    printf '%s\n' "${want}" | as_root tee "${APT_LIST}" >/dev/null
  fi
  as_root apt-get update -q
}

apt_install() {
  local packages=(etcd-server)
  if ! kubectl_present; then
    packages+=(kubernetes-client)
  fi
  if ! binaries_present; then
    packages+=(golang-1.15-go golang-1.15-src rsync make)
  fi
  # policy-rc.d is not touched: etcd-server's maintainer scripts cannot start a
  # service without an init system, and a running system etcd would not clash
  # anyway (cluster.py picks free ports).
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${packages[@]}"
}

fetch_source() {
  rm -rf "${WORK}"
  mkdir -p "${WORK}/download"
  # apt checks the tarball against the signed source index; _apt may write here.
  chown _apt "${WORK}/download" 2>/dev/null || true
  (cd "${WORK}/download" && apt-get source --download-only -q kubernetes)
  local orig="${WORK}/download/kubernetes_${DEB_SOURCE_VERSION}.orig.tar.gz"
  if [[ ! -f ${orig} ]]; then
    echo "build.sh: Debian's kubernetes source is no longer ${DEB_SOURCE_VERSION}:" >&2
    ls "${WORK}/download" >&2
    return 1
  fi
  # The upstream (orig) tree is enough: Debian's patches only touch kubectl's output.
  tar -xzf "${orig}" -C "${WORK}"
  rm -rf "${WORK}/download"
}

build_binaries() {
  local src="${WORK}/kubernetes-${KUBE_VERSION}"
  local what=()
  local b
  for b in "${BINARIES[@]}"; do
    what+=("cmd/${b}")
  done
  # One `make` for both: they share most packages. GOPROXY=off: vendor/ only, no downloads.
  (
    cd "${src}"
    env -u GOFLAGS -u GOPATH \
      PATH="${GO_ROOT}/bin:${PATH}" \
      GOCACHE="${WORK}/go-build" \
      GOPROXY=off GOSUMDB=off \
      nice -n 10 make WHAT="${what[*]}"
  )
  mkdir -p "${BIN}"
  for b in "${BINARIES[@]}"; do
    install -m 0755 "${src}/_output/local/bin/linux/amd64/${b}" "${BIN}/.${b}.tmp"
    mv -f "${BIN}/.${b}.tmp" "${BIN}/${b}"
  done
  "${BIN}/kube-apiserver" --version
}

clean_work() {
  if [[ ${PACEKEEPER_KUBE_KEEP_BUILD:-0} != 1 ]]; then
    # Go marks its module cache read-only; make it removable first.
    chmod -R u+w "${WORK}" 2>/dev/null || true
    rm -rf "${WORK}"
  fi
}

main() {
  mkdir -p "${CACHE}"
  exec 9>"${CACHE}/.lock"
  # Two builds at once would race on the same work tree.
  flock -w 1800 9

  if binaries_present && etcd_present && kubectl_present; then
    echo "build.sh: cached in ${BIN}, etcd and kubectl installed; nothing to do"
  else
    step "apt sources and update" apt_sources
    step "apt install" apt_install
    if ! binaries_present; then
      step "fetch kubernetes source" fetch_source
      step "build ${BINARIES[*]}" build_binaries
      step "clean build tree" clean_work
    fi
  fi
  echo "build.sh: done in $(($(date +%s) - started_all)) s; binaries in ${BIN}"
}

main "$@"
