// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_cni.c: libFuzzer target for runwall-cni's stdin: the network configuration and the
 * prevResult of the plugins before it (any bytes, as a container runtime would pipe them). A
 * refusal has a CNI error code and says why; an accepted configuration names a complete veth and
 * one or two addresses a pod can have (rw_pod_addr_refusal(), rw_pod_addr6_refusal()), one of
 * each family at most, or says why not.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "podaddr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rw_cni_req req;
	char err[512] = "";
	int rc;

	rc = rw_cni_parse((const char *)data, size, &req, err, sizeof(err));
	if (rc) {
		if (rc < 0 || !err[0])
			abort();
	} else if (req.prev && !req.prev_complete && !req.prev_error[0]) {
		abort();
	} else if (req.prev_complete &&
		   (!req.host_if[0] || (!req.has_ip4 && !req.has_ip6) ||
		    (req.has_ip4 && (!req.pod_ip || rw_pod_addr_refusal(req.pod_ip))) ||
		    (!req.has_ip4 && req.pod_ip) ||
		    (req.has_ip6 && rw_pod_addr6_refusal(req.pod_ip6)))) {
		abort();
	}
	rw_cni_req_free(&req);
	return 0;
}
