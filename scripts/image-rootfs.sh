#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The image's root file system: Debian 12 from Debian's own mirror through apt (mmdebstrap), with
# only the shared libraries runwall links against or opens (libcurl4 and libmicrohttpd12, at their
# first call: user/lib/netlibs.c) and their dependencies, as a tarball.
#
#   scripts/image-rootfs.sh OUT.tar
#
# The `extract` variant unpacks the packages and runs no maintainer script: no shell, no dpkg, no
# apt end up in the image. iproute2 is left out: runwall talks netlink itself (libmnl) and runs
# no external command. What the libraries' scripts would have done by hand: the loader cache, a
# dpkg status file listing exactly what was unpacked (so image scanners see the versions), and
# the users the containers run as (root for the agent, nobody for the view). Documentation,
# locales and iconv modules go (the copyright files stay): nothing in runwall reads them. SOURCE_DATE_EPOCH (the commit's
# time) makes mmdebstrap's timestamps reproducible.
set -euo pipefail

out=${1:?usage: scripts/image-rootfs.sh OUT.tar}
# The runtime libraries of build/runwall (and build/runwall-cni), by Debian package.
packages=libbpf1,libelf1,zlib1g,libmnl0,libjansson4,libmicrohttpd12,libcurl4
mirror=http://deb.debian.org

# Runs in the tree once the packages are unpacked (the `extract` variant runs no customize hook),
# before apt's cache is cleaned: $1 is its root.
hook='set -e
root=$1
status=$root/var/lib/dpkg/status
mkdir -p "$root/var/lib/dpkg" "$root/etc" "$root/tmp" "$root/run"
: >"$status"
for deb in "$root"/var/cache/apt/archives/*.deb; do
	dpkg-deb -f "$deb" | awk "NR == 1 { print; print \"Status: install ok installed\"; next } { print }" >>"$status"
	echo >>"$status"
done
# The copyright files stay: they travel with the binaries.
find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
rm -rf "$root"/usr/share/man "$root"/usr/share/info "$root"/usr/share/locale \
	"$root"/usr/share/lintian "$root"/usr/lib/x86_64-linux-gnu/gconv
chmod 1777 "$root/tmp"
printf "root:x:0:0:root:/root:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n" >"$root/etc/passwd"
printf "root:x:0:\nnogroup:x:65534:\n" >"$root/etc/group"
printf "include /etc/ld.so.conf.d/*.conf\n" >"$root/etc/ld.so.conf"
mkdir -p "$root/etc/ld.so.conf.d"
printf "/usr/local/lib\n/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n" >"$root/etc/ld.so.conf.d/x86_64-linux-gnu.conf"
ldconfig -r "$root"'

mkdir -p "$(dirname "$out")"
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)} \
mmdebstrap --quiet --variant=extract --architectures=amd64 --include="$packages" \
	--extract-hook="$hook" --format=tar \
	bookworm "$out.tmp" \
	"deb $mirror/debian bookworm main" \
	"deb $mirror/debian bookworm-updates main" \
	"deb $mirror/debian-security bookworm-security main"
mv "$out.tmp" "$out"
