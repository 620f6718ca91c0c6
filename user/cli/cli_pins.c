// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_pins.c: see cli_pins.h. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "cli_pins.h"
#include "cli_text.h"
#include "ctl.h"
#include "eventfmt.h"
#include "reasons.h"

int rw_cli_open(struct rw_datapath *dp, const char *bpffs, char *err, size_t errlen)
{
	int layout = rw_datapath_pinned_layout(bpffs);

	if (layout == 0) {
		snprintf(err, errlen,
			 "nothing pinned at %s: runwall is not set up on this node, "
			 "or its maps are under another --bpffs",
			 bpffs);
		return -ENOENT;
	}
	if (layout < 0) {
		snprintf(err, errlen, "%s/%s: %s", bpffs, rw_map_names[RW_M_CONFIG],
			 strerror(-layout));
		return layout;
	}
	if (layout != RW_LAYOUT_VERSION) {
		snprintf(err, errlen, "the maps pinned at %s have layout %d, this runwall reads %d",
			 bpffs, layout, RW_LAYOUT_VERSION);
		return -EPROTO;
	}
	return rw_datapath_open_pinned(dp, bpffs, err, errlen);
}

enum rw_map_id rw_cli_map_of(enum rw_map_id id)
{
	for (int m = 0; m < (int)id; m++)
		if (!strcmp(rw_map_shown_names[m], rw_map_shown_names[id]))
			return m;
	return id;
}

/* Whether ep binds pod (an address whose flag is clear is not bound). */
static bool endpoint_binds(const struct rw_endpoint *ep, const struct rw_ip *pod)
{
	if (pod->family == AF_INET6)
		return (ep->flags & RW_EP_IP6) && !memcmp(ep->pod_ip6, pod->a, sizeof(ep->pod_ip6));
	return (ep->flags & RW_EP_IP4) && ep->pod_ip == pod->a[0];
}

int rw_cli_pod_ifindex_of(const struct rw_datapath *dp, const struct rw_ip *pod, __u32 *ifindex)
{
	int fd = dp->map_fd[RW_M_ENDPOINTS];
	__u32 key, *prev = NULL, found = 0;
	struct rw_endpoint ep;

	while (bpf_map_get_next_key(fd, prev, &key) == 0) {
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &ep) == 0 && endpoint_binds(&ep, pod) &&
		    (!found || key < found))
			found = key;
	}
	if (!found)
		return -ENOENT;
	*ifindex = found;
	return 0;
}

/* ---- the agent ---- */

/* The snapshot in force as the agent holds it (`policy` on the control socket), whichever way
 * it came (file or `runwall apply`); else the agent's policy file if it is still that revision.
 */
static int policy_from_agent(const char *socket, __u64 live_revision, struct rw_policy *out)
{
	struct rw_policy_error perr;
	json_t *reply = NULL, *text;
	int err = -ENOENT;

	if (!socket || rw_ctl_call(socket, "policy", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &reply))
		return -ENOENT;
	text = json_object_get(reply, "snapshot");
	if (json_is_true(json_object_get(reply, "ok")) && json_is_string(text) &&
	    rw_policy_parse(json_string_value(text), json_string_length(text), "agent", out,
			    &perr) == 0) {
		if (out->revision == live_revision)
			err = 0;
		else
			rw_policy_free(out);
	}
	json_decref(reply);
	return err;
}

int rw_cli_agent_policy(const char *socket, json_t *status, __u64 live_revision,
			struct rw_policy *out)
{
	struct rw_policy_error perr;
	const char *path;

	memset(out, 0, sizeof(*out));
	if (!live_revision)
		return -ENOENT;
	if (policy_from_agent(socket, live_revision, out) == 0)
		return 0;
	memset(out, 0, sizeof(*out));
	if (!status)
		return -ENOENT;
	path = json_string_value(json_object_get(status, "policy_file"));
	if (!path || rw_policy_parse_file(path, out, &perr))
		return -ENOENT;
	/* The file may have moved on since it was applied: its names would be wrong then. */
	if (out->revision != live_revision) {
		rw_policy_free(out);
		memset(out, 0, sizeof(*out));
		return -ENOENT;
	}
	return 0;
}
