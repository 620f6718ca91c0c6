#!/bin/sh
# Guest init for scripts/vmtest.sh. Plain POSIX sh: stage 1 runs as /init of the initramfs under
# busybox, stage 2 runs as PID 1 under the host's /bin/sh once the host's / is the root.
#
# Stage 1 (initramfs): loads the modules listed in /lib/modules/load-order (9p, virtio and what
#   the tests use, when the kernel has them as modules), reads the run's settings from the
#   writable build share ($BUILD/vm/run.conf, written by vmtest.sh), mounts the host's / read-only
#   over 9p, puts tmpfs on /tmp /run /var/tmp /root, keeps the repository visible even when it
#   lives under one of them, mounts the build share read-write at its host path, then devtmpfs,
#   devpts, bpffs, cgroup2, tracefs; brings lo up and switch_root's into stage 2.
# Stage 2 (host root, PID 1): runs $BUILD/vm/cmd.sh as a child with stdin from /dev/null, prints
#   "RUNWALL-VMTEST-EXIT=<rc> <nonce>" on the console, writes the same to $BUILD/vm/exit-status,
#   and powers the VM off.
# Everything goes to the serial console; the host script streams and logs it.

ROOT_TAG=runwall_root
BUILD_TAG=runwall_build
NINEP_OPTS=trans=virtio,version=9p2000.L,msize=262144

log() { echo "vm-init [$(cut -d' ' -f1 /proc/uptime 2>/dev/null)]: $*"; }

# Ends the VM. PID 1 exiting panics the kernel, and the kernel runs with panic=-1 under QEMU's
# -no-reboot, so even the last resort ends QEMU instead of hanging until the host's timeout.
power_off() {
	sync
	sleep 0.5 # let the UART drain the last lines before the machine goes away
	if [ -x /bin/busybox ]; then /bin/busybox poweroff -f; fi
	echo o >/proc/sysrq-trigger 2>/dev/null
	sleep 30
	exit 1
}

die() {
	echo "vm-init: FATAL: $*"
	power_off
}

stage1() {
	export PATH=/bin:/sbin
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev 2>/dev/null
	log "loading modules"
	if [ -f /lib/modules/load-order ]; then
		while read -r m; do
			[ -n "$m" ] || continue
			insmod "/lib/modules/$m" || log "warning: insmod $m failed"
		done </lib/modules/load-order
	fi

	# The run's settings: REPO, BUILD, NONCE (shell assignments).
	mkdir -p /mnt/build
	mount -t 9p -o "rw,$NINEP_OPTS" "$BUILD_TAG" /mnt/build ||
		die "cannot mount the build share over 9p (9p/virtio missing from this kernel?)"
	[ -f /mnt/build/vm/run.conf ] || die "no vm/run.conf on the build share"
	# shellcheck disable=SC1091 # written by vmtest.sh
	. /mnt/build/vm/run.conf
	umount /mnt/build

	log "mounting the host root"
	R=/newroot
	mkdir -p "$R"
	mount -t 9p -o "ro,$NINEP_OPTS,cache=loose" "$ROOT_TAG" "$R" ||
		die "cannot mount the host root over 9p"
	# Keep the repository reachable before tmpfs may cover one of its parents (e.g. /tmp/clone).
	mkdir -p /repo
	mount -o bind "$R$REPO" /repo || die "repository $REPO not visible in the host root"
	for d in /tmp /var/tmp /run /root; do
		[ -d "$R$d" ] || continue
		mount -t tmpfs -o mode=0755 tmpfs "$R$d" || die "cannot mount tmpfs on $d"
	done
	chmod 1777 "$R/tmp" "$R/var/tmp" 2>/dev/null
	mkdir -p "$R$REPO" || die "cannot make the mount point $REPO"
	mount -o move /repo "$R$REPO" || die "cannot put the repository back at $REPO"
	mkdir -p "$R$BUILD" || die "cannot make the mount point $BUILD"
	mount -t 9p -o "rw,$NINEP_OPTS" "$BUILD_TAG" "$R$BUILD" || die "cannot mount the build share at $BUILD"

	log "switching root"
	mount -o move /dev "$R/dev"
	mount -o move /proc "$R/proc"
	mount -o move /sys "$R/sys"
	mkdir -p "$R/dev/pts" "$R/dev/shm"
	mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts "$R/dev/pts"
	mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
	[ -e "$R/dev/fd" ] || ln -s /proc/self/fd "$R/dev/fd"
	mount -t bpf -o mode=0700 bpf "$R/sys/fs/bpf" || log "warning: cannot mount bpffs"
	mount -t cgroup2 cgroup2 "$R/sys/fs/cgroup" || log "warning: cannot mount cgroup2"
	mount -t tracefs tracefs "$R/sys/kernel/tracing" 2>/dev/null
	mount -t debugfs debugfs "$R/sys/kernel/debug" 2>/dev/null
	mkdir -p "$R/run/lock"
	hostname runwall-vm
	ip link set lo up || log "warning: cannot bring lo up"
	cp /init "$R/run/runwall-vm-init"
	# shellcheck disable=SC2093 # returns only on failure
	exec switch_root "$R" /bin/sh /run/runwall-vm-init stage2 "$BUILD/vm/run.conf"
	die "switch_root failed"
}

stage2() {
	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	# shellcheck disable=SC1090 # $BUILD/vm/run.conf, written by vmtest.sh
	. "$1" || die "cannot read $1"
	up=$(cut -d' ' -f1 /proc/uptime)
	log "kernel $(uname -r) up after ${up}s; running the command in $REPO"
	rm -f "$BUILD/vm/exit-status"
	/bin/sh "$BUILD/vm/cmd.sh" </dev/null
	rc=$?
	taint=$(cat /proc/sys/kernel/tainted 2>/dev/null)
	[ "${taint:-0}" = 0 ] || log "warning: kernel tainted ($taint): look for a WARN/BUG above"
	echo "$rc $NONCE" >"$BUILD/vm/exit-status"
	sync
	echo "RUNWALL-VMTEST-EXIT=$rc $NONCE"
	power_off
}

case "${1:-}" in
stage2) stage2 "$2" ;;
*) stage1 ;;
esac
