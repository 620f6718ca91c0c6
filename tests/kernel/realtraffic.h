/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* realtraffic.h: frames through a real veth, for what BPF_PROG_TEST_RUN cannot build. */
#ifndef RUNWALL_TEST_REALTRAFFIC_H
#define RUNWALL_TEST_REALTRAFFIC_H

#include "datapath.h"

void test_real_traffic(struct rw_datapath *dp, const char *dev, int ifindex, const char *pod_ip);

#endif /* RUNWALL_TEST_REALTRAFFIC_H */
