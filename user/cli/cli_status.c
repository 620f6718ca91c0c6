// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_status.c: `runwall status`: is this node enforcing, which policy, on which veths, how
 * full the maps are, what happened to the events. With the agent its own view is merged in;
 * without it everything still comes from the pinned maps and the hooks themselves.
 *
 * Exit codes: 0 the kernel enforces a policy (ready), 1 not ready, 2 nothing pinned at --bpffs
 * and no agent.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <bpf/bpf.h>

#include "attach.h"
#include "cli_util.h"
#include "commands.h"
#include "ctl.h"
#include "eventfmt.h"
#include "status.h"

static const char status_usage[] = "status";

struct sctx {
	struct rw_datapath dp;
	const char *bpffs;
	json_t *agent; /* the agent's status reply, NULL without one */
	int agent_err;
	struct rw_config cfg;
	bool ready;
	__u64 revision;
	struct rw_cli_run *runs;
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

static json_t *sandboxes_from_kernel(struct sctx *c)
{
	char name[IF_NAMESIZE];
	json_t *arr = json_array();
	__u32 key, *prev = NULL, *list = NULL;
	struct rw_endpoint ep;
	struct pin_list lp;
	size_t n = 0;

	while (bpf_map_get_next_key(c->dp.map_fd[RW_M_ENDPOINTS], prev, &key) == 0) {
		prev = &key;
		add_ifindex(&list, &n, key);
	}
	lp.list = &list;
	lp.n = &n;
	rw_link_pins(c->bpffs, add_pin, &lp);
	qsort(list, n, sizeof(*list), cmp_u32);
	for (size_t i = 0; i < n; i++) {
		const char *run = NULL;
		bool bound = !bpf_map_lookup_elem(c->dp.map_fd[RW_M_ENDPOINTS], &list[i], &ep);

		if (!if_indextoname(list[i], name))
			snprintf(name, sizeof(name), "?");
		if (bound) {
			for (size_t r = 0; r < c->n_runs && !run; r++)
				for (size_t p = 0; p < c->runs[r].n_pods; p++)
					if (c->runs[r].pods[p] == ep.pod_ip)
						run = c->runs[r].id;
		}
		json_array_append_new(arr, rw_status_sandbox(c->bpffs, name, (int)list[i],
							     bound ? ep.pod_ip : 0, run));
	}
	free(list);
	return arr;
}

static const char *agent_run_since(struct sctx *c, const char *id)
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

static json_t *runs_json(struct sctx *c)
{
	json_t *arr = json_array();
	char applied[40] = "";

	if (c->cfg.applied_ns)
		rw_format_time((int64_t)c->cfg.applied_ns + c->mono_to_real, applied,
			       sizeof(applied));
	for (size_t i = 0; i < c->n_runs; i++) {
		const struct rw_cli_run *r = &c->runs[i];
		const char *since = agent_run_since(c, r->id);

		/* Without the agent: a run whose generation is the revision in force changed
		 * with the last flip.
		 */
		if (!c->agent && r->gen == c->revision)
			since = applied;
		json_array_append_new(arr, rw_status_run(r->id, r->idx, r->gen, since, r->egress,
							 r->pods, r->n_pods));
	}
	return arr;
}

static json_t *maps_json(struct sctx *c)
{
	struct rw_map_fill fill[RW_M__COUNT];
	json_t *arr = json_array();

	rw_map_fill(&c->dp, fill);
	for (int i = 0; i < RW_M__COUNT; i++)
		json_array_append_new(arr,
				      json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", fill[i].name,
						"pin", fill[i].pin, "type", fill[i].type, "entries",
						(json_int_t)fill[i].entries, "max_entries",
						(json_int_t)fill[i].max_entries));
	return arr;
}

static json_t *events_json(struct sctx *c)
{
	json_t *ae = c->agent ? json_object_get(c->agent, "events") : NULL;
	struct rw_counters node = {0};

	rw_counters_read(&c->dp, 0, &node);
	return json_pack("{s:I, s:I, s:I, s:O, s:O, s:O}", "sent", (json_int_t)node.events_sent,
			 "lost", (json_int_t)node.events_lost, "suppressed",
			 (json_int_t)node.events_suppressed, "subscribers",
			 json_object_get(ae, "subscribers") ?: json_null(), "delivered",
			 json_object_get(ae, "delivered") ?: json_null(), "skipped",
			 json_object_get(ae, "skipped") ?: json_null());
}

static json_t *agent_json(struct sctx *c)
{
	json_t *a = c->agent;

	if (!a)
		return json_pack("{s:b, s:s, s:s}", "running", 0, "socket", rw_g.socket, "error",
				 strerror(-c->agent_err));
	return json_pack("{s:b, s:s, s:O, s:O, s:O, s:O, s:O, s:O}", "running", 1, "socket",
			 rw_g.socket, "ifprefix", json_object_get(a, "ifprefix") ?: json_null(),
			 "policy_file", json_object_get(a, "policy_file") ?: json_null(),
			 "apply_ms", json_object_get(a, "apply_ms") ?: json_null(), "last_error",
			 json_object_get(a, "last_error") ?: json_null(), "attach",
			 json_object_get(a, "attach") ?: json_null(), "cni",
			 json_object_get(a, "cni") ?: json_null());
}

/* "tcx first", "tc first, 1 after", "tcx NOT FIRST (2 others)", "NOT ATTACHED" */
static void hook_str(json_t *h, char *buf, size_t len)
{
	long long others = json_integer_value(json_object_get(h, "others"));
	const char *mode = json_string_value(json_object_get(h, "mode")) ?: "?";

	if (!json_is_true(json_object_get(h, "attached")))
		snprintf(buf, len, "NOT ATTACHED");
	else if (json_is_true(json_object_get(h, "first")) && others)
		snprintf(buf, len, "%s first, %lld after", mode, others);
	else if (json_is_true(json_object_get(h, "first")))
		snprintf(buf, len, "%s first", mode);
	else
		snprintf(buf, len, "%s NOT FIRST (%lld others)", mode, others);
}

static void print_plain(struct sctx *c, json_t *o)
{
	static const char *const sb_heads[] = {"VETH", "IFINDEX",     "POD",
					       "RUN",  "EGRESS HOOK", "INGRESS HOOK"};
	static const char *const map_heads[] = {"MAP", "PINNED AS", "ENTRIES", "MAX", "FILL"};
	json_t *runs = json_object_get(o, "runs"), *sbx = json_object_get(o, "sandboxes");
	json_t *maps = json_object_get(o, "maps"), *ev = json_object_get(o, "events"), *v;
	const char *since = json_string_value(json_object_get(o, "ready_since"));
	const char *applied = json_string_value(json_object_get(o, "applied"));
	struct rw_table t;
	size_t i;

	if (c->ready)
		printf("node:       READY, enforcing revision %llu%s%s\n",
		       (unsigned long long)c->revision, since ? " since " : "", since ? since : "");
	else
		printf("node:       NOT READY: no policy applied, every sandbox packet is dropped "
		       "(not-ready)\n");
	if (applied) {
		json_t *ms = c->agent ? json_object_get(c->agent, "apply_ms") : NULL;

		printf("last apply: %s", applied);
		if (json_is_number(ms) && json_number_value(ms) > 0)
			printf(" (%.1f ms)", json_number_value(ms));
		printf("\n");
	}
	if (c->agent) {
		const char *pf = json_string_value(json_object_get(c->agent, "policy_file"));
		const char *le = json_string_value(json_object_get(c->agent, "last_error"));

		printf("agent:      running (socket %s, ifprefix %s, policy %s)\n", rw_g.socket,
		       json_string_value(json_object_get(c->agent, "ifprefix")) ?: "-",
		       pf ? pf : "from the socket only");
		printf("last error: %s\n", le ? le : "none");
		if (json_is_object(json_object_get(c->agent, "attach"))) {
			json_t *at = json_object_get(c->agent, "attach");

			printf("attach:     %lld failed, %lld retries, %lld veths waiting for a "
			       "retry\n",
			       json_integer_value(json_object_get(at, "failures")),
			       json_integer_value(json_object_get(at, "retries")),
			       json_integer_value(json_object_get(at, "pending")));
		}
		if (json_is_object(json_object_get(c->agent, "cni"))) {
			json_t *cn = json_object_get(c->agent, "cni");
			json_t *w = json_object_get(cn, "last_repair_window_ms");

			if (json_is_true(json_object_get(cn, "chained")))
				printf("cni:        chained in %s/%s; %lld repairs",
				       json_string_value(json_object_get(cn, "conf_dir")),
				       json_string_value(json_object_get(cn, "file")),
				       json_integer_value(json_object_get(cn, "repairs")));
			else
				printf("cni:        NOT CHAINED: %s; %lld repairs",
				       json_string_value(json_object_get(cn, "why")) ?: "?",
				       json_integer_value(json_object_get(cn, "repairs")));
			if (json_is_integer(w))
				printf(" (the last after %lld ms without the entry)",
				       json_integer_value(w));
			printf("\n");
		}
	} else if (rw_ctl_no_agent(c->agent_err)) {
		printf("agent:      not running (enforcement continues from the pinned state; no "
		       "agent on %s)\n",
		       rw_g.socket);
	} else {
		printf("agent:      not answering on %s (%s); enforcement continues from the "
		       "pinned state\n",
		       rw_g.socket, strerror(-c->agent_err));
	}
	printf("bpffs:      %s\n", c->bpffs);
	printf("limits:     events %u/s burst %u per sandbox for drops and for new flows; "
	       "conntrack %u flows per sandbox, %u per node\n",
	       c->cfg.event_rate, c->cfg.event_burst, c->cfg.ct_per_sandbox, c->cfg.ct_node);

	printf("\nruns: %zu\n", json_array_size(runs));
	rw_table_init(&t, 5, NULL, 0);
	json_array_foreach(runs, i, v)
	{
		const char *rs = json_string_value(json_object_get(v, "since"));
		json_t *pods = json_object_get(v, "pods"), *p;
		char list[512] = "";
		size_t j, off = 0;

		json_array_foreach(pods, j, p)
		{
			if (off < sizeof(list))
				off += snprintf(list + off, sizeof(list) - off, "%s%s",
						j ? "," : "", json_string_value(p));
		}
		rw_table_row(&t);
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "id")));
		rw_table_cell(&t, "enforcing generation %lld%s%s",
			      json_integer_value(json_object_get(v, "gen")), rs ? " since " : "",
			      rs ? rs : "");
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "egress")));
		rw_table_cell(&t, "idx %lld", json_integer_value(json_object_get(v, "idx")));
		rw_table_cell(&t, "pods %s", list);
	}
	rw_table_print(&t, stdout, "  ");
	rw_table_free(&t);

	printf("\nsandboxes: %zu\n", json_array_size(sbx));
	rw_table_init(&t, 6, sb_heads, RW_TABLE_RIGHT(1));
	json_array_foreach(sbx, i, v)
	{
		json_t *hooks = json_object_get(v, "hooks");
		const char *pod = json_string_value(json_object_get(v, "pod"));
		const char *run = json_string_value(json_object_get(v, "run"));
		char eg[64], in[64];

		hook_str(json_object_get(hooks, "egress"), eg, sizeof(eg));
		hook_str(json_object_get(hooks, "ingress"), in, sizeof(in));
		rw_table_row(&t);
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "ifname")));
		rw_table_cell(&t, "%lld", json_integer_value(json_object_get(v, "ifindex")));
		rw_table_cell(&t, "%s", pod ? pod : "- (unbound)");
		rw_table_cell(&t, "%s", run ? run : "-");
		rw_table_cell(&t, "%s", eg);
		rw_table_cell(&t, "%s", in);
	}
	if (t.rows)
		rw_table_print(&t, stdout, "  ");
	rw_table_free(&t);
	/* Failed attaches the agent is retrying (with backoff). */
	json_array_foreach(sbx, i, v)
	{
		const char *ae = json_string_value(json_object_get(v, "attach_error"));

		if (ae)
			printf("  %s: %s (%lld failed attempts; retrying in %lld ms)\n",
			       json_string_value(json_object_get(v, "ifname")), ae,
			       json_integer_value(json_object_get(v, "attach_failures")),
			       json_integer_value(json_object_get(v, "attach_retry_in_ms")));
	}
	/* Veths routed to a pod the node has no room to bind: deny-all until there is room. */
	json_array_foreach(sbx, i, v)
	{
		const char *be = json_string_value(json_object_get(v, "bind_error"));

		if (be)
			printf("  %s: pod %s not bound, deny-all: %s (bound by the resync that "
			       "finds room)\n",
			       json_string_value(json_object_get(v, "ifname")),
			       json_string_value(json_object_get(v, "waiting_pod")), be);
	}

	printf("\nmaps:\n");
	rw_table_init(&t, 5, map_heads, RW_TABLE_RIGHT(2) | RW_TABLE_RIGHT(3) | RW_TABLE_RIGHT(4));
	json_array_foreach(maps, i, v)
	{
		long long e = json_integer_value(json_object_get(v, "entries"));
		long long m = json_integer_value(json_object_get(v, "max_entries"));
		const char *pin = json_string_value(json_object_get(v, "pin"));
		bool ring = !strcmp(pin, rw_map_names[RW_M_EVENTS]);
		char a[32], b[32];

		rw_table_row(&t);
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "name")));
		rw_table_cell(&t, "%s", pin);
		if (ring) {
			rw_cli_bytes(e < 0 ? 0 : e, a, sizeof(a));
			rw_cli_bytes(m, b, sizeof(b));
			rw_table_cell(&t, "%s", e < 0 ? "?" : a);
			rw_table_cell(&t, "%s", b);
		} else {
			if (e < 0)
				rw_table_cell(&t, "?");
			else
				rw_table_cell(&t, "%lld", e);
			rw_table_cell(&t, "%lld", m);
		}
		rw_cli_fill_pct(e, m, a, sizeof(a));
		rw_table_cell(&t, "%s", a);
	}
	rw_table_print(&t, stdout, "  ");
	rw_table_free(&t);

	printf("\nevents: %lld sent, %lld lost, %lld suppressed (kernel, node total)",
	       json_integer_value(json_object_get(ev, "sent")),
	       json_integer_value(json_object_get(ev, "lost")),
	       json_integer_value(json_object_get(ev, "suppressed")));
	if (c->agent)
		printf("; %lld delivered, %lld skipped to %lld subscriber%s (agent)",
		       json_integer_value(json_object_get(ev, "delivered")),
		       json_integer_value(json_object_get(ev, "skipped")),
		       json_integer_value(json_object_get(ev, "subscribers")),
		       json_integer_value(json_object_get(ev, "subscribers")) == 1 ? "" : "s");
	printf("\n");
}

static int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {}};
	struct sctx c = {.bpffs = rw_g.bpffs};
	char err[512], applied[40] = "";
	json_t *o;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		if (opt == 'j') {
			rw_g.json = true;
			continue;
		}
		if (opt == 'h') {
			rw_cmd_help(&rw_cmd_status, stdout);
			return RW_EXIT_OK;
		}
		return rw_cmd_usage_error(&rw_cmd_status, "bad option '%s'", argv[optind - 1]);
	}
	if (optind < argc)
		return rw_cmd_usage_error(&rw_cmd_status, "unexpected '%s'", argv[optind]);

	c.agent_err =
		rw_ctl_call(rw_g.socket, "status", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &c.agent);
	if (c.agent_err)
		c.agent = NULL;
	if (c.agent && !json_is_true(json_object_get(c.agent, "ok"))) {
		c.agent_err = -EPROTO;
		json_decref(c.agent);
		c.agent = NULL;
	}
	/* The agent knows where its maps are: a CLI without --bpffs still finds them. */
	if (c.agent) {
		const char *dir = json_string_value(json_object_get(c.agent, "bpffs"));

		if (dir && *dir && strcmp(dir, c.bpffs)) {
			if (!rw_g.json)
				fprintf(stderr,
					"runwall: the agent on %s pins under %s, not %s: "
					"reading %s\n",
					rw_g.socket, dir, c.bpffs, dir);
			c.bpffs = dir;
		}
	}
	ret = rw_cli_open(&c.dp, c.bpffs, err, sizeof(err));
	if (ret) {
		bool agent = c.agent;

		json_decref(c.agent);
		if (ret == -ENOENT && !agent)
			return rw_fail(RW_EXIT_USAGE, "%s; and no agent on %s (%s)", err,
				       rw_g.socket, strerror(-c.agent_err));
		return rw_fail(RW_EXIT_REFUSED, "%s", err);
	}
	c.mono_to_real = rw_mono_to_real_offset();
	ret = rw_config_read(&c.dp, &c.cfg);
	if (!ret)
		ret = rw_cli_live_runs(&c.dp, &c.runs, &c.n_runs);
	if (ret) {
		ret = rw_fail(RW_EXIT_REFUSED, "reading the pinned maps: %s", strerror(-ret));
		goto cleanup;
	}
	c.ready = RW_STATE_READY(c.cfg.state);
	c.revision = c.ready ? RW_STATE_REVISION(c.cfg.state) : 0;
	if (c.cfg.applied_ns)
		rw_format_time((int64_t)c.cfg.applied_ns + c.mono_to_real, applied,
			       sizeof(applied));

	o = json_pack("{s:b, s:b, s:I, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:o}", "ok", 1, "ready",
		      c.ready, "revision", (json_int_t)c.revision, "ready_since",
		      c.agent ? json_incref(json_object_get(c.agent, "ready_since")) ?: json_null()
			      : json_null(),
		      "applied", jstr_or_null(applied), "bpffs", c.bpffs, "agent", agent_json(&c),
		      "runs", runs_json(&c), "sandboxes",
		      c.agent && json_is_array(json_object_get(c.agent, "sandboxes"))
			      ? json_incref(json_object_get(c.agent, "sandboxes"))
			      : sandboxes_from_kernel(&c),
		      "maps", maps_json(&c), "events", events_json(&c));
	if (!o) {
		ret = rw_fail(RW_EXIT_REFUSED, "out of memory");
		goto cleanup;
	}
	/* The agent's --event-rate, --ct-per-sandbox and --ct-node, as the kernel holds them. */
	json_object_set_new(
		o, "limits",
		json_pack("{s:I, s:I, s:I, s:I}", "event_rate", (json_int_t)c.cfg.event_rate,
			  "event_burst", (json_int_t)c.cfg.event_burst, "ct_per_sandbox",
			  (json_int_t)c.cfg.ct_per_sandbox, "ct_node", (json_int_t)c.cfg.ct_node));
	if (rw_g.json) {
		rw_cli_json_print(o);
	} else {
		print_plain(&c, o);
		json_decref(o);
	}
	ret = c.ready ? RW_EXIT_OK : RW_EXIT_REFUSED;
cleanup:
	rw_cli_runs_free(c.runs, c.n_runs);
	rw_datapath_close(&c.dp);
	json_decref(c.agent);
	return ret;
}

const struct rw_cmd rw_cmd_status = {
	.name = "status",
	.summary = "is this node enforcing, and what",
	.grammar = status_usage,
	.options = NULL,
	.func = cmd_status,
};
