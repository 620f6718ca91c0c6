/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* agent_run.h: the agent's one entry point. A front end (user/cli/cli_agent.c, `runwall agent`)
 * parses and checks the options into struct agent_opts and calls rw_agent_run(); the agent
 * includes no front end's header and references none of its symbols (`make check-layers`).
 */
#ifndef RUNWALL_AGENT_RUN_H
#define RUNWALL_AGENT_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "attach.h"
#include "flow_log.h"
#include "pw_stream.h"

/* --access-request-queue at most: half of the requests the agent remembers (access_requests.h). */
#define RW_AGENT_REQUEST_QUEUE_MAX 2048

struct rw_agent_view_opts {
	const char *listen;	  /* --listen ADDR:PORT, NULL: no HTTP */
	const char *probe_listen; /* --probe-listen ADDR:PORT (loopback): /healthz, /readyz */
	const char *token_file;	  /* --http-token-file */
	const char *request_url;  /* --access-request-url, NULL: none */
	size_t request_queue;	  /* --access-request-queue */
	size_t events;		  /* --events: recent events kept */
	const char *node;	  /* --node: this node's name in events and requests */
};

/* Checked by the front end: every limit below is in range, ct_per_sandbox <= ct_node when both
 * are set, the HTTP listeners are valid. 0 (or false) keeps what the pinned config holds.
 */
struct agent_opts {
	const char *bpffs;	    /* the pin folder */
	const char *socket;	    /* the control socket */
	const char *policy_path;    /* --policy, NULL: none */
	const char *ifprefix;	    /* --ifprefix */
	const char *cni_conf_dir;   /* --cni-conf-dir, NULL: not watched */
	const char *containers_dir; /* --containers, NULL: containerd's (RW_CONTAINERS_DIR) */
	const char *cgroup_root;    /* --cgroup-root, NULL: the cgroup2 mount */
	enum rw_attach_mode attach_mode;
	int resync_sec;
	bool have_rate; /* --event-rate given: rate and burst replace the pinned ones */
	unsigned long long rate, burst;
	bool have_answer_rate; /* --answer-rate given: replaces the pinned answer budget */
	unsigned long long answer_rate, answer_burst;
	unsigned long long ct_per_sandbox, ct_node, max_endpoints;
	struct rw_agent_view_opts view;
	struct rw_pw_opts watch;	  /* --policy-url and the rest; url NULL: no PolicyWatch */
	struct rw_flow_log_opts flow_log; /* --flow-log and the rest; path NULL: none */
};

/* Runs the agent until a signal or a shutdown request. Returns an exit code (RW_EXIT_*, util.h);
 * a refusal the agent has not logged itself is in `refusal` (non-empty) for the front end to
 * report.
 */
int rw_agent_run(const struct agent_opts *o, char *refusal, size_t refusal_len);

#endif /* RUNWALL_AGENT_RUN_H */
