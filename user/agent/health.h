/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* health.h: HTTP liveness and readiness for the kubelet (libmicrohttpd). */
#ifndef RUNWALL_HEALTH_H
#define RUNWALL_HEALTH_H

#include "datapath.h"

struct rw_health;

/* Serve on ADDR:PORT from a thread of libmicrohttpd's:
 *   GET /healthz  200 "ok" while the process runs
 *   GET /readyz   200 "ready revision N" once a snapshot is applied, 503 "not ready" before
 * Readiness is read from the pinned config, i.e. from what the kernel enforces.
 */
struct rw_health *rw_health_start(const char *addr_port, const struct rw_datapath *dp);
void rw_health_stop(struct rw_health *h);

#endif /* RUNWALL_HEALTH_H */
