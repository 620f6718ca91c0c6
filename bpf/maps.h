/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* maps.h: every map of the datapath, pinned by name under the agent's bpffs folder so that
 * enforcement outlives the agent and a restarted agent adopts them.
 *
 * API
 *   offers: (no functions) every map, pinned by name
 *   needs:  runwall.h, map_defs.h
 */
#ifndef RUNWALL_BPF_MAPS_H
#define RUNWALL_BPF_MAPS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "runwall.h"
#include "map_defs.h"

/* Node-wide state: readiness, live policy slot and revision, event budget. */
RW_MAP(rw_config, ARRAY, 1, __u32, struct rw_config, LIBBPF_PIN_BY_NAME);

/* Host-side veth ifindex -> the pod IP routed through it. Written by the agent from netlink, not
 * from snapshots: it is what the kernel's routing says, not what the control plane says.
 */
RW_MAP(rw_endpoints, HASH, RW_MAX_ENDPOINTS, __u32, struct rw_endpoint, LIBBPF_PIN_BY_NAME);

/* The binding of each bound veth by its index (runwall.h, rw_veth_slots): an ARRAY of one
 * struct rw_veth per veth, swapped in whole by the library. Both lookups are inlined by the
 * verifier (array_of_map_gen_lookup(), array_map_gen_lookup() in kernel/bpf/arraymap.c: the
 * inner arrays all have one entry, as bpf_map_meta_equal() requires of inner arrays).
 */
RW_MAP_INNER(rw_veth_inner, ARRAY, 1, 0, sizeof(__u32), sizeof(struct rw_veth));
RW_MAP_OUTER(rw_veth_slots, ARRAY_OF_MAPS, RW_VETH_INDEXES, rw_veth_inner, LIBBPF_PIN_BY_NAME);

/* Host-side veth ifindex -> its overflow index in rw_veth_slots, for a veth whose slot another
 * holds: looked up only when the slot's binding is another veth's (or none).
 */
RW_MAP(rw_veth_overflow, HASH, RW_MAX_ENDPOINTS, __u32, __u32, LIBBPF_PIN_BY_NAME);

/* The policy of a snapshot lives in inner maps, two slots per table. The agent writes the idle
 * slot's inner maps by diff against what they hold (user/lib/apply.c), then flips rw_config.state: a packet reads the slot once and sees one
 * whole snapshot. Updating an ARRAY_OF_MAPS waits for an RCU grace period in the kernel
 * (maybe_wait_bpf_programs() in kernel/bpf/syscall.c), so once the agent has replaced a slot no
 * program still runs on what was there. An empty slot looks up as NULL: not ready, drop.
 * The inner templates give sizes, not BTF types (map_defs.h): the agent creates the inner maps
 * itself, without BTF, anyway.
 *
 * One policy table: its inner template (NAME_inner) and the outer ARRAY_OF_MAPS of RW_SLOTS
 * slots pinned as NAME. LPM tries must be created with BPF_F_NO_PREALLOC (kernel/bpf/lpm_trie.c).
 * Each IPv6 table stands beside its IPv4 one: the same values, IPv6 keys (runwall.h).
 */
#define RW_SLOT_TABLE(name, kind, max, flags, key_sz, value_sz)         \
	RW_MAP_INNER(name##_inner, kind, max, flags, key_sz, value_sz); \
	RW_MAP_OUTER(name, ARRAY_OF_MAPS, RW_SLOTS, name##_inner, LIBBPF_PIN_BY_NAME)

RW_SLOT_TABLE(rw_pods, HASH, RW_MAX_PODS, 0, sizeof(__be32), sizeof(struct rw_pod));
RW_SLOT_TABLE(rw_pods6, HASH, RW_MAX_PODS, 0, 4 * sizeof(__be32), sizeof(struct rw_pod));
RW_SLOT_TABLE(rw_allow_exact, HASH, RW_MAX_ALLOW_EXACT, 0, sizeof(struct rw_allow_key),
	      sizeof(struct rw_rule));
RW_SLOT_TABLE(rw_allow_cidr, LPM_TRIE, RW_MAX_ALLOW_CIDR, BPF_F_NO_PREALLOC,
	      sizeof(struct rw_allow_lpm_key), sizeof(struct rw_rule));
RW_SLOT_TABLE(rw_allow_exact6, HASH, RW_MAX_ALLOW_EXACT, 0, sizeof(struct rw_allow6_key),
	      sizeof(struct rw_rule));
RW_SLOT_TABLE(rw_allow_cidr6, LPM_TRIE, RW_MAX_ALLOW_CIDR, BPF_F_NO_PREALLOC,
	      sizeof(struct rw_allow6_lpm_key), sizeof(struct rw_rule));
RW_SLOT_TABLE(rw_deny, LPM_TRIE, RW_MAX_DENY, BPF_F_NO_PREALLOC, sizeof(struct rw_cidr_lpm_key),
	      sizeof(__u32));
RW_SLOT_TABLE(rw_deny6, LPM_TRIE, RW_MAX_DENY, BPF_F_NO_PREALLOC, sizeof(struct rw_cidr6_lpm_key),
	      sizeof(__u32));
RW_SLOT_TABLE(rw_inbound, LPM_TRIE, RW_MAX_INBOUND, BPF_F_NO_PREALLOC,
	      sizeof(struct rw_inbound_lpm_key), sizeof(struct rw_rule));
RW_SLOT_TABLE(rw_inbound6, LPM_TRIE, RW_MAX_INBOUND, BPF_F_NO_PREALLOC,
	      sizeof(struct rw_inbound6_lpm_key), sizeof(struct rw_rule));

/* Who opened each flow, so that replies can be told from requests: one table per sandbox veth,
 * keyed by its ifindex. The library creates a veth's table when it binds the veth to a pod
 * (rw_endpoint_bind), replaces it with an empty one when the pod changes, and deletes it with
 * the binding, so a sandbox's flows can only ever displace its own. Hash inner maps may differ
 * in size from this template (bpf_map_meta_equal() in kernel/bpf/map_in_map.c compares type,
 * key and value sizes and flags, not max_entries; BPF_F_INNER_MAP is for arrays), so a table
 * has the --ct-per-sandbox size in force when it was made. The tables are plain hashes, not
 * LRU: a full table refuses the sandbox's next new flow (conntrack-full) rather than silently
 * breaking one of its open connections; the agent expires idle flows (rw_conntrack_expire).
 */
RW_MAP_INNER(rw_ct_inner, HASH, RW_CT_PER_SANDBOX, BPF_F_NO_PREALLOC, sizeof(struct rw_ct_key),
	     sizeof(struct rw_ct_value));
RW_MAP_OUTER(rw_conntrack, HASH_OF_MAPS, RW_MAX_ENDPOINTS, rw_ct_inner, LIBBPF_PIN_BY_NAME);

/* The sandbox's IPv6 flows: a table of its own beside the IPv4 one, made and replaced with it. */
RW_MAP_INNER(rw_ct6_inner, HASH, RW_CT_PER_SANDBOX, BPF_F_NO_PREALLOC, sizeof(struct rw_ct6_key),
	     sizeof(struct rw_ct_value));
RW_MAP_OUTER(rw_conntrack6, HASH_OF_MAPS, RW_MAX_ENDPOINTS, rw_ct6_inner, LIBBPF_PIN_BY_NAME);

/* The same tables by veth index (runwall.h, rw_veth_slots), the ones the programs use: an
 * ARRAY_OF_MAPS lookup is inlined by the verifier (array_of_map_gen_lookup() in
 * kernel/bpf/arraymap.c), a bounds check and two loads, where the hash of maps above costs a
 * helper call and a hash of the key. Filled and emptied with rw_conntrack by the library.
 */
RW_MAP_OUTER(rw_ct_slots, ARRAY_OF_MAPS, RW_VETH_INDEXES, rw_ct_inner, LIBBPF_PIN_BY_NAME);
RW_MAP_OUTER(rw_ct6_slots, ARRAY_OF_MAPS, RW_VETH_INDEXES, rw_ct6_inner, LIBBPF_PIN_BY_NAME);

/* Exact packet and byte counts per (direction, reason): [0] node, [run_idx] each run. */
RW_MAP(rw_counters, PERCPU_ARRAY, RW_MAX_RUNS, __u32, struct rw_counters, LIBBPF_PIN_BY_NAME);

/* The revision in which each run's verdicts last changed (include/runwall.h, rw_run_revs),
 * indexed by run_idx: the fast path's one check on a cached verdict. An ARRAY, so the verifier
 * inlines the lookup (array_map_gen_lookup() in kernel/bpf/arraymap.c): a bounds check and a
 * load, no helper call.
 */
RW_MAP(rw_run_revs, ARRAY, RW_MAX_RUNS, __u32, __u64, LIBBPF_PIN_BY_NAME);

/* Event budgets of veths no binding names (struct rw_budget; a bound veth's is in
 * rw_veth_budget): created by the first event of a veth, deleted when the veth is unbound.
 * Updated with atomics only (no lock), so LRU is fine.
 */
RW_MAP(rw_event_budget, LRU_HASH, RW_MAX_ENDPOINTS, __u32, struct rw_budget, LIBBPF_PIN_BY_NAME);

/* The event budgets of bound veths, by veth index (runwall.h, rw_veth_slots): an ARRAY, so the
 * lookup is inlined. Emptied by the library when an index passes to another veth; a veth no
 * binding names has its bucket in rw_event_budget instead.
 */
RW_MAP(rw_veth_budget, ARRAY, RW_VETH_INDEXES, __u32, struct rw_budget, LIBBPF_PIN_BY_NAME);

/* Verdict events; the agent is the one consumer and drains it on a timer. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RW_RINGBUF_BYTES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rw_events SEC(".maps");

/* The IPv6 programs, rw_egress6 and rw_ingress6 by enum rw_dir: rw_egress and rw_ingress
 * tail-call them on the IPv6 ethertype, so that IPv6 is judged by a program of its own, on a
 * stack and a verifier budget of its own (docs/ipv6.md), and IPv4's program holds none of it.
 * Filled by the library at every load (rw_datapath_load()); pinned, so that the programs left
 * attached while the agent is away still reach theirs. A slot left empty makes the tail call
 * fall through: IPv6 is then refused as unsupported-l2.
 */
RW_MAP(rw_progs6, PROG_ARRAY, RW_DIR_COUNT, __u32, __u32, LIBBPF_PIN_BY_NAME);

/* The ICMPv6 programs, rw_egress_icmp6 and rw_ingress_icmp6 by enum rw_dir: rw_egress6 and
 * rw_ingress6 tail-call them for every ICMPv6 packet that parsed, so that NDP and the errors'
 * quotes (icmp6.h), with their many reasons, are verified apart from the TCP and UDP judgement:
 * 6.1's verifier explores the two together as one program's paths (docs/ipv6.md). Filled by the
 * library at every load before rw_progs6, so that an IPv6 program that tail-calls here always
 * finds its ICMPv6 program; pinned as rw_progs6 is. A slot left empty makes the tail call fall
 * through: ICMPv6 is then refused as unsupported-protocol.
 */
RW_MAP(rw_progs_icmp6, PROG_ARRAY, RW_DIR_COUNT, __u32, __u32, LIBBPF_PIN_BY_NAME);

/* Memory for the IPv6 answer and revoke builders' frames (answer.h, revoke.h), one per CPU. The
 * verifier bounds the stack of a program and the subprograms it calls together at 512 bytes
 * (check_max_stack_depth(); 6.1 rounds each frame up to 32 bytes), and the IPv6 programs' own
 * frames are near 400: a builder's frame here adds nothing to it. A TC program runs to its end on
 * its CPU (softirq, or migration disabled), so no two builders share an entry at once.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, RW_SCRATCH_BYTES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rw_scratch SEC(".maps");

/* Host-side veth ifindex -> the one link-local address its pod speaks NDP from (bpf/icmp6.h):
 * the first NDP message out of the pod from a link-local source stores it (BPF_NOEXIST), and
 * NDP from any other link-local source is spoofed-source, so that one sandbox makes at most one
 * entry in the node's neighbour table (nd_tbl is node-wide, and the node makes an entry for the
 * source of every NS, and of an RS, it receives). Deleted when the veth is unbound or bound to
 * another pod (rw_endpoint_unbind), so a new pod may use a new one.
 */
RW_MAP(rw_ll6, HASH, RW_MAX_ENDPOINTS, __u32, __be32[4], LIBBPF_PIN_BY_NAME);

/* A restricted rule's selector, by (slot, rule id), and the containers it admits (runwall.h). */
RW_MAP(rw_from, HASH, RW_MAX_FROM, struct rw_from_key, struct rw_from, LIBBPF_PIN_BY_NAME);

RW_MAP(rw_admit, HASH, RW_MAX_ADMIT, struct rw_admit_key, struct rw_admit, LIBBPF_PIN_BY_NAME);

/* Every map of RW_MAPS (runwall.h), the list user space opens and pins by name, is defined
 * above: a missing one does not compile. That no map here is missing from the list is checked
 * against the built object (tests/unit/test_cli.c, test_map_list_is_the_object).
 */
#define X(id, map, shown) _Static_assert(sizeof(map) > 0, #map " of RW_MAPS is defined in maps.h");
RW_MAPS(X)
#undef X

#endif /* RUNWALL_BPF_MAPS_H */
