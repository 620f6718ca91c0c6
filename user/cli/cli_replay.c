// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_replay.c: `runwall replay`: what a proposed policy would change, judged on the node's own
 * recorded traffic. The verdicts the agent recorded (its event store, through the control
 * socket's `recorded`) or a flow log are folded into distinct flows (flowset.h); one packet is
 * rebuilt per flow and judged by the production programs loaded privately (cli_private.h) twice:
 * under the snapshot in force (the agent's) and under the proposal. Nothing is attached and
 * nothing live changes.
 *
 * Exit codes: 0 replayed (whether or not anything would change), 1 it cannot be replayed (the
 * proposal is refused, an unknown run, no event store), 2 usage (a bad option, an unreadable
 * file, no agent).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>

#include "cli_private.h"
#include "cli_probe.h"
#include "cli_text.h"
#include "commands.h"
#include "ctl.h"
#include "eventfmt.h"
#include "flowset.h"
#include "policy.h"
#include "reasons.h"
#include "util.h"

#define REPLAY_SPORT	40000
#define REPLAY_FILE_MAX (16u << 20)
/* How long replay waits for each of the agent's answers (the snapshot in force, the recorded
 * flows): both are built on the agent's loop, which may be busy with a burst of events; replay
 * is an operator's question, not a path anything else waits on.
 */
#define REPLAY_AGENT_MS 30000

static const char replay_usage[] =
	"replay {--policy FILE | --run ID --allow IP:PORT[/tcp|udp] | --run-upsert FILE} "
	"[--run ID] [--since DURATION] [--flow-log FILE] [--all]";
static const char replay_options[] =
	"  --policy FILE     the proposal: a whole snapshot\n"
	"  --run ID --allow IP:PORT[/tcp|udp]\n"
	"                    or the snapshot in force with one rule more for run ID\n"
	"  --run-upsert FILE or the snapshot in force with FILE's run (a runs[] element)\n"
	"                    added or replaced\n"
	"  --run ID          only this run's flows\n"
	"  --since DURATION  only what was recorded in the last DURATION (30s, 10m, 2h, 1d)\n"
	"  --flow-log FILE   the flows of an agent's --flow-log FILE, not its event store\n"
	"  --all             list the flows that stay the same too\n";

struct replay_opts {
	const char *policy;
	const char *run_upsert;
	const char *allow_text;
	struct rw_ip allow_ip;
	__u16 allow_port;
	__u8 allow_proto;
	const char *run;
	const char *flow_log;
	int64_t since_ns; /* realtime; 0: everything held */
	const char *since_text;
	bool all;
};

/* The two policies and what they are called. */
struct replay_policies {
	struct rw_policy now;
	struct rw_policy_index ix;
	struct rw_policy_change change;
	bool have_change;
	struct rw_policy file;
	bool have_file;
	const struct rw_policy *proposed;
	const char *proposed_name;
	json_t *now_doc; /* the snapshot in force as JSON (--allow takes the run from it) */
};

/* Where the flows came from, for the summary. */
struct replay_source {
	char name[320]; /* "the agent's event store on node N" or "flow log FILE" */
	char oldest[40];
	json_int_t held, capacity, evicted;
	uint64_t skipped, lines_bad;
};

/* "30s", "10m", "2h", "1d", "90" (seconds): a positive duration of at most a year. */
static int parse_duration(const char *s, int64_t *ns)
{
	static const char units[] = "smhd";
	static const int64_t unit_seconds[] = {1, 60, 3600, 86400};
	unsigned long long n;
	char num[32];
	const char *unit_at;
	size_t len = strlen(s);
	int64_t unit = 1000000000LL;

	if (!len || len >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, len + 1);
	unit_at = strchr(units, num[len - 1]);
	if (unit_at) {
		unit *= unit_seconds[unit_at - units];
		num[--len] = '\0';
	}
	if (rw_parse_uint(num, 366ULL * 86400, &n) || !n ||
	    (int64_t)n * unit > 366LL * 86400 * 1000000000LL)
		return -EINVAL;
	*ns = (int64_t)n * unit;
	return 0;
}

/* "IP:PORT", "[IPv6]:PORT", then "/tcp" (the default) or "/udp". */
static int parse_allow(const char *s, struct replay_opts *o)
{
	char buf[128], *slash;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, strlen(s) + 1);
	o->allow_proto = IPPROTO_TCP;
	slash = strrchr(buf, '/');
	if (slash) {
		if (!strcasecmp(slash + 1, "udp"))
			o->allow_proto = IPPROTO_UDP;
		else if (strcasecmp(slash + 1, "tcp"))
			return -EINVAL;
		*slash = '\0';
	}
	if (rw_ip_port_parse(buf, &o->allow_ip, &o->allow_port) || !o->allow_port)
		return -EINVAL;
	return 0;
}

static int allow_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	if (parse_allow(val, o->data))
		return rw_fail(RW_EXIT_USAGE,
			       "replay --allow: '%s' is not IP:PORT, [IPv6]:PORT, then /tcp (the "
			       "default) or /udp",
			       val);
	return 0;
}

static int run_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	if (!*val || strlen(val) >= RW_RUN_ID_LEN)
		return rw_fail(RW_EXIT_USAGE,
			       "replay --run: '%s' is not a run id (1-%d characters)", val,
			       RW_RUN_ID_LEN - 1);
	return 0;
}

static int since_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	int64_t ns, *since_ns = o->data;

	if (parse_duration(val, &ns))
		return rw_fail(RW_EXIT_USAGE,
			       "replay --since: '%s' is not a duration (30s, 10m, 2h, 1d; at most "
			       "366d)",
			       val);
	*since_ns = rw_now_real_ns() - ns;
	return 0;
}

/* `runwall replay`'s options. Returns -1 to go on, else the exit code (--help, or a usage error
 * already reported).
 */
static int parse(int argc, char **argv, struct replay_opts *o)
{
	const struct rw_cmd_opt opts[] = {
		{"policy", 'P', .str = &o->policy},
		{"run-upsert", 'U', .str = &o->run_upsert},
		{"allow", 'A', .str = &o->allow_text, .set = allow_arg, .data = o},
		{"run", 'r', .str = &o->run, .set = run_arg},
		{"since", 'S', .str = &o->since_text, .set = since_arg, .data = &o->since_ns},
		{"flow-log", 'F', .str = &o->flow_log},
		{"all", 'a', .flag = &o->all},
		{"json", 'j', .flag = &rw_g.json},
		{}};
	int ret, n;

	memset(o, 0, sizeof(*o));
	ret = rw_cmd_options(&rw_cmd_replay, argc, argv, opts);
	if (ret >= 0)
		return ret;
	if (optind < argc)
		return rw_cmd_usage_error(&rw_cmd_replay, "unexpected '%s'", argv[optind]);
	n = !!o->policy + !!o->run_upsert + !!o->allow_text;
	if (n != 1)
		return rw_cmd_usage_error(
			&rw_cmd_replay, "%s",
			n ? "one proposal: --policy, --allow or --run-upsert"
			  : "a proposal is needed: --policy FILE, --run ID --allow "
			    "IP:PORT or --run-upsert FILE");
	if (o->allow_text && !o->run)
		return rw_cmd_usage_error(&rw_cmd_replay, "--allow needs --run ID: the run it "
							  "would open the destination to");
	return -1;
}

/* The agent's answer to VERB ARG in *reply, with a string `key` in it where key is set. Returns 0,
 * or the exit code after reporting: no agent ("no agent on SOCKET (ERROR): NEED"), or its refusal
 * (its error, else REFUSED).
 */
static int agent_ask(const char *verb, const char *arg, int timeout_ms, const char *key,
		     const char *need, const char *refused, json_t **reply)
{
	int ret = rw_ctl_call(rw_g.socket, verb, arg, NULL, 0, timeout_ms, reply);

	if (ret)
		return rw_fail(RW_EXIT_USAGE, "no agent on %s (%s): %s", rw_g.socket,
			       strerror(-ret), need);
	if (!json_is_true(json_object_get(*reply, "ok")) ||
	    (key && !json_is_string(json_object_get(*reply, key)))) {
		ret = rw_fail(RW_EXIT_REFUSED, "agent on %s: %s", rw_g.socket,
			      json_string_value(json_object_get(*reply, "error")) ?: refused);
		json_decref(*reply);
		return ret;
	}
	return 0;
}

/* The snapshot in force, from the agent. Returns 0 or the exit code after reporting. */
static int policy_in_force(struct replay_policies *pp)
{
	struct rw_policy_error perr;
	const char *text;
	json_t *reply = NULL;
	json_error_t jerr;
	int ret;

	ret = agent_ask("policy", NULL, REPLAY_AGENT_MS, "snapshot",
			"replay judges under the snapshot in force, which the agent holds; start "
			"`runwall agent` or pass --socket",
			"no snapshot in force", &reply);
	if (ret)
		return ret;
	text = json_string_value(json_object_get(reply, "snapshot"));
	ret = rw_policy_parse(text, strlen(text), "the snapshot in force", &pp->now, &perr);
	if (!ret) {
		pp->now_doc = json_loads(text, 0, &jerr);
		if (!pp->now_doc)
			ret = -EINVAL;
	}
	json_decref(reply);
	if (ret)
		return rw_fail(RW_EXIT_REFUSED, "the agent's snapshot in force: %s", perr.text);
	return 0;
}

/* The run `id` of the snapshot in force with one more rule: the destination of --allow. */
static json_t *allow_run(const struct replay_opts *o, const struct replay_policies *pp)
{
	json_t *runs = json_object_get(pp->now_doc, "runs"), *run = NULL, *allow, *rule, *r;
	char ip[RW_IP_STRLEN];
	size_t i;

	json_array_foreach(runs, i, r)
	{
		if (!strcmp(json_string_value(json_object_get(r, "id")) ?: "", o->run)) {
			run = json_deep_copy(r);
			break;
		}
	}
	if (!run)
		return NULL;
	allow = json_object_get(run, "allow");
	if (!json_is_array(allow)) {
		allow = json_array();
		json_object_set_new(run, "allow", allow);
	}
	rw_ip_str(&o->allow_ip, ip, sizeof(ip));
	rule = json_pack("{s:s, s:[i]}", "ip", ip, o->allow_proto == IPPROTO_UDP ? "udp" : "tcp",
			 (int)o->allow_port);
	json_array_append_new(allow, rule);
	return run;
}

/* The proposal: a snapshot file, or the snapshot in force with one run changed. Returns 0 or the
 * exit code after reporting.
 */
static int proposal(const struct replay_opts *o, struct replay_policies *pp)
{
	struct rw_policy_error perr;
	json_t *run = NULL;
	json_error_t jerr;
	const char *source;
	char *buf = NULL;
	size_t len;
	int ret;

	if (o->policy) {
		ret = rw_policy_parse_file(o->policy, &pp->file, &perr);
		if (ret)
			return rw_fail(ret == -EINVAL ? RW_EXIT_REFUSED : RW_EXIT_USAGE,
				       "replay --policy: %s", perr.text);
		pp->have_file = true;
		pp->proposed = &pp->file;
		pp->proposed_name = o->policy;
		return 0;
	}
	if (o->run_upsert) {
		source = o->run_upsert;
		ret = rw_read_file(o->run_upsert, REPLAY_FILE_MAX, &buf, &len);
		if (ret)
			return rw_fail(RW_EXIT_USAGE, "replay --run-upsert %s: %s", o->run_upsert,
				       strerror(-ret));
		run = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
		free(buf);
		if (!run)
			return rw_fail(RW_EXIT_REFUSED, "replay --run-upsert %s:%d:%d: run: %s",
				       o->run_upsert, jerr.line, jerr.column, jerr.text);
		if (!json_is_object(run)) {
			json_decref(run);
			return rw_fail(RW_EXIT_REFUSED,
				       "replay --run-upsert %s: run: expected an object (a "
				       "snapshot's runs[] element)",
				       o->run_upsert);
		}
	} else {
		source = "--allow";
		run = allow_run(o, pp);
		if (!run)
			return rw_fail(RW_EXIT_REFUSED,
				       "replay --run %s: no run '%s' in the snapshot in force "
				       "(revision %llu)",
				       o->run, o->run, (unsigned long long)pp->now.revision);
	}
	ret = rw_policy_index_build(&pp->ix, &pp->now);
	if (!ret)
		ret = rw_policy_change_upsert(&pp->now, &pp->ix, pp->now.revision + 1, run, source,
					      &pp->change, &perr);
	json_decref(run);
	if (ret)
		return rw_fail(RW_EXIT_REFUSED, "replay: %s",
			       ret == -ENOMEM ? strerror(ENOMEM) : perr.text);
	pp->have_change = true;
	pp->proposed = &pp->change.next;
	pp->proposed_name = source;
	return 0;
}

static void policies_free(struct replay_policies *pp)
{
	if (pp->have_change)
		rw_policy_change_abort(&pp->change);
	rw_policy_index_free(&pp->ix);
	if (pp->have_file)
		rw_policy_free(&pp->file);
	rw_policy_free(&pp->now);
	json_decref(pp->now_doc);
}

static bool policy_has_run(const struct rw_policy *p, const char *id)
{
	for (size_t i = 0; i < p->n_runs; i++)
		if (!strcmp(p->runs[i].id, id))
			return true;
	return false;
}

/* The agent's event store, folded by the agent. Returns 0 or the exit code after reporting. */
static int flows_from_agent(const struct replay_opts *o, struct rw_flowset *set,
			    struct replay_source *src)
{
	char arg[160], err[256];
	json_t *reply = NULL, *flows, *f;
	size_t i;
	int ret;

	snprintf(arg, sizeof(arg), "%lld%s%s", (long long)(o->since_ns > 0 ? o->since_ns : 0),
		 o->run ? " " : "", o->run ? o->run : "");
	ret = agent_ask("recorded", arg, REPLAY_AGENT_MS, NULL,
			"the recorded flows are the agent's; or pass --flow-log FILE",
			"refused `recorded` (an older agent?)", &reply);
	if (ret)
		return ret;
	snprintf(src->name, sizeof(src->name), "the event store of node '%s'",
		 json_string_value(json_object_get(reply, "node")) ?: "");
	snprintf(src->oldest, sizeof(src->oldest), "%s",
		 json_string_value(json_object_get(reply, "oldest")) ?: "");
	src->held = rw_cli_jint(reply, "held");
	src->capacity = rw_cli_jint(reply, "capacity");
	src->evicted = rw_cli_jint(reply, "evicted");
	src->skipped = rw_cli_jint(reply, "skipped");
	flows = json_object_get(reply, "flows");
	json_array_foreach(flows, i, f)
	{
		struct rw_flow flow;

		if (rw_flow_from_json(f, &flow, err, sizeof(err))) {
			ret = rw_fail(RW_EXIT_REFUSED, "agent on %s: recorded flows[%zu]: %s",
				      rw_g.socket, i, err);
			json_decref(reply);
			return ret;
		}
		if (rw_flowset_add(set, &flow)) {
			json_decref(reply);
			return rw_fail(RW_EXIT_REFUSED, "out of memory");
		}
	}
	json_decref(reply);
	rw_flowset_merge(set);
	return 0;
}

/* A flow log (`runwall agent --flow-log`): its "drop" and "flow" lines; others (suppressed
 * counts) and lines that are not events are counted, not judged. Returns 0 or the exit code.
 */
static int flows_from_log(const struct replay_opts *o, struct rw_flowset *set,
			  struct replay_source *src)
{
	FILE *f = fopen(o->flow_log, "r");
	char *line = NULL, rule[128];
	size_t cap = 0;
	ssize_t n;
	int ret = 0;

	if (!f)
		return rw_fail(RW_EXIT_USAGE, "replay --flow-log %s: %s", o->flow_log,
			       strerror(errno));
	snprintf(src->name, sizeof(src->name), "flow log %s", o->flow_log);
	while ((n = getline(&line, &cap, f)) > 0) {
		const char *type, *when;
		struct rw_event ev;
		int64_t real_ns;
		json_t *obj = json_loadb(line, (size_t)n, 0, NULL);

		type = json_string_value(json_object_get(obj, "type"));
		when = json_string_value(json_object_get(obj, "time"));
		if (!obj || !type || (strcmp(type, "drop") && strcmp(type, "flow")) || !when ||
		    rw_parse_time(when, &real_ns) ||
		    rw_event_from_json(obj, &ev, rule, sizeof(rule))) {
			/* Suppressed counts name no flow; anything else is not a verdict. */
			if (!type || strcmp(type, "suppressed"))
				src->lines_bad++;
			json_decref(obj);
			continue;
		}
		if (!src->oldest[0])
			snprintf(src->oldest, sizeof(src->oldest), "%s", when);
		json_decref(obj);
		src->held++;
		if (real_ns < o->since_ns || (o->run && strcmp(o->run, ev.run_id)))
			continue;
		if (rw_flowset_add_event(set, &ev, real_ns)) {
			ret = rw_fail(RW_EXIT_REFUSED, "out of memory");
			break;
		}
	}
	if (!ret && ferror(f))
		ret = rw_fail(RW_EXIT_USAGE, "replay --flow-log %s: %s", o->flow_log,
			      strerror(errno));
	free(line);
	fclose(f);
	src->skipped = set->skipped;
	rw_flowset_merge(set);
	return ret;
}

/* One flow's verdicts. */
struct judged {
	struct rw_cli_verdict now, proposed;
};

enum change { SAME, OPENED, CLOSED };

static enum change change_of(const struct judged *j)
{
	bool was = j->now.verdict == RW_VERDICT_ALLOW,
	     will = j->proposed.verdict == RW_VERDICT_ALLOW;

	return was == will ? SAME : will ? OPENED : CLOSED;
}

/* The programs no flow of the set needs (RW_DP_SKIP_*): the kernel then verifies only the
 * others, twice (the policy in force and the proposal). Flows are TCP and UDP: never ICMPv6.
 */
static unsigned int unneeded_progs(const struct rw_flowset *set)
{
	bool egress = false, ingress = false, ipv6 = false;

	for (size_t i = 0; i < set->n; i++) {
		egress |= set->v[i].key.dir == RW_DIR_EGRESS;
		ingress |= set->v[i].key.dir == RW_DIR_INGRESS;
		ipv6 |= set->v[i].key.pod.family == AF_INET6;
	}
	return (egress ? 0 : RW_DP_SKIP_EGRESS) | (ingress ? 0 : RW_DP_SKIP_INGRESS) |
	       (ipv6 ? 0 : RW_DP_SKIP_IPV6) | RW_DP_SKIP_ICMP6;
}

/* Judge every flow under both policies: two private datapaths, the pod bound in each whenever
 * it changes (the flows are sorted by run, then pod). Returns 0 or the exit code.
 */
static int judge_all(const struct replay_policies *pp, const struct rw_flowset *set,
		     struct judged *out)
{
	struct rw_datapath now = {.skel = NULL}, with = {.skel = NULL};
	const struct rw_ip *bound = NULL;
	unsigned int skip = unneeded_progs(set);
	char err[600];
	int ret;

	ret = rw_cli_private_load(&now, &pp->now, skip, err, sizeof(err));
	if (ret)
		return rw_fail(RW_EXIT_REFUSED, "the snapshot in force: %s", err);
	ret = rw_cli_private_load(&with, pp->proposed, skip, err, sizeof(err));
	if (ret) {
		rw_datapath_close(&now);
		return rw_fail(RW_EXIT_REFUSED, "%s: %s", pp->proposed_name, err);
	}
	for (size_t i = 0; i < set->n && !ret; i++) {
		const struct rw_flow *f = &set->v[i];
		struct rw_cli_probe p;

		if (!bound || !rw_ip_eq(bound, &f->key.pod)) {
			ret = rw_cli_private_bind(&now, &f->key.pod);
			if (!ret)
				ret = rw_cli_private_bind(&with, &f->key.pod);
			if (ret) {
				ret = rw_fail(RW_EXIT_REFUSED,
					      "binding a pod in the private maps: %s",
					      strerror(-ret));
				break;
			}
			bound = &f->key.pod;
		}
		/* A new flow: a TCP SYN, or a UDP datagram. */
		rw_cli_probe_make(&p, f->key.dir, f->key.proto, 0x02, REPLAY_SPORT, f->key.port,
				  &f->key.pod, &f->key.peer);
		if (rw_cli_judge(&now, &p, RW_CLI_PRIVATE_IFINDEX, &out[i].now, err, sizeof(err)) ||
		    rw_cli_judge(&with, &p, RW_CLI_PRIVATE_IFINDEX, &out[i].proposed, err,
				 sizeof(err))) {
			ret = rw_fail(RW_EXIT_REFUSED, "%s", err);
			break;
		}
		rw_rule_name(&pp->now, out[i].now.rule_id, out[i].now.rule,
			     sizeof(out[i].now.rule));
		rw_rule_name(pp->proposed, out[i].proposed.rule_id, out[i].proposed.rule,
			     sizeof(out[i].proposed.rule));
	}
	rw_datapath_close(&with);
	rw_datapath_close(&now);
	return ret;
}

/* "rule runs[0].allow[1]", "open", "reply": how an allowed packet passed. */
static void allowed_by(const struct rw_cli_verdict *v, char *buf, size_t len)
{
	if (v->rule[0])
		snprintf(buf, len, "%s", v->rule);
	else
		snprintf(buf, len, "%s", rw_path_name(v->path));
}

/* "run-a egress 10.1.3.3 -> 93.184.216.34:443 udp, 3 seen, first ..., last ..." */
static void flow_text(const struct rw_flow *f, char *buf, size_t len)
{
	char src[RW_IP_PORT_STRLEN], dst[RW_IP_PORT_STRLEN], first[40], last[40];
	bool in = f->key.dir == RW_DIR_INGRESS;

	rw_ip_str(in ? &f->key.peer : &f->key.pod, src, sizeof(src));
	rw_ip_port_str(in ? &f->key.pod : &f->key.peer, f->key.port, dst, sizeof(dst));
	rw_format_time(f->first_ns, first, sizeof(first));
	rw_format_time(f->last_ns, last, sizeof(last));
	snprintf(buf, len, "%s %s %s -> %s %s, %llu seen, first %s, last %s", f->key.run,
		 rw_dir_name(f->key.dir), src, dst, rw_proto_name(f->key.proto),
		 (unsigned long long)f->count, first, last);
}

static json_t *verdict_json(const struct rw_cli_verdict *v)
{
	return json_pack("{s:s, s:s, s:s, s:s}", "verdict",
			 v->verdict == RW_VERDICT_ALLOW ? "allow" : "drop", "reason",
			 rw_reason_name(v->reason), "path", rw_path_name(v->path), "rule", v->rule);
}

static const char *const change_names[] = {"same", "opened", "closed"};

static void print_json(const struct replay_opts *o, const struct replay_policies *pp,
		       const struct replay_source *src, const struct rw_flowset *set,
		       const struct judged *j, const uint64_t flows[3], const uint64_t packets[3])
{
	json_t *out, *arr = json_array();

	for (size_t i = 0; i < set->n; i++) {
		enum change c = change_of(&j[i]);
		json_t *f;

		if (c == SAME && !o->all)
			continue;
		f = rw_flow_json(&set->v[i]);
		json_object_set_new(f, "recorded",
				    json_pack("{s:s, s:s}", "verdict",
					      json_string_value(json_object_get(f, "verdict")),
					      "reason",
					      json_string_value(json_object_get(f, "reason"))));
		json_object_del(f, "verdict");
		json_object_del(f, "reason");
		json_object_set_new(f, "change", json_string(change_names[c]));
		json_object_set_new(f, "now", verdict_json(&j[i].now));
		json_object_set_new(f, "proposed", verdict_json(&j[i].proposed));
		json_array_append_new(arr, f);
	}
	out = json_pack("{s:b, s:s, s:s?, s:s?, s:I, s:I, s:I, s:I, s:I, s:{s:I}, s:{s:s, s:I}, "
			"s:o, s:{s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I}}",
			"ok", 1, "source", src->name, "since", o->since_text, "oldest",
			src->oldest[0] ? src->oldest : NULL, "held", src->held, "capacity",
			src->capacity, "evicted", src->evicted, "skipped", (json_int_t)src->skipped,
			"unreadable_lines", (json_int_t)src->lines_bad, "in_force", "revision",
			(json_int_t)pp->now.revision, "proposal", "source", pp->proposed_name,
			"revision", (json_int_t)pp->proposed->revision, "flows", arr, "opened",
			"flows", (json_int_t)flows[OPENED], "packets", (json_int_t)packets[OPENED],
			"closed", "flows", (json_int_t)flows[CLOSED], "packets",
			(json_int_t)packets[CLOSED], "same", "flows", (json_int_t)flows[SAME],
			"packets", (json_int_t)packets[SAME]);
	rw_cli_json_print(out);
}

static void print_text(const struct replay_opts *o, const struct replay_policies *pp,
		       const struct replay_source *src, const struct rw_flowset *set,
		       const struct judged *j, const uint64_t flows[3], const uint64_t packets[3])
{
	char flow[400], how[160];

	printf("replay of %zu flows (%llu recorded verdicts) from %s%s%s, under revision %llu (in "
	       "force) and %s (revision %llu)\n",
	       set->n, (unsigned long long)(packets[0] + packets[1] + packets[2]), src->name,
	       o->since_text ? ", the last " : "", o->since_text ? o->since_text : "",
	       (unsigned long long)pp->now.revision, pp->proposed_name,
	       (unsigned long long)pp->proposed->revision);
	if (src->oldest[0])
		printf("the oldest verdict held is of %s\n", src->oldest);
	for (size_t i = 0; i < set->n; i++) {
		enum change c = change_of(&j[i]);

		if (c == SAME && !o->all)
			continue;
		flow_text(&set->v[i], flow, sizeof(flow));
		if (c == OPENED) {
			allowed_by(&j[i].proposed, how, sizeof(how));
			printf("refused now -> allowed by %s: %s\n", how, flow);
		} else if (c == CLOSED) {
			printf("allowed now -> refused (%s): %s\n",
			       rw_reason_name(j[i].proposed.reason), flow);
		} else if (j[i].now.verdict == RW_VERDICT_ALLOW) {
			allowed_by(&j[i].proposed, how, sizeof(how));
			printf("allowed, unchanged (%s): %s\n", how, flow);
		} else {
			printf("refused, unchanged (%s): %s\n",
			       rw_reason_name(j[i].proposed.reason), flow);
		}
	}
	printf("%llu flows (%llu seen) would be allowed, %llu (%llu) refused, %llu (%llu) stay the "
	       "same\n",
	       (unsigned long long)flows[OPENED], (unsigned long long)packets[OPENED],
	       (unsigned long long)flows[CLOSED], (unsigned long long)packets[CLOSED],
	       (unsigned long long)flows[SAME], (unsigned long long)packets[SAME]);
	if (src->skipped || src->lines_bad)
		printf("not replayed: %llu verdicts of no run or of neither TCP nor UDP, %llu lines "
		       "that are no verdict\n",
		       (unsigned long long)src->skipped, (unsigned long long)src->lines_bad);
}

static int cmd_replay(int argc, char **argv)
{
	struct replay_policies pp;
	struct replay_source src;
	struct replay_opts o;
	struct rw_flowset set = {0};
	struct judged *j = NULL;
	uint64_t flows[3] = {0}, packets[3] = {0};
	int ret;

	memset(&pp, 0, sizeof(pp));
	memset(&src, 0, sizeof(src));
	ret = parse(argc, argv, &o);
	if (ret >= 0)
		return ret;
	/* A snapshot file is read first: its errors need no agent. */
	ret = o.policy ? proposal(&o, &pp) : 0;
	if (!ret)
		ret = policy_in_force(&pp);
	if (!ret && !o.policy)
		ret = proposal(&o, &pp);
	if (ret)
		goto out;
	if (o.run && !policy_has_run(&pp.now, o.run) && !policy_has_run(pp.proposed, o.run)) {
		ret = rw_fail(RW_EXIT_REFUSED,
			      "replay --run %s: no run '%s' in the snapshot in force (revision "
			      "%llu) or in %s",
			      o.run, o.run, (unsigned long long)pp.now.revision, pp.proposed_name);
		goto out;
	}
	ret = o.flow_log ? flows_from_log(&o, &set, &src) : flows_from_agent(&o, &set, &src);
	if (ret)
		goto out;
	j = calloc(set.n ? set.n : 1, sizeof(*j));
	if (!j) {
		ret = rw_fail(RW_EXIT_REFUSED, "out of memory");
		goto out;
	}
	ret = judge_all(&pp, &set, j);
	if (ret)
		goto out;
	for (size_t i = 0; i < set.n; i++) {
		enum change c = change_of(&j[i]);

		flows[c]++;
		packets[c] += set.v[i].count;
	}
	if (rw_g.json)
		print_json(&o, &pp, &src, &set, j, flows, packets);
	else
		print_text(&o, &pp, &src, &set, j, flows, packets);
	ret = RW_EXIT_OK;
out:
	free(j);
	rw_flowset_free(&set);
	policies_free(&pp);
	return ret;
}

RW_COMMAND(replay, .summary = "what a proposed policy would change, judged on recorded traffic",
	   .grammar = replay_usage, .options = replay_options);
