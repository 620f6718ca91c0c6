// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* status.c: the status JSON (see status.h): its parts, and the node's whole document with the
 * agent's part merged in.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <bpf/bpf.h>

#include "attach.h"
#include "datapath.h"
#include "eventfmt.h"
#include "liveruns.h"
#include "mapfill.h"
#include "policy.h"
#include "status.h"
#include "util.h"

static json_t *ip_or_null(__be32 ip)
{
	char buf[INET_ADDRSTRLEN];

	return ip && inet_ntop(AF_INET, &ip, buf, sizeof(buf)) ? json_string(buf) : json_null();
}

static json_t *ip6_or_null(bool has, const __be32 ip[4])
{
	char buf[INET6_ADDRSTRLEN];

	return has && inet_ntop(AF_INET6, ip, buf, sizeof(buf)) ? json_string(buf) : json_null();
}

json_t *rw_status_hook(const char *pin_dir, int ifindex, enum rw_dir dir)
{
	struct rw_hook_info *hi = calloc(1, sizeof(*hi)); /* large: not on the stack */
	json_t *o;

	if (!hi || rw_hook_query_pinned(pin_dir, ifindex, dir, hi)) {
		free(hi);
		return json_pack("{s:b}", "attached", 0);
	}
	o = json_pack("{s:b, s:s, s:b, s:i}", "attached", hi->found, "mode",
		      hi->found ? rw_attach_mode_str(hi->mode) : "none", "first", hi->first,
		      "others", (int)hi->n_other);
	free(hi);
	return o;
}

json_t *rw_status_sandbox(const char *pin_dir, const char *ifname, int ifindex,
			  const struct rw_endpoint *ep, const char *run)
{
	static const struct rw_endpoint none;

	if (!ep)
		ep = &none;
	return json_pack("{s:s, s:i, s:o, s:o, s:o, s:o, s:{s:o, s:o}}", "ifname", ifname,
			 "ifindex", ifindex, "pod",
			 ip_or_null(ep->flags & RW_EP_IP4 ? ep->pod_ip : 0), "pod6",
			 ip6_or_null(ep->flags & RW_EP_IP6, ep->pod_ip6), "gateway6",
			 ip6_or_null(ep->flags & RW_EP_GW6, ep->gw_ip6), "run",
			 run && *run ? json_string(run) : json_null(), "hooks", "egress",
			 rw_status_hook(pin_dir, ifindex, RW_DIR_EGRESS), "ingress",
			 rw_status_hook(pin_dir, ifindex, RW_DIR_INGRESS));
}

json_t *rw_status_run(const char *id, __u32 idx, __u32 gen, const char *since, int egress,
		      const __be32 *pods, size_t n_pods, const __be32 (*pods6)[4], size_t n_pods6)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < n_pods; i++)
		json_array_append_new(list, ip_or_null(pods[i]));
	for (size_t i = 0; list && i < n_pods6; i++)
		json_array_append_new(list, ip6_or_null(true, pods6[i]));
	return json_pack("{s:s, s:i, s:i, s:o, s:s, s:o*}", "id", id, "idx", (int)idx, "gen",
			 (int)gen, "since", since && *since ? json_string(since) : json_null(),
			 "egress", rw_egress_name(egress), "pods", list);
}

/* ---- the node's status: `runwall status`, /api/status ------------------------------------- */

struct node_status {
	const struct rw_datapath *dp;
	const char *bpffs, *socket;
	json_t *agent; /* the agent's `status` reply, NULL without one */
	int agent_err;
	struct rw_config cfg;
	__u64 revision;
	struct rw_live_run *runs;
	size_t n_runs;
	int64_t mono_to_real;
};

static json_t *jstr_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

static int add_ifindex(__u32 **list, size_t *n, __u32 ifindex)
{
	__u32 *grown;

	for (size_t i = 0; i < *n; i++)
		if ((*list)[i] == ifindex)
			return 0;
	grown = realloc(*list, (*n + 1) * sizeof(**list));
	if (!grown)
		return -ENOMEM;
	*list = grown;
	(*list)[(*n)++] = ifindex;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

/* The veth ifindex, as the kernel sees it: the pod rw_endpoints binds to it, that pod's run in
 * the live slot, and the hooks.
 */
static json_t *sandbox_json(struct node_status *c, const char *ifname, __u32 ifindex)
{
	const char *run = NULL;
	struct rw_endpoint ep;
	bool bound = !rw_endpoint_get(c->dp, ifindex, &ep);

	/* The run by the pod's IPv4, else by its IPv6. */
	for (size_t r = 0; bound && (ep.flags & RW_EP_IP4) && r < c->n_runs && !run; r++)
		for (size_t p = 0; p < c->runs[r].n_pods; p++)
			if (c->runs[r].pods[p] == ep.pod_ip)
				run = c->runs[r].id;
	for (size_t r = 0; bound && (ep.flags & RW_EP_IP6) && r < c->n_runs && !run; r++)
		for (size_t p = 0; p < c->runs[r].n_pods6; p++)
			if (!memcmp(c->runs[r].pods6[p], ep.pod_ip6, sizeof(ep.pod_ip6)))
				run = c->runs[r].id;
	return rw_status_sandbox(c->bpffs, ifname, (int)ifindex, bound ? &ep : NULL, run);
}

/* Without the agent: the veths bound in rw_endpoints and those runwall's link pins name. */
struct pin_list {
	__u32 **list;
	size_t *n;
};

static int add_pin(const struct rw_link_pin *pin, void *data)
{
	struct pin_list *lp = data;

	add_ifindex(lp->list, lp->n, pin->ifindex);
	return 0;
}

static json_t *sandboxes_from_kernel(struct node_status *c)
{
	char name[IF_NAMESIZE];
	json_t *arr = json_array();
	__u32 key, *prev = NULL, *list = NULL;
	struct pin_list lp;
	size_t n = 0;

	while (bpf_map_get_next_key(c->dp->map_fd[RW_M_ENDPOINTS], prev, &key) == 0) {
		prev = &key;
		add_ifindex(&list, &n, key);
	}
	lp.list = &list;
	lp.n = &n;
	rw_link_pins(c->bpffs, add_pin, &lp);
	qsort(list, n, sizeof(*list), cmp_u32);
	for (size_t i = 0; i < n; i++) {
		if (!if_indextoname(list[i], name))
			snprintf(name, sizeof(name), "?");
		json_array_append_new(arr, sandbox_json(c, name, list[i]));
	}
	free(list);
	return arr;
}

/* With the agent: the veths it knows (its --ifprefix, attached or not), in its order, each as
 * the kernel sees it with what only the agent knows merged in (a failed attach and its retry, a
 * pod waiting for room).
 */
static json_t *sandboxes_from_agent(struct node_status *c, json_t *known)
{
	json_t *arr = json_array(), *s;
	size_t i;

	json_array_foreach(known, i, s)
	{
		json_t *e = sandbox_json(c, json_string_value(json_object_get(s, "ifname")) ?: "?",
					 (__u32)json_integer_value(json_object_get(s, "ifindex")));

		if (e)
			json_object_update_missing(e, s);
		json_array_append_new(arr, e);
	}
	return arr;
}

static const char *agent_run_since(struct node_status *c, const char *id)
{
	json_t *runs = c->agent ? json_object_get(c->agent, "runs") : NULL, *r;
	size_t i;

	json_array_foreach(runs, i, r)
	{
		if (!strcmp(json_string_value(json_object_get(r, "id")) ?: "", id))
			return json_string_value(json_object_get(r, "since"));
	}
	return NULL;
}

static json_t *runs_json(struct node_status *c)
{
	json_t *arr = json_array();
	char applied[40] = "";

	if (c->cfg.applied_ns)
		rw_format_time((int64_t)c->cfg.applied_ns + c->mono_to_real, applied,
			       sizeof(applied));
	for (size_t i = 0; i < c->n_runs; i++) {
		const struct rw_live_run *r = &c->runs[i];
		const char *since = agent_run_since(c, r->id);

		/* Without the agent: a run whose generation is the revision in force changed
		 * with the last flip.
		 */
		if (!c->agent && r->gen == c->revision)
			since = applied;
		json_array_append_new(arr, rw_status_run(r->id, r->idx, r->gen, since, r->egress,
							 r->pods, r->n_pods,
							 (const __be32(*)[4])r->pods6, r->n_pods6));
	}
	return arr;
}

static json_t *maps_json(struct node_status *c)
{
	struct rw_map_fill fill[RW_M__COUNT];
	json_t *arr = json_array();

	rw_map_fill(c->dp, fill);
	for (int i = 0; i < RW_M__COUNT; i++)
		json_array_append_new(arr,
				      json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", fill[i].name,
						"pin", fill[i].pin, "type", fill[i].type, "entries",
						(json_int_t)fill[i].entries, "max_entries",
						(json_int_t)fill[i].max_entries));
	return arr;
}

static json_t *events_json(struct node_status *c)
{
	json_t *ae = c->agent ? json_object_get(c->agent, "events") : NULL;
	struct rw_counters node = {0};

	rw_counters_read(c->dp, 0, &node);
	return json_pack("{s:I, s:I, s:I, s:O, s:O, s:O, s:O}", "sent",
			 (json_int_t)node.events_sent, "lost", (json_int_t)node.events_lost,
			 "suppressed", (json_int_t)node.events_suppressed, "subscribers",
			 json_object_get(ae, "subscribers") ?: json_null(), "delivered",
			 json_object_get(ae, "delivered") ?: json_null(), "skipped",
			 json_object_get(ae, "skipped") ?: json_null(), "ring_drains_capped",
			 json_object_get(ae, "ring_drains_capped") ?: json_null());
}

json_t *rw_status_lease(const struct rw_config *cfg, int64_t mono_to_real)
{
	int64_t left;
	enum rw_lease_state st = rw_lease_state(cfg, &left);
	char deadline[40] = "";

	if (st == RW_LEASE_NONE)
		return json_null();
	rw_format_time((int64_t)cfg->lease_deadline_ns + mono_to_real, deadline, sizeof(deadline));
	return json_pack("{s:I, s:b, s:s, s:I}", "seconds", (json_int_t)cfg->lease_seconds,
			 "expired", st == RW_LEASE_EXPIRED, "deadline", deadline, "remaining_ms",
			 (json_int_t)(left / 1000000));
}

static json_t *agent_json(struct node_status *c)
{
	json_t *a = c->agent;

	if (!a)
		return json_pack("{s:b, s:s, s:s}", "running", 0, "socket", c->socket, "error",
				 strerror(-c->agent_err));
	return json_pack("{s:b, s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "running", 1,
			 "socket", c->socket, "ifprefix",
			 json_object_get(a, "ifprefix") ?: json_null(), "policy_file",
			 json_object_get(a, "policy_file") ?: json_null(), "apply_ms",
			 json_object_get(a, "apply_ms") ?: json_null(), "last_error",
			 json_object_get(a, "last_error") ?: json_null(), "attach",
			 json_object_get(a, "attach") ?: json_null(), "bind",
			 json_object_get(a, "bind") ?: json_null(), "cni",
			 json_object_get(a, "cni") ?: json_null(), "policy_watch",
			 json_object_get(a, "policy_watch") ?: json_null(), "staged",
			 json_object_get(a, "staged") ?: json_null());
}

json_t *rw_status_node(const struct rw_datapath *dp, const char *bpffs, const char *socket,
		       json_t *agent, int agent_err, char *err, size_t errlen)
{
	struct node_status c = {.dp = dp,
				.bpffs = bpffs,
				.socket = socket,
				.agent = agent,
				.agent_err = agent_err,
				.mono_to_real = rw_mono_to_real_offset()};
	char applied[40] = "";
	bool ready;
	json_t *o;
	int ret;

	ret = rw_config_read(dp, &c.cfg);
	if (!ret)
		ret = rw_live_runs(dp, &c.runs, &c.n_runs);
	if (ret) {
		rw_fail_msg(err, errlen, ret, "reading the pinned maps: %s", strerror(-ret));
		return NULL;
	}
	ready = RW_STATE_READY(c.cfg.state);
	c.revision = ready ? RW_STATE_REVISION(c.cfg.state) : 0;
	if (c.cfg.applied_ns)
		rw_format_time((int64_t)c.cfg.applied_ns + c.mono_to_real, applied,
			       sizeof(applied));

	o = json_pack("{s:b, s:b, s:I, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:o}", "ok", 1, "ready",
		      ready, "revision", (json_int_t)c.revision, "ready_since",
		      agent ? json_incref(json_object_get(agent, "ready_since")) ?: json_null()
			    : json_null(),
		      "applied", jstr_or_null(applied), "bpffs", bpffs, "agent", agent_json(&c),
		      "runs", runs_json(&c), "sandboxes",
		      agent && json_is_array(json_object_get(agent, "sandboxes"))
			      ? sandboxes_from_agent(&c, json_object_get(agent, "sandboxes"))
			      : sandboxes_from_kernel(&c),
		      "maps", maps_json(&c), "events", events_json(&c));
	rw_live_runs_free(c.runs, c.n_runs);
	if (!o) {
		rw_fail_msg(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	json_object_set_new(o, "lease", rw_status_lease(&c.cfg, c.mono_to_real));
	/* The agent's table of the pods' containers (null without the agent). */
	json_object_set_new(o, "containers",
			    json_incref(agent ? json_object_get(agent, "containers") : NULL)
				    ?: json_null());
	/* The agent's --event-rate, --answer-rate, --ct-per-sandbox and --ct-node, as the kernel
	 * holds them.
	 */
	json_object_set_new(o, "limits",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "event_rate",
				      (json_int_t)c.cfg.event_rate, "event_burst",
				      (json_int_t)c.cfg.event_burst, "answer_rate",
				      (json_int_t)c.cfg.answer_rate, "answer_burst",
				      (json_int_t)c.cfg.answer_burst, "ct_per_sandbox",
				      (json_int_t)c.cfg.ct_per_sandbox, "ct_node",
				      (json_int_t)c.cfg.ct_node));
	return o;
}
