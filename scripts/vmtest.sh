#!/usr/bin/env bash
# Boots a kernel in QEMU and runs runwall's kernel-facing tests in it, against this machine's own
# root file system shared read-only over 9p (the way virtme-ng does it), then reports pass/fail.
#
#   scripts/vmtest.sh BUILD_DIR [options] [-- COMMAND...]
#
#   --kernel BZIMAGE  kernel to boot (env VMTEST_KERNEL); default: the newest /boot/vmlinuz-6.1.*
#                     that has its modules in /lib/modules
#   --modules DIR     modules tree for the initramfs (env VMTEST_MODULES); default /lib/modules/<ver>
#                     of the kernel's version (read from the bzImage). A kernel with 9p, virtio-pci
#                     and the tests' modules built in needs none.
#   --mem SIZE        guest memory (env VMTEST_MEM, default 2G)
#   --smp N           guest CPUs (env VMTEST_SMP, default 2); under TCG, one host thread each
#                     (multi-threaded TCG)
#   --jobs N          suites at a time for the default command (env VMTEST_JOBS, default: the
#                     guest's CPUs)
#   --timeout SEC     whole-run limit (env VMTEST_TIMEOUT, default 3600)
#   --accel auto|kvm|tcg  (env VMTEST_ACCEL, default auto: kvm only if a probe guest really runs)
#   --append ARGS     extra kernel command line (env VMTEST_APPEND)
#   --env NAME=VALUE  extra variable for the command (repeatable); CI and V pass through if set
#   --verbose         show every kernel message on the console (default: warnings and worse)
#   --no-vng          use the built-in QEMU runner even when virtme-ng's `vng` is on PATH
#   Environment only: VMTEST_PVH=0 boots the bzImage instead of the vmlinux inside it (its PVH
#   entry skips ~3 s of decompression under TCG); VMTEST_QEMU picks another QEMU binary.
#
# COMMAND runs as root in the repository root, stdin from /dev/null. One argument is a shell
# snippet (sh -c); several are an argv run as is. Default: tests/run.sh BUILD_DIR --kernel-suites
# --jobs N (--jobs above).
# Only BUILD_DIR is writable on the host (9p, read-write); / is read-only, with fresh tmpfs on /tmp,
# /var/tmp, /run and /root. The console goes to stdout and to BUILD_DIR/vm/console.log; the
# initramfs, the vmlinux and the KVM probe's answer are cached in BUILD_DIR/vm too.
# Exit status: the command's, or 125 when it did not run to the end (boot failure, crash, timeout).
set -euo pipefail

die() {
	echo "vmtest: $*" >&2
	exit 125
}
usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit "${1:-0}"
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
kernel=${VMTEST_KERNEL:-}
modules=${VMTEST_MODULES:-}
mem=${VMTEST_MEM:-2G}
smp=${VMTEST_SMP:-2}
jobs=${VMTEST_JOBS:-}
timeout=${VMTEST_TIMEOUT:-3600}
accel=${VMTEST_ACCEL:-auto}
append=${VMTEST_APPEND:-}
verbose=0
use_vng=1
build=
extra_env=()
cmd=()

need_arg() { [ "$2" -ge 2 ] || die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) need_arg "$1" $#; kernel=$2; shift 2 ;;
	--modules) need_arg "$1" $#; modules=$2; shift 2 ;;
	--mem) need_arg "$1" $#; mem=$2; shift 2 ;;
	--smp) need_arg "$1" $#; smp=$2; shift 2 ;;
	--jobs) need_arg "$1" $#; jobs=$2; shift 2 ;;
	--timeout) need_arg "$1" $#; timeout=$2; shift 2 ;;
	--accel) need_arg "$1" $#; accel=$2; shift 2 ;;
	--append) need_arg "$1" $#; append=$2; shift 2 ;;
	--env) need_arg "$1" $#; extra_env+=("$2"); shift 2 ;;
	--verbose) verbose=1; shift ;;
	--no-vng) use_vng=0; shift ;;
	-h | --help) usage 0 ;;
	--) shift; cmd=("$@"); break ;;
	-*) echo "vmtest: unknown option $1" >&2; usage 2 ;;
	*) [ -z "$build" ] || die "one BUILD_DIR only (got '$build' and '$1'); put the command after --"
	   build=$1; shift ;;
	esac
done
[ -n "$build" ] || usage 2
[[ $timeout =~ ^[0-9]+$ && $timeout -gt 0 ]] || die "--timeout wants seconds, got '$timeout'"
[[ $smp =~ ^[1-9][0-9]*$ ]] || die "--smp wants a number, got '$smp'"
[ -n "$jobs" ] || jobs=$smp
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs wants a number, got '$jobs'"
case "$accel" in auto | kvm | tcg) ;; *) die "--accel is auto, kvm or tcg, not '$accel'" ;; esac
for e in "${extra_env[@]}"; do
	[[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env wants NAME=VALUE, got '$e'"
done

mkdir -p "$build/vm"
build=$(cd "$build" && pwd -P)
vmdir=$build/vm
console=$vmdir/console.log
# One run at a time per build directory: they would share cmd.sh, run.conf and console.log.
exec 9>"$vmdir/lock"
flock -n 9 || die "another vmtest is running with $build"
[ ${#cmd[@]} -gt 0 ] || cmd=(tests/run.sh "$build" --kernel-suites --jobs "$jobs")

# Quotes a word for a POSIX shell (dash in the guest, so no $'...').
shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# The release string of an x86 bzImage: the boot header's kernel_version field.
kernel_release() {
	local f=$1 off
	[ "$(dd if="$f" bs=1 skip=$((0x202)) count=4 2>/dev/null)" = HdrS ] || return 1
	off=$(od -An -tu2 -j $((0x20E)) -N2 "$f" | tr -d ' ')
	[ -n "$off" ] && [ "$off" -gt 0 ] || return 1
	dd if="$f" bs=1 skip=$((off + 0x200)) count=200 2>/dev/null | tr '\0' '\n' | head -n1 | cut -d' ' -f1
}

if [ -z "$kernel" ]; then
	for k in $(find /boot -maxdepth 1 -name 'vmlinuz-6.1.*' 2>/dev/null | sort -V -r); do
		[ -d "/lib/modules/${k#/boot/vmlinuz-}" ] && { kernel=$k; break; }
	done
	[ -n "$kernel" ] || die "no /boot/vmlinuz-6.1.* with its /lib/modules: apt-get install linux-image-amd64, or pass --kernel"
fi
[ -r "$kernel" ] || die "cannot read kernel $kernel (vmlinuz in /boot is root-only on Debian)"
kernel=$(cd "$(dirname "$kernel")" && pwd -P)/$(basename "$kernel")
kver=$(kernel_release "$kernel") || die "$kernel is not an x86 bzImage"
[ -n "$modules" ] || modules=/lib/modules/$kver

have() { command -v "$1" >/dev/null 2>&1; }

# Writes the vmlinux inside a bzImage to OUT; succeeds only when it is an ELF with a PVH entry
# point (Xen ELF note 0x12), which QEMU's -kernel boots directly, skipping the decompressor.
extract_pvh_vmlinux() {
	local f=$1 out=$2 fmt magic off
	have readelf || return 1
	for fmt in xz zstd gzip; do
		case $fmt in
		xz) magic=$'\xfd7zXZ' ;;
		zstd) magic=$'\x28\xb5\x2f\xfd' ;;
		gzip) magic=$'\x1f\x8b\x08' ;;
		esac
		have "$fmt" || continue
		for off in $(LC_ALL=C grep -abo "$magic" "$f" 2>/dev/null | head -n 3 | cut -d: -f1); do
			# The payload is followed by other data, so the decompressor's status means nothing.
			tail -c +$((off + 1)) "$f" | "$fmt" -dcq >"$out.tmp" 2>/dev/null || true
			if [ "$(head -c 4 "$out.tmp")" = $'\x7fELF' ] &&
				readelf -n "$out.tmp" 2>/dev/null | grep -qE '^[[:space:]]+Xen[[:space:]]+0x[0-9a-f]+[[:space:]].*(0x00000012|PHYS32_ENTRY)'; then
				mv "$out.tmp" "$out"
				return 0
			fi
		done
	done
	rm -f "$out.tmp"
	return 1
}
qemu=${VMTEST_QEMU:-qemu-system-x86_64}

# KVM only when a guest really runs on it: /dev/kvm can exist, create VMs and even run real-mode
# code on a CPU without usable virtualisation, then hang the moment the guest enables paging (seen
# on this project's machines). The probe boots a 512-byte boot sector that switches to 64-bit long
# mode and writes 0x2a to QEMU's isa-debug-exit port, which makes QEMU exit with (0x2a<<1)|1 = 85.
# Source (GNU as, .code16, linked at 0x7c00): zero 0x1000-0x3fff; PML4[0]=0x2003, PDPT[0]=0x3003,
# PD[0]=0x83 (2 MiB page); CR4.PAE; CR3=0x1000; EFER.LME; lgdt; CR0.PG|PE; ljmp 0x08:long64;
# .code64 long64: mov $0x2a,%al; out %al,$0xf4; hlt. GDT: null, 0x00209A0000000000.
# The answer is cached per host boot and QEMU binary in BUILD_DIR/vm/accel-probe.
probe_code='fa31c08ed88ec08ed0bc007cbf0010b90018f3ab66c70600100320000066c7060020033000
0066c7060030830000000f20e06683c8200f22e066b8001000000f22d866b9800000c00f32660d00
0100000f30660f0116887c0f20c0660d010000800f22c066ea6c7c00000800b02ae6f4f4ebfd0f1f
440000000000000000000000000000009a20000f00787c0000'
kvm_works() {
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	local img rc=0 id cache=$vmdir/accel-probe
	id="$(cat /proc/sys/kernel/random/boot_id 2>/dev/null) $(stat -L -c '%s %Y' "$(command -v "$qemu")")"
	if [ -f "$cache" ] && [ "$(head -n1 "$cache")" = "$id" ]; then
		[ "$(sed -n 2p "$cache")" = kvm ]
		return
	fi
	img=$(mktemp "$vmdir/kvmprobe.XXXXXX")
	# shellcheck disable=SC2001 # one \x before every byte
	printf '%b' "$(sed 's/../\\x&/g' <<<"${probe_code//$'\n'/}")" >"$img"
	truncate -s 510 "$img" && printf '\125\252' >>"$img" && truncate -s 1474560 "$img"
	{ timeout 15 "$qemu" -accel kvm -cpu host -M pc -nodefaults -display none -serial none \
		-monitor none -no-reboot -device isa-debug-exit,iobase=0xf4,iosize=1 \
		-drive "file=$img,format=raw,if=floppy,readonly=on" </dev/null >/dev/null 2>&1 || rc=$?; } 2>/dev/null
	rm -f "$img"
	if [ "$rc" -eq 85 ]; then printf '%s\nkvm\n' "$id" >"$cache"; else printf '%s\ntcg\n' "$id" >"$cache"; fi
	[ "$rc" -eq 85 ]
}

if [ "$accel" = auto ]; then
	if have "$qemu" && kvm_works; then accel=kvm; else accel=tcg; fi
fi

# What the guest runs: cmd.sh (on the build share) sets a clean environment, goes to the repository
# and runs the command. Generated on every run.
{
	echo "# generated by scripts/vmtest.sh; run by the guest's init"
	echo "cd $(shq "$repo") || exit 126"
	printf 'exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root'
	printf ' USER=root LOGNAME=root LANG=C.UTF-8 TERM=dumb RUNWALL_VMTEST=1 RUNWALL_BUILD=%s' "$(shq "$build")"
	for v in CI V; do
		[ -z "${!v:-}" ] || printf ' %s' "$(shq "$v=${!v}")"
	done
	for e in "${extra_env[@]}"; do printf ' %s' "$(shq "$e")"; done
	if [ ${#cmd[@]} -eq 1 ]; then
		printf ' /bin/sh -c %s\n' "$(shq "${cmd[0]}")"
	else
		for a in "${cmd[@]}"; do printf ' %s' "$(shq "$a")"; done
		echo
	fi
} >"$vmdir/cmd.sh"
nonce=$$.$RANDOM.$(date +%s)
rm -f "$vmdir/exit-status"
: >"$console"

start=$(date +%s)
echo "vmtest: kernel $kernel ($kver), accel $accel, memory $mem, $smp CPUs, timeout ${timeout}s"
echo "vmtest: command: ${cmd[*]}"
echo "vmtest: console log: $console"

qemu_pid=
sleeper=
# shellcheck disable=SC2317 # called by the trap
on_signal() {
	[ -z "$qemu_pid" ] || kill "$qemu_pid" 2>/dev/null || true
	[ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null || true
	{ wait 2>/dev/null || true; } 2>/dev/null
	echo "vmtest: interrupted" >&2
	exit 130
}
trap on_signal INT TERM HUP

if [ "$use_vng" -eq 1 ] && have vng; then
	# virtme-ng does the same job (host root over 9p or virtiofs, writable --rwdir); the marker
	# line is printed by the wrapper so the result is read the same way.
	echo "vmtest: using virtme-ng ($(command -v vng)); --no-vng for the built-in runner"
	vng_args=(--run "$kernel" --cpus "$smp" --memory "$mem" --rwdir "$build" --cwd "$repo")
	[ "$accel" = kvm ] || vng_args+=(--disable-kvm)
	[ -z "$append" ] || vng_args+=(--append "$append")
	[ "$verbose" -eq 0 ] || vng_args+=(--verbose)
	wrapped="$(shq "$repo/scripts/bpffs-mount.sh"); /bin/sh $(shq "$vmdir/cmd.sh") </dev/null; rc=\$?; echo \"RUNWALL-VMTEST-EXIT=\$rc $nonce\"; exit \$rc"
	set +e
	timeout -k 10 "$timeout" vng "${vng_args[@]}" --exec "$wrapped" </dev/null 2>&1 | tee "$console"
	set -e
else
	have "$qemu" || die "$qemu not found: apt-get install qemu-system-x86"
	if [ ! -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then
		die "/bin/busybox is missing or not static: apt-get install busybox-static"
	fi
	have cpio || die "cpio not found: apt-get install cpio"

	# Modules the initramfs loads: what it needs to mount the root, and what the tests use (loading
	# them from RAM is faster than modprobe over 9p; anything else the kernel can still load from
	# the shared root). Only those the kernel has as modules (built-in ones are not in
	# modules.dep), each after its dependencies.
	initrd_mods=(virtio_pci 9pnet_virtio 9p veth sch_ingress cls_bpf act_bpf)
	load_order=()
	if [ -f "$modules/modules.dep" ]; then
		declare -A seen=()
		add_module() {
			local name=$1 line path dep
			line=$(grep -E "(^|/)${name}\.ko(\.[a-z]+)?:" "$modules/modules.dep" | head -n1) || true
			[ -n "$line" ] || return 0
			path=${line%%:*}
			[ -z "${seen[$path]:-}" ] || return 0
			seen[$path]=1
			for dep in ${line#*:}; do
				dep=$(basename "$dep")
				add_module "${dep%%.ko*}"
			done
			load_order+=("$path")
		}
		for m in "${initrd_mods[@]}"; do add_module "$m"; done
	else
		echo "vmtest: no $modules/modules.dep: assuming 9p and virtio are built into the kernel"
	fi

	# The initramfs is cached in BUILD_DIR/vm and rebuilt when the kernel, its modules, busybox or
	# the guest init change.
	initrd=$vmdir/initramfs.cpio.gz
	key=$(
		echo "format 1 $kver"
		stat -L -c '%n %s %Y' "$kernel" /bin/busybox
		[ ! -f "$modules/modules.dep" ] || stat -L -c '%n %s %Y' "$modules/modules.dep"
		printf '%s\n' "${load_order[@]}"
		cat "$repo/scripts/vm-init.sh"
	)
	key=$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)
	if [ ! -f "$initrd" ] || [ "$(cat "$vmdir/initramfs.key" 2>/dev/null)" != "$key" ]; then
		echo "vmtest: building the initramfs for $kver (${#load_order[@]} modules)"
		stage=$(mktemp -d "$vmdir/initramfs.XXXXXX")
		mkdir -p "$stage"/{bin,sbin,dev,proc,sys,mnt,newroot,lib/modules}
		cp /bin/busybox "$stage/bin/busybox"
		for applet in $(/bin/busybox --list); do
			[ "$applet" = busybox ] || ln -s busybox "$stage/bin/$applet"
		done
		install -m 0755 "$repo/scripts/vm-init.sh" "$stage/init"
		for path in "${load_order[@]}"; do
			src=$modules/$path
			dst=$stage/lib/modules/$(basename "${path%%.ko*}").ko
			case "$src" in
			*.ko) cp "$src" "$dst" ;;
			*.ko.xz) xz -dc "$src" >"$dst" ;;
			*.ko.zst) zstd -qdc "$src" >"$dst" ;;
			*.ko.gz) gzip -dc "$src" >"$dst" ;;
			*) die "unknown module format: $src" ;;
			esac
			basename "$dst" >>"$stage/lib/modules/load-order"
		done
		mknod -m 600 "$stage/dev/console" c 5 1 2>/dev/null || true
		(cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0 | gzip -1) >"$initrd.tmp"
		mv "$initrd.tmp" "$initrd"
		echo "$key" >"$vmdir/initramfs.key"
		rm -rf "$stage"
	fi

	{
		echo "REPO=$(shq "$repo")"
		echo "BUILD=$(shq "$build")"
		echo "NONCE=$(shq "$nonce")"
	} >"$vmdir/run.conf"

	# The decompressor takes ~3 s under TCG: boot the uncompressed vmlinux through its PVH entry
	# instead, when the bzImage holds one (cached next to the initramfs; VMTEST_PVH=0 disables).
	boot_kernel=$kernel
	if [ "${VMTEST_PVH:-1}" = 1 ]; then
		vmlinux=$vmdir/vmlinux
		vkey="$kver $(stat -L -c '%s %Y' "$kernel")"
		if [ -f "$vmlinux" ] && [ "$(cat "$vmlinux.key" 2>/dev/null)" = "$vkey" ]; then
			boot_kernel=$vmlinux
		elif extract_pvh_vmlinux "$kernel" "$vmlinux"; then
			echo "$vkey" >"$vmlinux.key"
			boot_kernel=$vmlinux
		else
			rm -f "$vmlinux" "$vmlinux.key"
		fi
	fi
	# TCG runs each vCPU on a host thread of its own (thread=multi: QEMU 7.2's default for an
	# x86 guest on an x86 host, asked for so that a QEMU that cannot fails instead of taking
	# turns on one core). debug-threads names the threads: `ps -L -p PID -o comm` lists one
	# "CPU N/TCG" per vCPU.
	if [ "$accel" = kvm ]; then cpu=host accel_opt=kvm; else cpu=max accel_opt=tcg,thread=multi; fi
	# qboot (shipped with QEMU) starts the kernel about a second sooner than SeaBIOS under TCG.
	bios=()
	[ ! -f /usr/share/qemu/qboot.rom ] || bios=(-bios /usr/share/qemu/qboot.rom)
	loglevel=5
	[ "$verbose" -eq 0 ] || loglevel=8
	cmdline="console=ttyS0,115200 panic=-1 loglevel=$loglevel mitigations=off i8042.noaux i8042.nokbd trace_clock=global $append"
	qesc() { printf '%s' "${1//,/,,}"; } # a comma in a QEMU option value is written twice
	set +e
	"$qemu" -accel "$accel_opt" -cpu "$cpu" "${bios[@]}" -m "$mem" -smp "$smp" \
		-name runwall-vmtest,debug-threads=on -nodefaults -no-reboot -nographic -monitor none \
		-chardev "stdio,id=console,signal=off,logfile=$(qesc "$console")" -serial chardev:console \
		-kernel "$boot_kernel" -initrd "$initrd" -append "$cmdline" \
		-virtfs local,path=/,mount_tag=runwall_root,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$(qesc "$build"),mount_tag=runwall_build,security_model=none,multidevs=remap" \
		</dev/null &
	qemu_pid=$!
	set -e
	# Wait for QEMU or the deadline, whichever comes first (a sleep of our own as the timer).
	left=$((timeout - ($(date +%s) - start)))
	sleep "$((left > 0 ? left : 1))" &
	sleeper=$!
	qemu_rc=0
	finished=
	wait -n -p finished "$qemu_pid" "$sleeper" || qemu_rc=$?
	timed_out=0
	if [ "$finished" != "$qemu_pid" ]; then
		timed_out=1
		echo
		echo "vmtest: TIMEOUT after ${timeout}s: stopping QEMU"
		kill "$qemu_pid" 2>/dev/null || true
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$qemu_pid" 2>/dev/null || break
			sleep 1
		done
		kill -9 "$qemu_pid" 2>/dev/null || true
		{ wait "$qemu_pid" || true; } 2>/dev/null
	fi
	{ kill "$sleeper" && wait "$sleeper"; } 2>/dev/null || true
	qemu_pid=
	sleeper=
	[ "$timed_out" -eq 1 ] || [ "$qemu_rc" -eq 0 ] || echo "vmtest: QEMU exited with status $qemu_rc"
fi
trap - INT TERM HUP

elapsed=$(($(date +%s) - start))
rc=$(tr -d '\r' <"$console" | sed -n "s/^.*RUNWALL-VMTEST-EXIT=\([0-9]\{1,3\}\) $nonce\$/\1/p" | tail -n1)
if [ -z "$rc" ] && [ -f "$vmdir/exit-status" ]; then
	# The marker line can be garbled by a kernel message printed at the same moment; the guest
	# also wrote the status to the build share.
	read -r status_rc status_nonce <"$vmdir/exit-status" || true
	if [ "${status_nonce:-}" = "$nonce" ] && [[ ${status_rc:-} =~ ^[0-9]+$ ]]; then
		rc=$status_rc
		echo "vmtest: exit marker not found on the console; status taken from $vmdir/exit-status"
	fi
fi
echo
if [ -z "$rc" ]; then
	echo "vmtest: FAIL: the command did not run to the end (no exit marker) after ${elapsed}s:" \
		"boot failure, kernel crash or timeout. Last 40 console lines:"
	tr -d '\r' <"$console" | tail -n 40 | sed 's/^/  | /'
	exit 125
fi
if [ "$rc" -eq 0 ]; then
	echo "vmtest: PASS on $kver ($accel, ${elapsed}s)"
else
	echo "vmtest: FAIL on $kver ($accel, ${elapsed}s): the command exited with status $rc"
fi
exit "$rc"
