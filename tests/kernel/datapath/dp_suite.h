/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* dp_suite.h: what the parts of test_datapath share: the test node, its policies, the case
 * table's shape, and the fixtures and tests each part defines.
 */
#ifndef RUNWALL_TEST_DP_SUITE_H
#define RUNWALL_TEST_DP_SUITE_H

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <sys/socket.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "apply.h"
#include "datapath.h"
#include "harness.h"
#include "log.h"
#include "pkt.h"
#include "policy.h"
#include "reasons.h"
#include "realtraffic.h"
#include "rulename.h"

#define TCP	IPPROTO_TCP
#define UDP	IPPROTO_UDP
#define SYN	0x02
#define ACK	0x10
#define SYNACK	0x12
#define RST	0x04
#define FINACK	0x11
#define E	RW_DIR_EGRESS
#define I	RW_DIR_INGRESS
#define ALLOW	RW_VERDICT_ALLOW
#define DROP	RW_VERDICT_DROP
#define NO_PATH 0xff

/* Sandboxes of the test node: rwt0 and rwt1 are bound to pods of the snapshot, rwt2 to nothing,
 * rwt3 to a pod IP no snapshot names.
 */
#define POD_A "10.1.2.3" /* run-7f3a, allowlist */
#define POD_B "10.1.2.4" /* run-9c01, open */
#define POD_X "10.1.2.9" /* bound, unknown to the policy */
struct tcase {
	const char *name;
	int dev; /* index into devs[] */
	int dir;
	struct pkt_spec pkt;
	int verdict;
	int reason;
	int path;	  /* expected allow path, NO_PATH for drops */
	int event;	  /* an event is expected */
	const char *run;  /* run id expected in counters and event, NULL: none */
	int answer;	  /* enum rw_answer the refusal gets (RW_ANSWER_NONE: a plain drop) */
	const char *rule; /* the event's rule name (rw_event_rule_name()), NULL: not checked */
};

#define FLOW(src_, dst_, proto_, sport_, dport_) \
	.src = src_, .dst = dst_, .proto = proto_, .sport = sport_, .dport = dport_
/* A case's veth, direction and packet. */
#define EG(dev_, src_, dst_, proto_, sport_, dport_, flags_) \
	.dev = dev_, .dir = E,                               \
	.pkt = {FLOW(src_, dst_, proto_, sport_, dport_), .tcp_flags = flags_}
#define IN(dev_, src_, dst_, proto_, sport_, dport_, flags_) \
	.dev = dev_, .dir = I,                               \
	.pkt = {FLOW(src_, dst_, proto_, sport_, dport_), .tcp_flags = flags_}
#define ALLOWED(path_, event_, run_) \
	.verdict = ALLOW, .reason = RW_REASON_ALLOWED, .path = path_, .event = event_, .run = run_
#define DROPPED(reason_, run_) \
	.verdict = DROP, .reason = reason_, .path = NO_PATH, .event = 1, .run = run_
/* A refusal of the pod's own packet, answered into the pod (a redirect to the veth's peer). */
#define REFUSED_RST(reason_, run_)  DROPPED(reason_, run_), .answer = RW_ANSWER_RST
#define REFUSED_ICMP(reason_, run_) DROPPED(reason_, run_), .answer = RW_ANSWER_ICMP
/* A refused remote's segment of a known flow: it goes on into the pod as the pod's reset, and a
 * clone resets the remote (bpf/revoke.h).
 */
#define REVOKED(reason_, run_) DROPPED(reason_, run_), .answer = RW_ANSWER_RST

#define SEQ0 0x01020000u /* pkt_build()'s sequence number */

/* fixtures.c */
extern const char *const devs[];
extern int ifindex_of[4];
extern const char policy_v1[];
extern const char policy_v2[];
extern struct rw_datapath dp;
extern const struct rw_policy *dp_policy; /* the snapshot apply_json() or apply6() made live */
extern struct ring_buffer *ring;
extern struct rw_event events[64];
extern int n_events;
int on_event(void *ctx, void *data, size_t len);
void drain_events(void);
__u32 run_idx_of(const char *run);
int test_run(int dir, int ifindex, const void *pkt, size_t len, __u32 repeat, int *retval);
const char *ret_name(int ret);
void run_case(const struct tcase *c);
void run_table(const struct tcase *cases, size_t n);
/* A series of snapshots, each applied over the one before it (rw_apply()'s prev): the last. */
struct applied {
	struct rw_policy last;
	int have;
};
int apply_over(struct applied *s, const char *json, const char *what, struct rw_apply_result *res,
	       char *err, size_t errlen);
void applied_end(struct applied *s);
void apply_json(const char *json, int expect_err, const char *what);
void service_rule(int out, const char *daddr, __u16 dport, const char *what);
void bind_veth(int dev, const char *ip);
void make_veths(void);
void sh(const char *cmd); /* a shell command that must succeed, else FATAL */
__u64 mono_ns(void);
void dump_hex(const char *what, const __u8 *b, size_t len);
struct rw_config config_get(void);
int check_one_packet(const char *name, const char *who, const struct rw_counters *before,
		     const struct rw_counters *after, int dir, int reason);
void config_put(const struct rw_config *cfg);
__u64 revision_now(void);
void set_lease(__u64 deadline_ns);

/* reasons.c */
extern const struct tcase not_ready_cases[];
extern const struct tcase v1_cases[];
extern const struct tcase v2_cases[];
extern const size_t n_not_ready_cases, n_v1_cases, n_v2_cases;
void test_metadata_beats_rules(void);
int ct_entry(int dev, const char *pod, __u16 pod_port, const char *peer, __u16 peer_port,
	     __u8 proto, struct rw_ct_value *v);
void ct_put(int dev, const char *pod, __u16 pod_port, const char *peer, __u16 peer_port, __u8 proto,
	    const struct rw_ct_value *v);
void test_run_rules_after_ranges(void);

/* cache.c */
void test_verdict_cache(void);
void test_stale_stamp(void);
void test_run_generations(void);

/* lease.c */
void test_lease(void);
void test_lease_apply(void);

/* apply.c */
void test_generations(void);
char *policy_at(unsigned int revision, int v3);
void test_interrupted_apply(void);
void test_big_apply(void);

/* apply_idle_run.c */
void test_idle_run(void);
void test_probe_scope(void);

/* budget.c */
void set_budget(__u32 rate, __u32 burst);
void test_event_budget(void);
void test_event_budget_exact(void);

/* answers.c: a case of the answers to refusals, IPv4 or IPv6 as its packet is (.pkt.ipv6). */
struct acase {
	const char *name;
	int dev;
	struct pkt_spec pkt;
	int reason;	/* ANY_ICMP: not checked */
	int answer;	/* enum rw_answer */
	__u32 seq, ack; /* RW_ANSWER_RST: the reset's numbers */
	__u8 flags;
	size_t quote; /* RW_ANSWER_ICMP: bytes quoted, from the IP header on */
};

#define ANY_ICMP -1 /* ICMPv6's reason is icmp6.h's to give, by type */
/* A row of an answer case table: the packet's fields last. */
#define ANSWER_CASE(name_, dev_, reason_, answer_, ...)      \
	{                                                    \
		name_, dev_, {__VA_ARGS__}, reason_, answer_ \
	}
#define RST_ANSWER(seq_, ack_, flags_) RW_ANSWER_RST, seq_, ack_, flags_, 0
#define ICMP_ANSWER(quote_)	       RW_ANSWER_ICMP, 0, 0, 0, quote_
#define NO_ANSWER		       RW_ANSWER_NONE, 0, 0, 0, 0

void run_answer_case(const struct acase *c);
struct syn_flood {
	int redirected, dropped; /* answered; over the budget, plain drops */
	__u64 ns;
};
void syn_flood(const struct pkt_spec *syn, int n, struct syn_flood *f);
int syn_flood_within(const struct syn_flood *f, int n, int burst);
size_t want_tcp4(const __u8 *dmac, const __u8 *smac, const char *saddr, const char *daddr,
		 __u16 sport, __u16 dport, __u32 seq, __u32 ack, __u8 flags, __u16 win, __u8 *w);
size_t want_icmp(const struct pkt_spec *s, const __u8 *in, size_t quote, __u8 *w);
void set_answer_budget(__u32 rate, __u32 burst);
int test_run_out(int dir, int ifindex, const void *pkt, size_t len, __u8 *out, __u32 *out_len,
		 int *retval);
void put16be(__u8 *p, __u16 v);
void put32be(__u8 *p, __u32 v);
void put_tcp(__u8 *t, __u16 sport, __u16 dport, __u32 seq, __u32 ack, __u8 flags, __u16 win);
__u16 tcp_csum(const __u8 *ip, const __u8 *tcp, size_t tcp_len);
extern const __u8 pod_mac[6], gw_mac[6];
int answer_sums_ok(const __u8 *f, size_t len);
void test_answers(void);
void egress_attach_tc(struct bpf_tc_hook *hook, struct bpf_tc_opts *ours, int dev);
void egress_detach_tc(struct bpf_tc_hook *hook, struct bpf_tc_opts *ours);
void test_answer_tunnels(void);
void test_answer_not_ready(void);
void test_answer_budget(void);
void test_refusal_modes(void);

/* revoke.c: a case of the revoke, IPv4 or IPv6 as its packet is (.pkt.ipv6). */
struct rcase {
	const char *name;
	int dir;
	struct pkt_spec pkt; /* a segment on veth 0 (POD_A or POD_A6, run-7f3a) */
	int tracked;	     /* its flow is in the veth's table of its family */
	int ret;	     /* the program's verdict */
	/* The pod's reset (the packet out of the run) and the remote's (entering the veth); a
	 * zero seq with no reset expected: the packet is dropped as it came, nothing is sent.
	 */
	int resets;
	__u32 pod_seq, remote_seq;
};

/* A row of a revoke case table: the packet's fields last. */
#define REVOKE_CASE(name_, dir_, tracked_, ret_, resets_, ...)      \
	{                                                           \
		name_, dir_, {__VA_ARGS__}, tracked_, ret_, resets_ \
	}
#define TRACKED			      1
#define UNTRACKED		      0
#define RESETS(pod_seq_, remote_seq_) 1, pod_seq_, remote_seq_
#define NO_RESETS		      0, 0, 0
/* A TCP segment of the pod's port to the remote's 443, and the other way. */
#define SEG_OUT(pod_, remote_, pod_port_) \
	.src = pod_, .dst = remote_, .proto = TCP, .sport = pod_port_, .dport = 443
#define SEG_IN(remote_, pod_, pod_port_) \
	.src = remote_, .dst = pod_, .proto = TCP, .sport = 443, .dport = pod_port_

int wait_scale(void);
int revoke_tap_open(int dev);
void revoke_tap_close(int fd, int dev);
void run_revoke_case(const struct rcase *c, int tap);
void test_revoke(void);
void revoke_drop_mode(const struct rcase cases[2], __u16 port, const char *family);
void test_revoke_drop_mode(void);
void test_revoke_ended(void);

/* answers6.c */
size_t want_icmp6(const struct pkt_spec *s, const __u8 *in, size_t quote, __u8 *w);
void apply_policy6(unsigned int revision, const char *node, const char *run, const char *what);
void test_answers6(void);
void test_answer6_budget(void);
void test_answers6_sockets(void);
void test_refusal_modes6(void);

/* revoke6.c */
int answer6_sums_ok(const __u8 *f, size_t len);
size_t want_tcp6(const __u8 *dmac, const __u8 *smac, const char *saddr, const char *daddr,
		 __u16 sport, __u16 dport, __u32 seq, __u32 ack, __u8 flags, __u16 win, __u8 *w);
void test_revoke_probe6(void);
void test_revoke6(void);
void test_revoke6_drop_mode(void);

/* revoke_probe.c */
void test_revoke_probe_shares(void);

/* conntrack.c */
void set_ct_share(__u32 per_sandbox);
void test_conntrack_isolation(void);
void test_conntrack_expire(void);
void test_conntrack_close(void);
void test_conntrack_slots(void);

/* ring.c */
void test_ring_full(void);

/* flip.c */
void test_flip(void);
void test_flip_pinned(void);
void test_flip_lease(void);

/* apply6.c */
void test_apply6(void);

/* ipv6.c */
void test_ipv6_not_ready(void);
void test_ipv6(void);

/* ipv6_bind.c */
void test_ipv6_binding(void);

/* ipv6_policy.c */
void test_ipv6_policy(void);
void bind_dual(int dev, const char *ip4, const char *ip6);

/* rulename.c */
void test_rule_names(void);

/* principal.c */
void test_principals(void);

/* icmp6.c, ndp.c */
void put_flow6(const char *pod, __u16 pod_port, const char *peer, __u16 peer_port, __u8 proto,
	       __u64 stamp, const char *run);
void icmp6_setup(void);
void icmp6_teardown(void);
void test_ndp(void);
void test_icmp6(void);

/* lookups.c */
void test_lookups(void);

#endif /* RUNWALL_TEST_DP_SUITE_H */
