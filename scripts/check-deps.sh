#!/usr/bin/env bash
# Says which Debian packages the build needs and lacks (pkg-config for libraries, the PATH for
# tools, dpkg-query for what has neither), and fails when any is missing. Needs no root and
# changes nothing: `make` runs it; `make setup` (or `scripts/setup.sh` as root) installs them.
set -uo pipefail

# pkg-config module or command, and the Debian package that provides it.
libs=(
	libbpf:libbpf-dev libelf:libelf-dev zlib:zlib1g-dev libmnl:libmnl-dev
	jansson:libjansson-dev libmicrohttpd:libmicrohttpd-dev cmocka:libcmocka-dev
	libcurl:libcurl4-openssl-dev
)
tools=(clang:clang gcc:gcc bpftool:bpftool pkg-config:pkg-config xxd:xxd)
headers=(linux-libc-dev)

missing=()
for t in "${tools[@]}"; do
	command -v "${t%%:*}" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "${t%%:*}" \
		>/dev/null 2>&1 || missing+=("${t#*:}")
done
for l in "${libs[@]}"; do
	pkg-config --exists "${l%%:*}" 2>/dev/null || missing+=("${l#*:}")
done
for p in "${headers[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done

if ((${#missing[@]})); then
	echo "make: missing Debian packages: ${missing[*]}" >&2
	echo "make: install them with \`sudo make setup\` (scripts/setup.sh) or" \
		"\`apt-get install ${missing[*]}\`" >&2
	exit 1
fi
