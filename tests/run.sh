#!/usr/bin/env bash
# Runs every runwall test suite against the build in BUILD (default: build) and exits non-zero if
# any fails. With --kernel-suites, only the suites that exercise the kernel (what `make vmtest`
# runs inside a VM on another kernel).
#
#   tests/run.sh [BUILD] [--kernel-suites] [--only NAME[,NAME...]] [--jobs N]
#
# --only runs the named suites alone (names as printed: test_datapath, netns/test_ipv6), each
# isolated and leak-checked as in a whole run; a name that matches no suite is an error.
# --jobs N (env RW_JOBS, default 1) runs up to N suites at a time, each one's output held back
# and printed whole when it ends; the suites in `serial` below always run alone.
# RW_TAP_TIMES=1 puts before each line of a suite the seconds since the suite started.
set -uo pipefail

cd "$(dirname "$0")/.."
build=build
only_kernel=0
only=
jobs=${RW_JOBS:-1}
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel-suites) only_kernel=1 ;;
	--only)
		[ $# -ge 2 ] || { echo "tests/run.sh: --only needs suite names" >&2; exit 2; }
		only=",$2,"
		shift
		;;
	--jobs)
		[ $# -ge 2 ] || { echo "tests/run.sh: --jobs needs a number" >&2; exit 2; }
		jobs=$2
		shift
		;;
	-*) echo "usage: tests/run.sh [BUILD] [--kernel-suites] [--only NAME[,NAME...]] [--jobs N]" >&2; exit 2 ;;
	*) build=$1 ;;
	esac
	shift
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "tests/run.sh: --jobs wants a number of suites, got '$jobs'" >&2; exit 2; }

if [ "$(id -u)" -ne 0 ]; then
	echo "tests/run.sh: the suites load BPF programs and make network namespaces: run as root" >&2
	exit 1
fi
scripts/bpffs-mount.sh

# The same commit passes or fails the same way: the differential run takes a fixed seed
# (RW_DIFF_SEED=N replays another; `make fuzz`'s long run takes a fresh one, printed first), the
# churn's choices too (RW_SEED, tests/netns/churn.py).
export RW_DIFF_SEED=${RW_DIFF_SEED:-1}

# name, kind (unit: user space only; kernel: needs the kernel's BPF, netns, veth; host: needs
# them too, but what it proves is user space's behaviour on the same kernel interfaces the kernel
# suites already cover, so it runs on this machine only: the manifest suite checks the
# manifests against the agent's flags, which no kernel changes, and under emulation a veth pair
# takes seconds to create and delete, so a churn there makes a handful of pods; PolicyWatch's
# suite is TLS, HTTP and the agent's apply path, and its 1 000-change churn would take most of
# the VM's budget; the view's suite is HTTP, SSE, DNS and a headless browser over the agent's
# feed, whose kernel side (the ring's events, the counters) test_e2e and test_agent check in the
# VM, and under emulation its browser alone took 11 of the VM's 40 minutes; the monitoring suite
# is Prometheus, Alertmanager and the agent's /metrics over the counters test_agent and test_e2e
# check in the VM, and its alerts wait on real seconds a 10x slower node would stretch to
# minutes; the CLI's, replay's and staged's suites are the operator commands' output and the
# agent's private judge over programs and maps test_datapath and test_differential (whose
# dry-run copy is explain's, replay's and staged's judge) check in the VM, and under emulation
# each of their private loads is seconds of the verifier), command
host_only="test_manifest test_churn test_policy_watch test_view test_monitoring test_cli test_replay test_staged"
suites=()
for kind in unit kernel; do
	for t in "$build"/tests/$kind/test_*; do
		[ -x "$t" ] || continue
		args=""
		# Under emulation every snapshot's grace periods take a large part of a second: the
		# differential run there is a tenth of make check's (the same code on another kernel).
		if [ "${RUNWALL_VMTEST:-0}" = 1 ] && [ "$(basename "$t")" = test_differential ]; then
			args=" --packets 10000 --snapshots 20"
		fi
		suites+=("$(basename "$t") $kind $t$args")
	done
done
for t in tests/manifests/test_*.sh; do
	[ -x "$t" ] || continue
	suites+=("manifests/$(basename "$t" .sh) unit $t $build")
done
for t in tests/logql/test_*.sh; do
	[ -x "$t" ] || continue
	suites+=("logql/$(basename "$t" .sh) unit $t")
done
for t in tests/netns/test_*.sh; do
	[ -x "$t" ] || continue
	kind=kernel
	[[ " $host_only " == *" $(basename "$t" .sh) "* ]] && kind=host
	suites+=("netns/$(basename "$t" .sh) $kind $t $build")
done

if [ -n "$only" ]; then
	picked=()
	for s in "${suites[@]}"; do
		read -r name _ <<<"$s"
		[[ "$only" == *",$name,"* ]] && picked+=("$s") && only=${only/,$name,/,}
	done
	if [ "$only" != "," ]; then
		echo "tests/run.sh: --only: no suite named ${only:1:-1} (tests/README.md lists them)" >&2
		exit 2
	fi
	suites=("${picked[@]}")
fi
if [ ${#suites[@]} -eq 0 ]; then
	echo "tests/run.sh: no test binaries in $build/tests/{unit,kernel}: run make first" >&2
	exit 1
fi

# Under emulation (make vmtest: TCG, 10-50x slower) the netns suites stretch their waits.
if [ "${RUNWALL_VMTEST:-0}" = 1 ]; then
	export RW_WAIT_SCALE=${RW_WAIT_SCALE:-10}
fi

# Nothing left behind. Each suite runs in a mount namespace of its own with a private bpffs on
# /sys/fs/bpf and a private tmpfs on /run/netns, and in a network namespace of its own (lo up):
# its pins, named network namespaces, veths and qdiscs are visible there only, so what is left
# in them when the suite ends is what the suite leaked, whatever else runs on the machine at the
# same time, other suites included. (Processes still inside a leaked netns keep it alive after
# its name goes, hence the process check.) Every process a suite starts inherits RW_SUITE_TOKEN;
# one that outlives the suite is a leak. Suites build their nodes in namespaces they name, so
# a veth or a clsact/ingress qdisc left in the suite's own namespace is a leak too.
isolated() { # isolated REPORT CMD...: CMD in its own mount and network namespaces; what it left there goes to REPORT
	unshare --mount --propagation private --net -- bash -c '
		report=$1
		shift
		mount -t tmpfs -o mode=0755 rw-test-netns /run/netns || exit 125
		mount -t bpf bpf /sys/fs/bpf || exit 125
		ip link set lo up || exit 125
		# A fresh bpffs may hold the kernel'"'"'s own entries (bpf_preload: maps.debug,
		# progs.debug): only what is not there from the start is the suite'"'"'s.
		fresh=$(cd /sys/fs/bpf && find . -mindepth 1 | sort)
		"$@"
		rc=$?
		left=$(cd /run/netns && ls -A)
		[ -z "$left" ] || echo "network namespaces left: $(echo $left)" >>"$report"
		left=$(cd /sys/fs/bpf && find . -mindepth 1 | sort | comm -13 <(echo "$fresh") - |
			sed "s,^\./,," | head -n 20)
		[ -z "$left" ] || echo "bpffs pins left: $(echo $left)" >>"$report"
		left=$({ ip -o link show type veth | awk -F": " "{print \"veth \" \$2}" | sed "s/@.*//"
			tc qdisc show | awk "\$2 == \"clsact\" || \$2 == \"ingress\" {print \"qdisc \" \$2 \" \" \$5}"
			} 2>/dev/null)
		[ -z "$left" ] || echo "left in the suite'"'"'s network namespace: $(echo $left)" >>"$report"
		for ns in /run/netns/*; do
			[ -e "$ns" ] && umount "$ns" 2>/dev/null
		done
		exit $rc' isolated "$@"
}
# Processes started by the suite that are still running, after a grace period for those it
# ended: "PID COMMAND" lines. grep runs without the token so it does not find itself.
leftover_procs() {
	local tok=$1 f pid i
	for i in $(seq 30); do
		f=$(env -u RW_SUITE_TOKEN grep -l -a -z -x -F "RW_SUITE_TOKEN=$tok" /proc/[0-9]*/environ 2>/dev/null || true)
		[ -z "$f" ] && return 0
		sleep 0.1
	done
	for f in $f; do
		pid=${f#/proc/}
		pid=${pid%/environ}
		echo "$pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)"
	done
}
# stamp START_NS: each line of stdin after the seconds since START_NS (RW_TAP_TIMES=1: where a
# suite's time goes, line by line).
stamp() {
	local line t
	while IFS= read -r line; do
		t=$(($(date +%s%N) - $1))
		printf '[%4d.%01d] %s\n' $((t / 1000000000)) $((t / 100000000 % 10)) "$line"
	done
}
# run_suite N NAME CMD...: suite number N, isolated and leak-checked; its output, then its
# "=== PASS|FAIL NAME (SECONDS s)" line. Exit status 0 when it passed and left nothing behind.
run_suite() {
	local i=$1 name=$2 start rc procs leaks report ms status=PASS
	shift 2
	echo "=== $name"
	start=$(date +%s%N)
	report=$(mktemp)
	if [ "${RW_TAP_TIMES:-0}" = 1 ]; then
		RW_SUITE_TOKEN="$$-$i" isolated "$report" "$@" 2>&1 | stamp "$start"
		rc=${PIPESTATUS[0]}
	else
		RW_SUITE_TOKEN="$$-$i" isolated "$report" "$@"
		rc=$?
	fi
	procs=$(leftover_procs "$$-$i")
	if [ -n "$procs" ]; then
		echo "processes left running (killed now): $(echo $procs)" >>"$report"
		for pid in $(awk '{print $1}' <<<"$procs"); do kill -9 "$pid" 2>/dev/null; done
	fi
	leaks=$(cat "$report")
	rm -f "$report"
	[ -z "$leaks" ] || sed 's/^/# LEAK: /' <<<"$leaks"
	[ "$rc" -eq 0 ] && [ -z "$leaks" ] || status=FAIL
	ms=$((($(date +%s%N) - start) / 1000000))
	printf '=== %s %s (%d.%03d s)\n' "$status" "$name" $((ms / 1000)) $((ms % 1000))
	[ "$status" = PASS ]
}
mkdir -p /run/netns

# Suites that never run beside another, each with the reason (none today: every suite keeps to
# its own namespaces, pins, socket and work folder).
serial=""
# With --jobs, the suites start longest first, so that the last to start are short and the
# lanes end close together; the others follow in their usual order. First the host-only ones
# (make check on 890e991: test_policy_watch 225 s, test_monitoring 110, test_view 76, test_cli
# 75, test_churn 64; the kernel suites there take under 60 s each), then the kernel suites as
# measured under make vmtest on 0896803 (test_e2e 421 s, test_agent 383, test_faults 248,
# test_datapath 217, test_ipv6 201, test_cni 170, test_differential 162, test_hostile 155,
# test_answers 141, test_revoke 135).
longest="netns/test_policy_watch netns/test_monitoring netns/test_view netns/test_cli netns/test_churn
	netns/test_e2e netns/test_agent netns/test_faults test_datapath netns/test_ipv6 netns/test_cni
	test_differential netns/test_hostile netns/test_answers netns/test_revoke"
if [ "$jobs" -gt 1 ]; then
	ordered=()
	declare -A early=()
	for l in $longest; do
		early[$l]=1
		for s in "${suites[@]}"; do [ "${s%% *}" = "$l" ] && ordered+=("$s"); done
	done
	for s in "${suites[@]}"; do [ -n "${early[${s%% *}]:-}" ] || ordered+=("$s"); done
	suites=("${ordered[@]}")
fi

echo "# runwall tests on $(uname -r), build $build${RW_WAIT_SCALE:+, waits x$RW_WAIT_SCALE}$([ "$jobs" -eq 1 ] || echo ", $jobs at a time")"
failed=()
passed=0
i=0
declare -A job_name=() job_out=()
# reap: waits for one running suite to end, prints its output whole and counts it.
reap() {
	local pid rc=0
	wait -n -p pid "${!job_name[@]}" || rc=$?
	cat "${job_out[$pid]}"
	rm -f "${job_out[$pid]}"
	if [ "$rc" -eq 0 ]; then passed=$((passed + 1)); else failed+=("${job_name[$pid]}"); fi
	unset "job_name[$pid]" "job_out[$pid]"
}
for s in "${suites[@]}"; do
	read -r name kind cmd <<<"$s"
	[ "$only_kernel" -eq 1 ] && [ "$kind" != kernel ] && continue
	i=$((i + 1))
	if [ "$jobs" -eq 1 ] || [[ " $serial " == *" $name "* ]]; then
		while [ ${#job_name[@]} -gt 0 ]; do reap; done
		# shellcheck disable=SC2086
		if run_suite "$i" "$name" $cmd; then passed=$((passed + 1)); else failed+=("$name"); fi
		continue
	fi
	while [ ${#job_name[@]} -ge "$jobs" ]; do reap; done
	out=$(mktemp)
	# shellcheck disable=SC2086
	run_suite "$i" "$name" $cmd >"$out" 2>&1 </dev/null &
	job_name[$!]=$name
	job_out[$!]=$out
done
while [ ${#job_name[@]} -gt 0 ]; do reap; done

echo
if [ ${#failed[@]} -ne 0 ]; then
	echo "# FAILED: ${failed[*]} ($passed passed)"
	exit 1
fi
echo "# all $passed suites passed"
