// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* status.c: the status JSON's parts (see status.h). */
#include <arpa/inet.h>
#include <stdlib.h>

#include "attach.h"
#include "policy.h"
#include "status.h"

static json_t *ip_or_null(__be32 ip)
{
	char buf[INET_ADDRSTRLEN];

	return ip && inet_ntop(AF_INET, &ip, buf, sizeof(buf)) ? json_string(buf) : json_null();
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

json_t *rw_status_sandbox(const char *pin_dir, const char *ifname, int ifindex, __be32 pod,
			  const char *run)
{
	return json_pack("{s:s, s:i, s:o, s:o, s:{s:o, s:o}}", "ifname", ifname, "ifindex", ifindex,
			 "pod", ip_or_null(pod), "run",
			 run && *run ? json_string(run) : json_null(), "hooks", "egress",
			 rw_status_hook(pin_dir, ifindex, RW_DIR_EGRESS), "ingress",
			 rw_status_hook(pin_dir, ifindex, RW_DIR_INGRESS));
}

json_t *rw_status_run(const char *id, __u32 idx, __u32 gen, const char *since, int egress,
		      const __be32 *pods, size_t n_pods)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < n_pods; i++)
		json_array_append_new(list, ip_or_null(pods[i]));
	return json_pack("{s:s, s:i, s:i, s:o, s:s, s:o*}", "id", id, "idx", (int)idx, "gen",
			 (int)gen, "since", since && *since ? json_string(since) : json_null(),
			 "egress", rw_egress_name(egress), "pods", list);
}
