// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ctl_server.c: the agent's side of the control socket (ctl.h says what is asked and answered). */
#include <unistd.h>
#include <sys/socket.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "commands.h"
#include "ctl.h"
#include "eventfmt.h"
#include "log.h"
#include "status.h"

static json_t *status_json(struct agent *a)
{
	char when[40], applied[40];
	json_t *runs = json_array(), *sbx = json_array(), *o;
	struct rw_config cfg = {};
	unsigned long long delivered = a->delivered_gone, skipped = a->skipped_gone;
	int64_t now_ms = agent_now_ms();
	int attach_pending = 0;
	bool ready;

	rw_config_read(&a->dp, &cfg);
	ready = RW_STATE_READY(cfg.state);
	rw_format_time(a->ready_since, when, sizeof(when));
	rw_format_time(a->applied_at, applied, sizeof(applied));
	for (size_t r = 0; a->have_policy && r < a->policy.n_runs; r++) {
		const struct rw_policy_run *run = &a->policy.runs[r];
		struct rw_pod pod = {};
		char since[40] = "";

		if (run->n_pods)
			rw_live_pod(&a->dp, run->pods[0], &pod);
		for (size_t i = 0; i < a->n_runs; i++)
			if (!strcmp(a->runs[i].id, run->id))
				rw_format_time(a->runs[i].since, since, sizeof(since));
		json_array_append_new(runs, rw_status_run(run->id, pod.run_idx, pod.run_gen, since,
							  rw_policy_run_egress(&a->policy, run),
							  run->pods, run->n_pods));
	}
	for (size_t i = 0; i < a->n_sbx; i++) {
		struct sandbox *s = &a->sbx[i];
		struct rw_pod pod;
		bool known = s->pod && rw_live_pod(&a->dp, s->pod, &pod) == 0;

		json_t *e = rw_status_sandbox(a->dp.pin_dir, s->ifname, s->ifindex, s->pod,
					      known ? pod.run_id : NULL);

		/* A failed attach, until a retry succeeds: what failed, how often, when next. */
		if (e && s->attach_error[0]) {
			int64_t in = s->retry_at_ms - now_ms;

			json_object_set_new(e, "attach_error", json_string(s->attach_error));
			json_object_set_new(e, "attach_failures", json_integer(s->attach_failures));
			json_object_set_new(e, "attach_retry_in_ms", json_integer(in > 0 ? in : 0));
			attach_pending++;
		}
		json_array_append_new(sbx, e);
	}
	for (int i = 0; i < a->n_subs; i++) {
		delivered += a->subs[i].delivered;
		skipped += a->subs[i].skipped;
	}
	o = json_pack("{s:b, s:b, s:I, s:o, s:o, s:f, s:s, s:s, s:s, s:o, s:o, s:o, "
		      "s:{s:i, s:I, s:I}, s:o}",
		      "ok", 1, "ready", ready, "revision",
		      (json_int_t)(ready ? RW_STATE_REVISION(cfg.state) : 0),
		      "ready_since", a->ready_since ? json_string(when) : json_null(),
		      "applied", a->applied_at ? json_string(applied) : json_null(),
		      "apply_ms", a->last_apply.total_ms,
		      "bpffs", a->dp.pin_dir, "socket", rw_g.socket, "ifprefix", a->ifprefix,
		      "policy_file", a->policy_path ? json_string(a->policy_path) : json_null(),
		      "runs", runs, "sandboxes", sbx,
		      "events", "subscribers", a->n_subs, "delivered", (json_int_t)delivered,
		      "skipped", (json_int_t)skipped,
		      "last_error", a->last_error[0] ? json_string(a->last_error) : json_null());
	if (o) {
		json_object_set_new(o, "attach", json_pack("{s:I, s:I, s:i}", "failures",
			(json_int_t)a->attach_failures, "retries", (json_int_t)a->attach_retries,
			"pending", attach_pending));
		json_object_set_new(json_object_get(o, "events"), "ring_drains_capped",
				    json_integer(a->ring_capped));
	}
	return o;
}

void agent_on_client(struct agent *a)
{
	char *buf, *verb, *arg, *body;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	size_t body_len;
	json_t *reply = NULL;
	int fd, err;

	fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	/* The socket file is 0600 root already; check the peer too. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) || cred.uid != 0) {
		close(fd);
		return;
	}
	err = rw_ctl_read_request(fd, REQUEST_TIMEOUT_MS, &buf, &verb, &arg, &body, &body_len);
	if (err) {
		reply = json_pack("{s:b, s:s}", "ok", 0, "error", strerror(-err));
		goto out;
	}
	if (!strcmp(verb, "status")) {
		reply = status_json(a);
	} else if (!strcmp(verb, "apply")) {
		agent_apply(a, body, body_len, arg && *arg ? arg : "<socket>", &reply);
	} else if (!strcmp(verb, "policy")) {
		reply = a->policy_text ?
			json_pack("{s:b, s:I, s:s, s:s%}", "ok", 1, "revision",
				  (json_int_t)a->policy.revision, "source", a->policy_source,
				  "snapshot", a->policy_text, a->policy_text_len) :
			json_pack("{s:b, s:s}", "ok", 0, "error",
				  "this agent does not know the snapshot in force (applied before "
				  "it started); apply it again or pass --policy");
	} else if (!strcmp(verb, "events")) {
		free(buf);
		agent_add_subscriber(a, fd);
		return;
	} else if (!strcmp(verb, "shutdown")) {
		rw_info("shutdown requested on the control socket; enforcement stays in place");
		reply = json_pack("{s:b}", "ok", 1);
		a->stop = true;
	} else {
		reply = json_pack("{s:b, s:s}", "ok", 0, "error", "unknown request");
	}
	free(buf);
out:
	if (reply)
		rw_ctl_reply(fd, reply);
	json_decref(reply);
	close(fd);
}

