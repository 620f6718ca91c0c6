// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* health.c: /healthz and /readyz over HTTP with libmicrohttpd. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <microhttpd.h>

#include "health.h"
#include "log.h"

struct rw_health {
	struct MHD_Daemon *daemon;
	int config_fd;		/* the agent's config map; it outlives the daemon thread */
};

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **state)
{
	struct rw_health *h = cls;
	struct rw_datapath view = { .map_fd = { [RW_M_CONFIG] = h->config_fd } };
	struct MHD_Response *resp;
	struct rw_config cfg = {};
	unsigned int status;
	char body[96];
	enum MHD_Result ret;

	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return MHD_NO;
	if (!strcmp(url, "/healthz")) {
		status = MHD_HTTP_OK;
		snprintf(body, sizeof(body), "ok\n");
	} else if (!strcmp(url, "/readyz")) {
		if (rw_config_read(&view, &cfg) == 0 && RW_STATE_READY(cfg.state)) {
			status = MHD_HTTP_OK;
			snprintf(body, sizeof(body), "ready revision %llu\n",
				 (unsigned long long)RW_STATE_REVISION(cfg.state));
		} else {
			status = MHD_HTTP_SERVICE_UNAVAILABLE;
			snprintf(body, sizeof(body), "not ready: no snapshot applied\n");
		}
	} else {
		status = MHD_HTTP_NOT_FOUND;
		snprintf(body, sizeof(body), "not found\n");
	}
	resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", "text/plain");
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

struct rw_health *rw_health_start(const char *addr_port, const struct rw_datapath *dp)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char host[64];
	struct rw_health *h;
	unsigned int port;

	if (sscanf(addr_port, "%63[^:]:%u", host, &port) != 2 || port == 0 || port > 65535 ||
	    inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		rw_err("--health '%s': expected IPV4:PORT", addr_port);
		return NULL;
	}
	sa.sin_port = htons(port);
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->config_fd = dp->map_fd[RW_M_CONFIG];
	h->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
				     NULL, answer, h, MHD_OPTION_SOCK_ADDR, &sa,
				     MHD_OPTION_CONNECTION_TIMEOUT, 5u, MHD_OPTION_END);
	if (!h->daemon) {
		rw_err("--health %s: cannot listen", addr_port);
		free(h);
		return NULL;
	}
	rw_info("health checks on http://%s/healthz and /readyz", addr_port);
	return h;
}

void rw_health_stop(struct rw_health *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->daemon);
	free(h);
}
