#!/usr/bin/env bash
# Installs the Debian 12 packages runwall needs to build and test; installs only what is missing,
# so a second run does nothing and needs no network. Nothing is downloaded from anywhere else.
set -euo pipefail

packages=(
	clang llvm make gcc pkg-config clang-format
	libbpf-dev bpftool libelf-dev zlib1g-dev
	libmnl-dev libjansson-dev libmicrohttpd-dev libcmocka-dev libcurl4-openssl-dev xxd
	chromium chromium-driver python3-selenium prometheus
	# the monitoring objects: promtool (prometheus), and the end-to-end alerting of
	# tests/netns/test_monitoring.sh
	prometheus-alertmanager
	iproute2 iputils-ping netcat-openbsd python3 procps jq util-linux curl
	openssl # PolicyWatch's test certificates (tests/netns/test_policy_watch.sh)
	nftables # PolicyWatch's partition of the server (tests/netns/test_policy_watch.sh)
	iperf3 sockperf iptables # make bench's veth throughput (tests/bench/veth.sh)
	qemu-system-x86 linux-image-amd64 busybox-static cpio xz-utils binutils
	# make image and its test; the manifest checks (kubectl: from the apt source that carries
	# it, packages.cloud.google.com on the development machine; npm: nodejs from NodeSource
	# ships its own, Debian's nodejs needs Debian's npm, added below)
	mmdebstrap buildah skopeo yamllint python3-yaml kubectl nodejs
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

command -v npm >/dev/null || dpkg-query -W -f='${Status}' npm 2>/dev/null | grep -q "install ok installed" ||
	missing+=(npm)

if ((${#missing[@]})); then
	echo "setup: installing ${missing[*]}"
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: must run as root to install packages" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The tests pin maps under bpffs; mount it where the machine did not.
"$(dirname "$0")/bpffs-mount.sh"

# The manifest checks' validator (tests/manifests): exactly the locked packages, from npm's
# registry, once; again only when the lock file changes.
manifests=$(dirname "$0")/../tests/manifests
if ! cmp -s "$manifests/package-lock.json" "$manifests/node_modules/.runwall-lock"; then
	echo "setup: npm ci in tests/manifests"
	(cd "$manifests" && npm ci --no-audit --no-fund --loglevel=error)
	cp "$manifests/package-lock.json" "$manifests/node_modules/.runwall-lock"
fi
# The flow log's LogQL check (tests/logql, run by tests/netns/test_flow_log.sh): the same way.
logql=$(dirname "$0")/../tests/logql
if ! cmp -s "$logql/package-lock.json" "$logql/node_modules/.runwall-lock"; then
	echo "setup: npm ci in tests/logql"
	(cd "$logql" && npm ci --no-audit --no-fund --loglevel=error)
	cp "$logql/package-lock.json" "$logql/node_modules/.runwall-lock"
fi
