/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* agent.h: the agent's state, shared by its files (not by the library or the CLI). struct agent
 * holds one part per file that changes it (struct agent_policy, agent_sandboxes, ...); a file
 * writes only its own part, and changes another's through that file's functions below.
 *   main_loop.c     rw_agent_run() (agent_run.h): setup, the epoll loop, signals, timers
 *   sandboxes.c     sandbox veths: attach, bind pod IPs from /32 and /128 routes, forget, resync
 *   policy_apply.c  the policy in force: snapshots and run changes from every source, applied
 *   policy_file.c   the --policy file (inotify): applied, adopted or refused
 *   pw_follow.c     PolicyWatch (--policy-url): the control plane's messages, applied and acked
 *                   (pw_stream.c its transport, pw_msg.c its wire format)
 *   cni_chain.c     runwall-cni kept in the node's CNI conf file (--cni-conf-dir, inotify)
 *   drain.c         the ring buffer drained in bounded steps, on each tick
 *   events.c        the ring buffer's events, fanned out to the socket's subscribers
 *   ctl_server.c    the control socket: status, apply, policy, events, requests, shutdown
 *   view_publish.c  the agent's state handed to the HTTP view (agent_view.c, http.c) on its tick
 *   containers.c    the sandbox pods' containers: names, cgroup v2 ids, veths (containers.h)
 *   staged.c        the staged snapshot: loaded privately, never enforced, each event judged
 *                   under it too
 */
#ifndef RUNWALL_AGENT_H
#define RUNWALL_AGENT_H

#include <arpa/inet.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <net/if.h>
#include <bpf/libbpf.h>
#include <jansson.h>

#include "apply.h"
#include "principals.h"
#include "attach.h"
#include "datapath.h"
#include "ipaddr.h"
#include "netlink.h"
#include "policy.h"
#include "agent_view.h"
#include "containers.h"
#include "pw_stream.h"

#define TICK_MS		   50 /* ring buffer drain and subscriber flush period */
#define MAX_SUBS	   64
#define SUB_BUF_MAX	   (1u << 20) /* per subscriber; beyond it events are skipped */
#define REQUEST_TIMEOUT_MS 2000

struct subscriber {
	int fd;
	char *buf;
	size_t len;
	unsigned long long delivered;
	unsigned long long skipped;
};

/* The socket's event subscribers (events.c writes it). */
struct agent_subscribers {
	struct subscriber subs[MAX_SUBS];
	int n_subs;
	unsigned long long delivered_gone; /* of subscribers that left */
	unsigned long long skipped_gone;
};

/* A control socket client between accept and close: its request is read and its reply written
 * without blocking, each within REQUEST_TIMEOUT_MS of the accept, so that no client can hold the
 * loop (a client that sends half a request and waits, or never reads its reply, is dropped).
 */
struct ctl_client {
	int fd;
	char *buf; /* the request as read so far, then the reply */
	size_t len, cap;
	size_t off; /* reply bytes written */
	bool replying;
	int64_t deadline_ms; /* monotonic */
};

#define MAX_CLIENTS 32

/* The control socket's clients (ctl_server.c writes it). */
struct agent_clients {
	struct ctl_client clients[MAX_CLIENTS];
	int n_clients;
	unsigned long long clients_dropped; /* over their deadline, or too many at once */
};

struct run_state {
	char id[RW_RUN_ID_LEN];
	__u32 gen;
	int64_t since; /* realtime ns at which this generation became enforced */
};

/* Run changes made on the policy and not applied yet (agent_change_compose()): `runs` holds the
 * policy in force (runs.base) and what each change made or replaced, `edits` what each does to
 * the kept document (struct doc_edit, policy_apply.c), `changes` the diff's lines for the log.
 */
struct doc_edit;
struct agent_batch {
	bool open;
	struct rw_policy_batch runs;
	struct doc_edit *edits;
	size_t n_edits;
	json_t *changes;
};

/* The policy in force and its runs (policy_apply.c, the apply path, writes it). */
struct agent_policy {
	/* The snapshot in force, when this agent knows it; while a batch of run changes is open,
	 * the policy its last change made (the one in force is batch.runs.base).
	 */
	struct rw_policy policy;
	struct agent_batch batch;
	bool have_policy;
	/* policy was adopted at start: the file's snapshot with the revision in force, but the
	 * kernel cannot say whether its content is what was applied. Not a `prev` for rw_apply():
	 * the next apply re-judges every run's flows.
	 */
	bool policy_adopted;
	char *policy_text; /* its text, for `runwall explain` to name rules (agent_policy_text()) */
	size_t policy_text_len;
	/* The snapshot as a document, changed run by run, and written out as policy_text only
	 * when read: PolicyWatch's snapshot as it came, or one kept as text read at its first
	 * change. NULL until then.
	 */
	json_t *policy_doc;
	struct rw_policy_index policy_index; /* of policy, built by the first run change */
	char policy_source[256];
	char *policy_bytes; /* the file's last content, to ignore no-op rewrites */
	size_t policy_len;
	struct rw_apply_result last_apply;
	/* An apply's reply or ack is on its way, its probes and grace period not run yet
	 * (agent_settle()).
	 */
	bool settle_pending;
	int64_t ready_since;
	struct run_state *runs;
	size_t n_runs;
	/* The apply's share of what /metrics needs of the agent (applies, apply_seconds,
	 * apply_bucket, applies_refused, probes_*); view_publish.c adds the rest.
	 */
	struct rw_metrics_snap metrics;
};

struct sandbox {
	int ifindex;
	char ifname[IF_NAMESIZE];
	/* The pod bound to it, as the kernel holds it (rw_endpoint: its IPv4, its IPv6 and the
	 * host veth's link-local gateway); flags 0 when none.
	 */
	struct rw_endpoint pod;
	enum rw_attach_mode mode[RW_DIR_COUNT];
	bool attached[RW_DIR_COUNT];
	bool seen; /* mark for a full resync */
	/* A failed attach is tried again after a backoff (ATTACH_RETRY_MIN_MS, doubling up to
	 * ATTACH_RETRY_MAX_MS) by the tick, not only at the next resync.
	 */
	unsigned int attach_failures; /* in a row; 0 once attached */
	unsigned int backoff_ms;
	int64_t retry_at_ms; /* monotonic; 0: no retry pending */
	char attach_error[160];
	/* The pod its /32 and /128 routes name but the node has no room to bind (the endpoint
	 * table or the conntrack budget is full): deny-all, and bound by the resync that finds
	 * room. flags 0: none waits.
	 */
	struct rw_endpoint waiting_pod;
	char bind_error[160];
};

/* The sandbox veths and what happened to them (sandboxes.c writes it). */
struct agent_sandboxes {
	struct sandbox *sbx;
	size_t n_sbx;
	/* The last interfaces with the prefix but not veths (the VPC CNI's vlan.eth.N trunks),
	 * left alone and logged once each.
	 */
	int not_veth[8];
	unsigned int n_not_veth;
	bool links_dirty;		    /* netlink overran or failed: dump everything again */
	unsigned long long attach_failures; /* every failed attach, counted for status */
	unsigned long long attach_retries;
	unsigned long long
		hook_repairs; /* runwall found missing or not first on a hook, put back */
	unsigned long long bind_failures; /* bindings refused for want of room, or failed */
};

/* runwall-cni's place in the node's CNI configuration (cni_chain.c). */
struct agent_cni {
	const char *conf_dir; /* --cni-conf-dir; NULL: not watched */
	int inotify_fd;
	bool chained;
	char file[256]; /* the file the runtime loads */
	char why[512];	/* when not chained */
	unsigned long long repairs, checks;
	int64_t changed_at_ms;	    /* monotonic: an event said the folder changed */
	int64_t last_window_ms;	    /* the last repair: from that event to the entry back */
	int64_t unchained_since_ms; /* 0 while chained */
};

#define ATTACH_RETRY_MIN_MS 100
#define ATTACH_RETRY_MAX_MS 5000
/* One drain of the ring, on each tick: libbpf 1.1's ring_buffer__consume() goes on while
 * records keep arriving, so a flooding sandbox could hold the loop. A drain stops after
 * RING_DRAIN_BUDGET records, what the ring holds (RW_RINGBUF_BYTES over a record and its 8-byte
 * header), or after RING_DRAIN_MS of work, whichever comes first; the rest waits for the next
 * tick (and a full ring counts events_lost in the kernel, it never changes a verdict). With
 * cheap events that is a full ring per tick (about 650 000 events/s); with costly ones (every
 * event turned into JSON for subscribers and the view) at most RING_DRAIN_MS of each TICK_MS.
 * Half the tick: at ~10 us an event with the view on, that drains ~50 000 events/s, what 128
 * sandboxes (the default conntrack budget's count) send at their full event budgets (2 x 200/s
 * each), and a control request still waits at most that long.
 */
#define RING_DRAIN_BUDGET      ((int)(RW_RINGBUF_BYTES / (sizeof(struct rw_event) + 8)))
#define RING_DRAIN_MS	       25
#define RING_DRAIN_CLOCK_EVERY 64 /* records between two reads of the clock */

/* One drain of the ring (drain.c writes it). */
struct agent_drain {
	int ring_budget;		/* records left in this drain */
	int64_t ring_deadline_ns;	/* CLOCK_MONOTONIC: the drain stops there */
	unsigned long long ring_capped; /* drains stopped by their budget or their time */
	int64_t last_ns;		/* CLOCK_MONOTONIC: the last drain's start */
};

/* PolicyWatch (pw_follow.c, pw_stream.c): NULL watch without --policy-url. */
struct agent_follow {
	struct rw_pw_opts opts;
	struct rw_watch *watch;
	uint64_t received; /* the highest revision a message carried */
	uint64_t applied, refusals;
	int64_t last_message_ns; /* CLOCK_MONOTONIC; 0: none yet */
	char last_refusal[400];
	struct rw_metrics_snap metrics; /* its share of /metrics: the watch_* fields */
};

/* The status, readiness and metrics handed to the HTTP view (view_publish.c writes it). */
struct agent_publish {
	bool dirty; /* something changed: publish the status at the next tick */
	unsigned int ticks;
	unsigned int last; /* the tick of the last publish */
};

/* The staged snapshot (staged.c writes it): a policy beside the one in force, applied to the
 * programs loaded privately (dp: nothing pinned, nothing attached), never enforced. Each event
 * drained is judged under it too; the verdicts are kept per distinct flow in `cache`.
 */
#define STAGED_CACHE_SLOTS 8192 /* a power of two */
struct staged_slot;
struct agent_staged {
	bool have;
	struct rw_policy policy;
	struct rw_datapath dp;
	char source[256];
	int64_t since; /* realtime ns */
	double load_ms;
	char *changes; /* rw_policy_diff() from the policy in force when staged */
	int n_changes;
	struct rw_ip bound; /* the pod bound in dp's maps */
	bool bound_valid;
	struct staged_slot *cache; /* STAGED_CACHE_SLOTS, kept across snapshots */
	size_t cache_used;
	/* Events judged under it, those whose verdict differed, those not judged (no run, not
	 * TCP or UDP, a reason that is not the policy's, a rule's "from"), failed test runs.
	 */
	unsigned long long judged, differences, unjudged, failures;
};

/* The agent: main_loop.c's own fields (set up from struct agent_opts, then the loop's), and one
 * part per file that changes it. A file writes only its own part; any file may read them all.
 */
/* The containers the datapath admits (admissions.c writes it): the table's containers with a
 * cgroup, sorted by cgroup id, and the live slot's rw_admit made from them.
 */
struct agent_admissions {
	struct rw_principal *p;
	size_t n, cap;
	unsigned long long gen; /* the containers' gen p was built from */
	bool built;
	bool written; /* the live slot's rw_admit holds gen's */
	unsigned long long writes, failures;
};

void admissions_init(struct agent *a);
void admissions_refresh(struct agent *a);
void admissions_sync(struct agent *a);
void admissions_free(struct agent *a);

/* The link thread (link_thread.c): one piece of the loop's link work at a time. */
struct agent_link_thread {
	pthread_t thread, loop;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done_fd; /* eventfd: the piece is done */
	bool started, stop;
	bool busy;	     /* the loop waits for a piece (the loop's only) */
	bool containers_due; /* a bind on the thread asked for containers_poll() */
	int (*fn)(struct agent *a, void *arg);
	void *arg;
	int ret;
};

struct agent {
	/* main_loop.c: set up by rw_agent_run(), read-only after */
	struct rw_datapath dp;
	const char *bpffs;  /* the pin folder */
	const char *socket; /* the control socket's path */
	const char *policy_path;
	const char *ifprefix;
	enum rw_attach_mode attach_mode;
	int resync_sec;
	struct rw_agent_view_opts view_opts;
	struct rw_agent_view *view;   /* --listen, --access-request-url: NULL without either */
	struct rw_flow_log *flow_log; /* --flow-log, NULL without (flow_log.c) */
	int epfd, listen_fd, inotify_fd, tick_fd, resync_fd, sig_fd;
	struct rw_nl_sub *nl;
	struct ring_buffer *ring;
	int64_t mono_to_real;
	/* main_loop.c: the loop's; last_error through agent_set_error(), stop through agent_stop() */
	char last_error[800];
	bool reload_pending;
	bool stop;
	__u32 ct_cursor; /* where rw_conntrack_expire() goes on */

	struct agent_policy pol;	      /* policy_apply.c, policy_file.c */
	struct agent_sandboxes sandboxes;     /* sandboxes.c */
	struct agent_drain drain;	      /* drain.c */
	struct agent_subscribers subscribers; /* events.c */
	struct agent_clients ctl;	      /* ctl_server.c */
	struct agent_cni cni;		      /* cni_chain.c */
	struct agent_follow follow;	      /* pw_follow.c */
	struct agent_publish publish;	      /* view_publish.c */
	struct agent_containers containers;   /* containers.c */
	struct agent_admissions admissions;   /* admissions.c */
	struct agent_staged staged;	      /* staged.c */
	struct prober *prober;		      /* prober.c: NULL until the first apply's probes */
	struct agent_link_thread link;	      /* link_thread.c */
};

static inline const char *agent_ip_str(__be32 ip, char *buf)
{
	return inet_ntop(AF_INET, &ip, buf, INET_ADDRSTRLEN);
}

/* main_loop.c: the last error of an apply or a sandbox, for status (cleared by a good apply);
 * leave the loop after this pass.
 */
void agent_set_error(struct agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void agent_clear_error(struct agent *a);
void agent_stop(struct agent *a);

/* sandboxes.c: netlink handlers, and the full resync that makes the kernel match the system. */
int agent_on_link(bool add, const struct rw_nl_link *l, void *data);
int agent_on_route(bool add, const struct rw_nl_route *r, void *data);
int agent_on_addr(bool add, const struct rw_nl_addr *addr, void *data);
int agent_on_tc(int ifindex, void *data);
int agent_full_resync(struct agent *a);
/* A test seam: agent_full_resync() calls it after its dumps and before it acts on them. */
void agent_resync_after_dump(struct agent *a);
/* The tick's share: attaches whose backoff is over. */
void agent_sandboxes_tick(struct agent *a);
int64_t agent_now_ms(void);
/* Netlink overran or failed: the next tick dumps everything again. */
void agent_links_lost(struct agent *a);
void agent_sandboxes_free(struct agent *a);

/* drain.c: the ring buffer, at most RING_DRAIN_BUDGET records or RING_DRAIN_MS per call. */
int agent_ring_cb(void *ctx, void *data, size_t size);
void agent_drain_ring(struct agent *a);

/* policy_apply.c */
/* A whole snapshot's text parsed, applied and kept (the --policy file, `runwall apply`). On
 * refusal nothing changes and *reply says why; else *reply is the apply's result.
 */
int agent_apply(struct agent *a, const char *buf, size_t len, const char *source, json_t **reply);
/* agent_apply() of a snapshot already parsed as JSON (PolicyWatch's): `doc` is parsed as the
 * policy, not as text again, and kept (a reference taken) for the run changes that follow.
 */
int agent_apply_doc(struct agent *a, json_t *doc, const char *source, json_t **reply);
/* The revision the kernel enforces (0: none): the policy in force's, read from the state word
 * only while this agent holds none.
 */
uint64_t agent_revision_in_force(struct agent *a);
/* PolicyWatch's run-upsert (obj_run: the run) or run-delete (obj_run NULL, del_id) at
 * `revision`: only that run parsed and checked, against the index of the policy in force
 * (rw_policy_change_*()), then applied as agent_apply() applies; the kept document follows.
 * On refusal nothing changes, *reply says why, and *refused_at names the message's own key
 * when it is not the run's ("base": the snapshot in force cannot be read back, "id": no such
 * run), else NULL. *reply as agent_apply()'s, with parse_ms and compose_ms.
 */
int agent_apply_change(struct agent *a, uint64_t revision, json_t *obj_run, const char *del_id,
		       const char *source, const char **refused_at, json_t **reply);
/* agent_apply_change() in two halves, so that the changes queued behind one another go into one
 * apply (one flip, one grace period): agent_change_compose() checks a change as
 * agent_apply_change() does, against the policy the changes before it made, and keeps it;
 * agent_changes_apply() applies every change kept, in one rw_apply() from the policy in force,
 * and *reply (with compose_ms) is then the outcome of each; on refusal none is in force. A
 * refused compose leaves the changes kept before it as they were. Revisions, bases and
 * agent_revision_in_force() follow the changes kept: apply them before anything else reads
 * the policy.
 */
int agent_change_compose(struct agent *a, uint64_t revision, json_t *obj_run, const char *del_id,
			 const char *source, const char **refused_at, json_t **reply);
int agent_changes_apply(struct agent *a, const char *source, json_t **reply);
/* What follows an apply once its reply or ack is out, at the top of the main loop: the probes
 * of the connections it cut, asked of prober.c's thread (their resets follow within the
 * second). The grace period its flip owes is grace.c's, begun at the flip. Nothing when no
 * apply is pending.
 */
void agent_settle(struct agent *a);
/* The snapshot in force as a document, for a run change (NULL: unknown, or no memory). */
json_t *agent_policy_doc(struct agent *a);
/* Its text (NULL: unknown), written out from policy_doc when a run change made it stale. */
const char *agent_policy_text(struct agent *a, size_t *len);
/* The policy's kept forms, for policy_file.c's adoption: a whole snapshot's text (what the
 * control socket's `policy` returns), and the runs' state (their generations) from it.
 */
void agent_policy_keep_text(struct agent *a, const char *buf, size_t len, const char *source);
void agent_runs_update(struct agent *a);
/* The state of the policy's run r: a->pol.runs[r] when it follows the policy's order, as the
 * applies keep it (O(1)), else found by id; NULL when it has none.
 */
const struct run_state *agent_run_state(const struct agent *a, size_t r);

/* policy_file.c: the --policy file read and applied, adopted or refused (at start and on every
 * event of its folder); the inotify fd watching that folder.
 */
void agent_load_policy_file(struct agent *a, bool at_start);
int agent_watch_policy(struct agent *a);
/* SIGHUP: forget the file's last content, so that the next load applies it even unchanged. */
void agent_policy_forget_file(struct agent *a);
void agent_policy_free(struct agent *a);

/* prober.c: a pass of probes over the connections whose verdicts the applies since the last
 * pass changed (revoke_probe.c), on the prober's thread, started at the first ask; returns at
 * once. Its totals into snap's probes_* fields. Stopped (after the pass it is in) before the
 * datapath is closed.
 */
void agent_probe_cut_connections(struct agent *a);
void agent_probe_metrics(const struct agent *a, struct rw_metrics_snap *snap);
void agent_prober_stop(struct agent *a);

/* pw_follow.c: start (after the policy file); the stream's eventfd became readable; the
 * tick's share (revision for reconnections, metrics); what status shows (null without it).
 */
int agent_follow_start(struct agent *a, char *err, size_t errlen);
bool agent_follow_is_fd(const struct agent *a, int fd);
void agent_follow_on_fd(struct agent *a);
/* PolicyWatch's queued changes applied now, between two steps of the loop's other work (an
 * epoll event, a slice of the ring's drain, before the publish): a claim waits for one such
 * step, not for all the work its wakeup brought. Cheap when nothing waits; nothing off the
 * loop (the link thread's pieces are served by agent_beside()).
 */
bool agent_follow_pending(struct agent *a);
void agent_follow_urgent(struct agent *a);
/* The same as a callback, `data` the agent: netlink's `between`, the veth lock's `meanwhile`. */
void agent_follow_urgent_cb(void *data);
void agent_follow_tick(struct agent *a);
json_t *agent_follow_status(struct agent *a);
void agent_follow_stop(struct agent *a);

/* link_thread.c: fn(a, arg) on the link thread, PolicyWatch's changes applied on the loop until
 * it returns (its return); inline when there is no thread, off the loop, or inside another.
 */
int agent_link_thread_start(struct agent *a);
void agent_link_thread_stop(struct agent *a);
int agent_beside(struct agent *a, int (*fn)(struct agent *a, void *arg), void *arg);
/* A piece runs on the link thread now (read on that thread or the loop). */
bool agent_beside_running(const struct agent *a);
/* The calling thread is the loop's (or no link thread runs). */
bool agent_on_loop(const struct agent *a);

/* events.c */
int agent_on_event(void *ctx, void *data, size_t size);
void agent_flush_subscribers(struct agent *a);
void agent_add_subscriber(struct agent *a, int fd);
void agent_sub_close(struct agent *a, int i);

/* ctl_server.c: accept on the listening socket; then a client's fd became readable or
 * writable (false: the fd is not a client's); the tick drops clients past their deadline.
 */
void agent_on_client(struct agent *a);
bool agent_ctl_on_fd(struct agent *a, int fd, __u32 events);
void agent_ctl_tick(struct agent *a);
void agent_ctl_close_all(struct agent *a);
/* The agent's part of the node's status, its `status` reply: what only the agent knows (its
 * settings, its counters, when the node became ready, each run's since, the veths of its
 * --ifprefix with their failed attaches and waiting pods); rw_status_node() makes the node's
 * document of it.
 */
json_t *agent_status_part(struct agent *a);

/* staged.c: a snapshot staged beside the one in force, never enforced: its text
 * (agent_stage(), the control socket's `stage`), a document (PolicyWatch's `staged`), or one run
 * on top of the snapshot in force (the revision in force + 1). Parsed and checked as an apply
 * (a revision above the one in force: promoting is applying it), then loaded privately. On
 * refusal the slot is unchanged and *reply has the error, its JSON path ("" when none), line and
 * column; else *reply is {"ok":true,"staged":STATUS}.
 */
int agent_stage(struct agent *a, const char *buf, size_t len, const char *source, json_t **reply);
int agent_stage_doc(struct agent *a, json_t *doc, const char *source, json_t **reply);
int agent_stage_run(struct agent *a, json_t *run, const char *source, json_t **reply);
/* Drop the staged snapshot (none staged is fine): {"ok":true,"dropped":REVISION|null}. */
void agent_unstage(struct agent *a, json_t **reply);
/* After an apply: a staged revision not above the one now in force is dropped (promoted). */
void agent_staged_applied(struct agent *a);
/* What status shows: null, or {revision, source, since, runs, n_changes, changes, load_ms,
 * judged, differences, unjudged, failures}.
 */
json_t *agent_staged_status(struct agent *a);
/* The event judged under the staged snapshot: {verdict, reason, rule, revision} where the
 * verdict differs from the event's (new reference), else NULL.
 */
json_t *agent_staged_judge(struct agent *a, const struct rw_event *ev);
void agent_staged_free(struct agent *a);

/* cni_chain.c: check (and repair) the chain now; watch the folder (0, or a negative errno);
 * an inotify event of it; what status shows (json null without --cni-conf-dir).
 */
void agent_cni_check(struct agent *a);
int agent_cni_watch(struct agent *a);
void agent_cni_on_inotify(struct agent *a);
json_t *agent_cni_status(const struct agent *a);

/* pw_follow.c: its share of the metrics snapshot (the watch_* fields), copied into snap. */
void agent_follow_metrics(const struct agent *a, struct rw_metrics_snap *snap);

/* view_publish.c: hand the HTTP view the status, readiness and metrics snapshot; something
 * changed (publish at the next tick); the tick's share (publish when something changed, at most
 * every PUBLISH_MIN_MS, and every second).
 */
void agent_view_publish(struct agent *a);
void agent_view_changed(struct agent *a);
void agent_view_tick(struct agent *a);

#endif /* RUNWALL_AGENT_H */
