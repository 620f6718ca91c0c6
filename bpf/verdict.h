/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* verdict.h: ending a packet: count it, maybe report it, return the tc/tcx verdict.
 *
 * API
 *   offers: rw_count(), rw_finish_family(), rw_finish(), rw_finish6()
 *   needs:  runwall.h, bpf_net.h, maps.h, ctx.h, veth.h, answer.h, revoke.h
 */
#ifndef RUNWALL_BPF_VERDICT_H
#define RUNWALL_BPF_VERDICT_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "runwall.h"
#include "bpf_net.h"
#include "maps.h"
#include "ctx.h"
#include "veth.h"
#include "answer.h"
#include "revoke.h"

static __always_inline void rw_count(__u32 idx, __u8 dir, __u8 reason, __u32 len)
{
	struct rw_counters *c = bpf_map_lookup_elem(&rw_counters, &idx);

	/* Per-CPU values: plain increments are exact, no other CPU writes this copy. */
	if (!c || dir >= RW_DIR_COUNT || reason >= RW_REASON_COUNT)
		return;
	c->packets[dir][reason]++;
	c->bytes[dir][reason] += len;
}

/* What became of an event: every event is counted as exactly one of these. */
enum rw_event_fate { RW_EVENT_SENT, RW_EVENT_LOST, RW_EVENT_SUPPRESSED };

static __always_inline void rw_count_event(__u32 run_idx, enum rw_event_fate fate)
{
	__u32 idx = 0;

#pragma unroll
	for (int i = 0; i < 2; i++) {
		struct rw_counters *c = bpf_map_lookup_elem(&rw_counters, &idx);

		if (c) {
			if (fate == RW_EVENT_SENT)
				c->events_sent++;
			else if (fate == RW_EVENT_LOST)
				c->events_lost++;
			else
				c->events_suppressed++;
		}
		if (!run_idx)
			break;
		idx = run_idx;
	}
}

/* Compare-and-exchange attempts on a contended bucket before the event is suppressed. */
#define RW_BUDGET_RETRIES 4

/* One token from bucket `kind` of this veth (struct rw_budget: GCRA in ticks of 1/rate s): an
 * event's (drop or new flow, at event_rate) or an answer's (at answer_rate).
 * Lock-free and exact under any interleaving of CPUs: tat only moves by compare-and-exchange,
 * always from the value the decision was made on, and never backwards except when it lies
 * further ahead than any rate could have put it (the rate was changed). Losing the race
 * RW_BUDGET_RETRIES times suppresses the event: a flood is never paid for by going over budget.
 * Returns 1 when the event may be sent. A global function (verified once, on its own, whatever
 * its callers: rw_finish_family() is inlined at every verdict), so its arguments are plain
 * numbers: the veth, its index and whether it is bound (x->veth_idx, x->bound), the kind.
 */
__noinline int rw_take_token(__u32 ifindex, __u32 veth_idx, __u32 bound, __u32 kind)
{
	__u32 zero = 0;
	struct rw_config *cfg = bpf_map_lookup_elem(&rw_config, &zero);
	struct rw_budget *b = NULL;
	__u64 now, rate, burst, old, next;

	if (!cfg)
		return 1;
	rate = kind == RW_BUDGET_ANSWER ? cfg->answer_rate : cfg->event_rate;
	burst = kind == RW_BUDGET_ANSWER ? cfg->answer_burst : cfg->event_burst;
	if (!rate)
		return 1;
	/* A bound veth's bucket is at its index (rw_endpoint_of(), the first step of every
	 * packet, found it); any other veth's is in the hash, by ifindex.
	 */
	if (bound)
		b = bpf_map_lookup_elem(&rw_veth_budget, &veth_idx);
	if (!b)
		b = bpf_map_lookup_elem(&rw_event_budget, &ifindex);
	if (!b) {
		struct rw_budget fresh = {}; /* tat 0: a full bucket */

		bpf_map_update_elem(&rw_event_budget, &ifindex, &fresh, BPF_NOEXIST);
		b = bpf_map_lookup_elem(&rw_event_budget, &ifindex);
		if (!b)
			return 0;
	}
	/* The coarse clock (CLOCK_MONOTONIC at the last tick) costs a load, not a clocksource
	 * read: buckets count whole ticks of 1/rate s, and the coarse clock lags by at most one
	 * jiffy, so the bound moves by at most rate x 1 jiffy, never the exactness of the refill.
	 */
	now = RW_BUDGET_TICKS(bpf_ktime_get_coarse_ns(), rate);
	if (kind >= RW_BUDGET_KINDS)
		return 0;
#pragma unroll
	for (int i = 0; i < RW_BUDGET_RETRIES; i++) {
		old = *(volatile __u64 *)&b->tat[kind];
		if (old > now + 2 * burst + 2) {
			/* Written under another rate: restart from an empty bucket. */
			__sync_val_compare_and_swap(&b->tat[kind], old, now + burst);
			continue;
		}
		if (old >= now + burst)
			return 0;
		next = (old > now ? old : now) + 1;
		if (__sync_val_compare_and_swap(&b->tat[kind], old, next) == old)
			return 1;
	}
	return 0;
}

static __always_inline void rw_report(struct rw_ctx *x, __u8 verdict, __u8 reason, __u8 answer,
				      const int six)
{
	__u32 run_idx = x->pod ? x->pod->run_idx : 0;
	struct rw_event *ev;

	if (!rw_take_token(x->ifindex, x->veth_idx, x->bound,
			   verdict == RW_VERDICT_DROP ? RW_BUDGET_DROP : RW_BUDGET_FLOW)) {
		rw_count_event(run_idx, RW_EVENT_SUPPRESSED);
		return;
	}
	ev = bpf_ringbuf_reserve(&rw_events, sizeof(*ev), 0);
	if (!ev) {
		rw_count_event(run_idx, RW_EVENT_LOST);
		return;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->ts_ns = bpf_ktime_get_ns();
	ev->revision = x->revision;
	ev->ifindex = x->ifindex;
	if (x->pod) {
		ev->run_idx = x->pod->run_idx;
		ev->run_gen = x->pod->run_gen;
		__builtin_memcpy(ev->run_id, x->pod->run_id, RW_RUN_ID_LEN);
	}
	ev->rule_id = x->rule_id;
	if (six) {
		__builtin_memcpy(ev->saddr6, x->pkt.saddr6, sizeof(ev->saddr6));
		__builtin_memcpy(ev->daddr6, x->pkt.daddr6, sizeof(ev->daddr6));
	} else {
		ev->saddr = x->pkt.saddr;
		ev->daddr = x->pkt.daddr;
	}
	ev->sport = x->pkt.sport;
	ev->dport = x->pkt.dport;
	ev->proto = x->pkt.proto;
	ev->dir = x->dir;
	ev->verdict = verdict;
	ev->reason = reason;
	ev->path = x->path;
	ev->answer = answer;
	ev->ethertype = x->pkt.ethertype;
	/* Who in the pod sent it (principal.h), paid only for an event that is sent. */
	ev->uid = RW_UID_NONE;
	if (x->dir == RW_DIR_EGRESS) {
		ev->uid = bpf_get_socket_uid(x->skb);
		ev->cgroup_id = bpf_skb_cgroup_id(x->skb);
	}
	/* No wakeup per event: the agent drains the ring on a short timer (BPF_RB_NO_WAKEUP). */
	bpf_ringbuf_submit(ev, BPF_RB_NO_WAKEUP);
	rw_count_event(run_idx, RW_EVENT_SENT);
}

/* Answers by kind, node-wide and for the run, like rw_count(). */
static __always_inline void rw_count_answer(__u32 run_idx, __u8 answer)
{
	__u32 idx = 0;

	if (answer == RW_ANSWER_NONE || answer >= RW_ANSWER_COUNT)
		return;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		struct rw_counters *c = bpf_map_lookup_elem(&rw_counters, &idx);

		if (c)
			c->answers[answer]++;
		if (!run_idx || run_idx >= RW_MAX_RUNS)
			break;
		idx = run_idx;
	}
}

/* The answer of a refusal, within the sandbox's answer budget: the packet becomes the answer
 * (answer.h), or it is a plain drop and RW_ANSWER_BUDGET says why there is none. `six` as
 * rw_finish_family()'s: each family's builders are subprograms of their own.
 */
static __always_inline __u8 rw_answer(struct rw_ctx *x, __u8 kind, __u8 revoke, const int six)
{
	int err;

	if (kind == RW_ANSWER_NONE)
		return kind;
	if (!rw_take_token(x->ifindex, x->veth_idx, x->bound, RW_BUDGET_ANSWER))
		return RW_ANSWER_BUDGET;
	/* A failed rewrite leaves a packet that is dropped like any refusal. */
	if (revoke && six)
		err = rw_revoke6_build(x->skb, x->dir == RW_DIR_EGRESS, x->pkt.l4_off);
	else if (revoke)
		err = rw_revoke_build(x->skb, x->dir == RW_DIR_EGRESS);
	else if (six)
		err = rw_answer6_build(x->skb, kind, x->pkt.l4_off);
	else
		err = rw_answer_build(x->skb, kind);
	return err ? RW_ANSWER_NONE : kind;
}

/* The refusal mode of a proven source: its run's, or the node's for a pod whose run has ended.
 * Any other source is never answered.
 */
static __always_inline __u8 rw_refusal_of(const struct rw_ctx *x)
{
	if (x->identified && x->pod)
		return x->pod->refusal;
	return x->runless ? x->node_refusal : RW_REFUSAL_DROP;
}

/* Counts first (the truth), then the answer, then the event (a sample), then the verdict.
 * `six` is a constant of each call (rw_finish(), rw_finish6()): the family of the packet, as
 * rw_parse() said it, so that each family's program path holds only its own steps.
 */
static __always_inline int rw_finish_family(struct rw_ctx *x, __u8 reason, const int six)
{
	__u8 verdict = reason == RW_REASON_ALLOWED ? RW_VERDICT_ALLOW : RW_VERDICT_DROP;
	__u32 run_idx = x->pod ? x->pod->run_idx : 0;
	__u8 answer = RW_ANSWER_NONE, revoke = 0;

	if (verdict == RW_VERDICT_DROP && six) {
		answer = rw_answer6_kind(&x->pkt, x->pod, x->dir, x->identified);
		revoke = rw_revoke6_applies(&x->pkt, x->dir, x->ct, rw_refusal_of(x));
		if (revoke)
			answer = RW_ANSWER_RST;
	} else if (verdict == RW_VERDICT_DROP) {
		answer = rw_answer_kind(&x->pkt, x->pod, x->dir, x->identified);
		/* A known flow's segment: both ends are reset (revoke.h), under the answer "rst". */
		revoke = rw_revoke_applies(&x->pkt, x->dir, x->ct, rw_refusal_of(x));
		if (revoke)
			answer = RW_ANSWER_RST;
	}
	/* wrong-principal: the flow of this 4-tuple, if any, is another principal's (the
	 * sidecar's), and a refused copy of it closes nothing. Only a SYN is answered, by a reset
	 * of sequence 0 that no established socket accepts (RFC 5961 3.2); a reset or an ICMP
	 * error for any other packet would reach the socket whose flow it copied.
	 */
	if (reason == RW_REASON_WRONG_PRINCIPAL) {
		revoke = 0;
		if (!rw_tcp_is_syn(&x->pkt))
			answer = RW_ANSWER_NONE;
	}
	if (*x->dry_run) {
		x->explain->runs++;
		x->explain->reason = reason;
		x->explain->path = x->path;
		x->explain->verdict = verdict;
		x->explain->rule_id = x->rule_id;
		x->explain->run_idx = run_idx;
		x->explain->answer = answer;
		answer = RW_ANSWER_NONE; /* judge, change nothing: no packet is rewritten */
	} else {
		rw_count(0, x->dir, reason, x->skb->len);
		if (run_idx && run_idx < RW_MAX_RUNS)
			rw_count(run_idx, x->dir, reason, x->skb->len);
		/* Cache the verdict of a known flow for its next packets (the fast path). The stamp
		 * goes last; a packet reading half of a restamp under the same revision finds
		 * the same verdict and run either way.
		 */
		if (verdict == RW_VERDICT_ALLOW && x->ct && x->ct->stamp != x->revision) {
			x->ct->rule_id = x->rule_id;
			x->ct->run_idx = run_idx;
			x->ct->path = x->ct_path;
			x->ct->stamp = x->revision;
		}
		answer = rw_answer(x, answer, revoke, six);
		rw_count_answer(run_idx, answer);
		if (verdict == RW_VERDICT_DROP || x->new_flow)
			rw_report(x, verdict, reason, answer, six);
	}
	/* Allowed packets go on to the next enforcer on the hook, never straight through. An
	 * answer goes to the peer of the veth it came in on: the pod's own eth0 (answer.h); on
	 * the veth's egress (a revoke's reset of a remote's segment) it is on its way there.
	 */
	if ((answer == RW_ANSWER_RST || answer == RW_ANSWER_ICMP) && x->dir == RW_DIR_INGRESS)
		return TCX_NEXT;
	if (answer == RW_ANSWER_RST || answer == RW_ANSWER_ICMP)
		return bpf_redirect_peer(x->ifindex, 0);
	return verdict == RW_VERDICT_ALLOW ? TCX_NEXT : TCX_DROP;
}

static __always_inline int rw_finish(struct rw_ctx *x, __u8 reason)
{
	return rw_finish_family(x, reason, 0);
}

static __always_inline int rw_finish6(struct rw_ctx *x, __u8 reason)
{
	return rw_finish_family(x, reason, 1);
}

#endif /* RUNWALL_BPF_VERDICT_H */
