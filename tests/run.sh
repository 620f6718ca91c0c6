#!/usr/bin/env bash
# Runs every runwall test suite against the build in BUILD (default: build) and exits non-zero if
# any fails. With --kernel-suites, only the suites that exercise the kernel (what `make vmtest`
# runs inside a VM on another kernel).
#
#   tests/run.sh [BUILD] [--kernel-suites]
set -uo pipefail

cd "$(dirname "$0")/.."
build=build
only_kernel=0
for arg in "$@"; do
	case "$arg" in
	--kernel-suites) only_kernel=1 ;;
	-*) echo "usage: tests/run.sh [BUILD] [--kernel-suites]" >&2; exit 2 ;;
	*) build=$arg ;;
	esac
done

if [ "$(id -u)" -ne 0 ]; then
	echo "tests/run.sh: the suites load BPF programs and make network namespaces: run as root" >&2
	exit 1
fi
mount | grep -q ' /sys/fs/bpf type bpf' || mount -t bpf bpf /sys/fs/bpf

# name, kind (unit: user space only; kernel: needs the kernel's BPF, netns, veth), command
suites=()
for kind in unit kernel; do
	for t in "$build"/tests/$kind/test_*; do
		[ -x "$t" ] || continue
		suites+=("$(basename "$t") $kind $t")
	done
done
for t in tests/manifests/test_*.sh; do
	[ -x "$t" ] || continue
	suites+=("manifests/$(basename "$t" .sh) unit $t $build")
done
for t in tests/netns/test_*.sh; do
	[ -x "$t" ] || continue
	suites+=("netns/$(basename "$t" .sh) kernel $t $build")
done

if [ ${#suites[@]} -eq 0 ]; then
	echo "tests/run.sh: no test binaries in $build/tests/{unit,kernel}: run make first" >&2
	exit 1
fi

# Under emulation (make vmtest: TCG, 10-50x slower) the netns suites stretch their waits.
if [ "${RUNWALL_VMTEST:-0}" = 1 ]; then
	export RW_WAIT_SCALE=${RW_WAIT_SCALE:-10}
fi

echo "# runwall tests on $(uname -r), build $build${RW_WAIT_SCALE:+, waits x$RW_WAIT_SCALE}"
failed=()
passed=0
for s in "${suites[@]}"; do
	read -r name kind cmd <<<"$s"
	[ "$only_kernel" -eq 1 ] && [ "$kind" != kernel ] && continue
	echo "=== $name"
	start=$(date +%s%N)
	# shellcheck disable=SC2086
	if $cmd; then
		passed=$((passed + 1))
		status=PASS
	else
		failed+=("$name")
		status=FAIL
	fi
	ms=$((($(date +%s%N) - start) / 1000000))
	printf '=== %s %s (%d.%03d s)\n' "$status" "$name" $((ms / 1000)) $((ms % 1000))
done

echo
if [ ${#failed[@]} -ne 0 ]; then
	echo "# FAILED: ${failed[*]} ($passed passed)"
	exit 1
fi
echo "# all $passed suites passed"
