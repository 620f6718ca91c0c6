// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* revoke_probe.c (test_datapath): the apply's probe of idle flows shares its budget
 * (RW_PROBE_PER_APPLY) between the sandboxes: sandboxes holding more stale flows than the budget
 * cannot leave another sandbox's one flow unprobed, whatever the order of the endpoints.
 */
#include "dp_suite.h"
#include "revoke_probe.h"

#define SHARE_SANDBOXES 17  /* 16 that want RW_PROBE_PER_SANDBOX each (the whole budget), one */
#define SHARE_FLOWS	300 /* stale flows of each greedy sandbox, over RW_PROBE_PER_SANDBOX */
#define SHARE_PEER	"93.184.216.34"

_Static_assert((SHARE_SANDBOXES - 1) * RW_PROBE_PER_SANDBOX >= RW_PROBE_PER_APPLY,
	       "the greedy sandboxes want the whole budget");

/* Notes n stale TCP flows of the sandbox (stamp 0 under a run whose revision has moved), from
 * pod ports 10000 up to SHARE_PEER:443.
 */
static void note_stale(__u32 ifindex, __be32 pod_ip, int n)
{
	struct rw_ct_key k = {.ifindex = ifindex,
			      .pod_ip = pod_ip,
			      .peer_port = htons(443),
			      .proto = IPPROTO_TCP};
	struct rw_ct_value v = {.opened_by = RW_DIR_EGRESS,
				.run_idx = run_idx_of("run-7f3a"),
				.created_ns = 0x3c3c0000u,
				.seen_ns = mono_ns()};
	int fd = rw_conntrack_table_fd(&dp, ifindex);

	inet_pton(AF_INET, SHARE_PEER, &k.peer_ip);
	for (int i = 0; i < n; i++) {
		k.pod_port = htons(10000 + i);
		if (fd < 0 || bpf_map_update_elem(fd, &k, &v, BPF_ANY))
			FATAL("noting flow %d of ifindex %u: %s", i, ifindex,
			      strerror(fd < 0 ? -fd : errno));
	}
	close(fd);
}

/* Whether f (len bytes) is a probe of the flow 10000 -> SHARE_PEER:443 of pod_ip: a bare ACK
 * from the peer, sequence number created_ns or 2^31 past it; which one in *half.
 */
static int is_probe(const __u8 *f, size_t len, __be32 pod_ip, int *half)
{
	__be32 peer;
	__u32 seq;

	inet_pton(AF_INET, SHARE_PEER, &peer);
	if (len < 54 || f[12] != 0x08 || f[13] != 0 || f[23] != IPPROTO_TCP ||
	    memcmp(f + 26, &peer, 4) || memcmp(f + 30, &pod_ip, 4) || f[34] != 443 >> 8 ||
	    f[35] != (443 & 0xff) || f[36] != 10000 >> 8 || f[37] != (10000 & 0xff) || f[47] != ACK)
		return 0;
	seq = (__u32)f[38] << 24 | f[39] << 16 | f[40] << 8 | f[41];
	if (seq != 0x3c3c0000u && seq != 0x3c3c0000u + 0x80000000u)
		return 0;
	*half = seq != 0x3c3c0000u;
	return 1;
}

/* Seventeen sandboxes of their own, each with its pod's neighbour entry. The one the endpoints'
 * order walks last holds one stale flow; the sixteen before it hold SHARE_FLOWS each, together
 * more than the budget. The quiet one's flow gets its two ACKs in the same probe, and the budget
 * is used whole: nothing is left over while a sandbox has flows over its share.
 */
void test_revoke_probe_shares(void)
{
	__u32 ifindex[SHARE_SANDBOXES], key, *prev = NULL;
	__be32 pod_ip[SHARE_SANDBOXES];
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	struct pollfd p = {.events = POLLIN};
	struct rw_probe_stats st;
	int quiet = -1, tap, err, ok, seen = 0;
	char cmd[256], ip[32];
	__u8 f[PKT_MAX];
	ssize_t n;

	for (int i = 0; i < SHARE_SANDBOXES; i++) {
		snprintf(ip, sizeof(ip), "10.77.0.%d", i + 1);
		inet_pton(AF_INET, ip, &pod_ip[i]);
		snprintf(cmd, sizeof(cmd),
			 "ip link add rwp%d type veth peer name rwp%dp && ip link set rwp%d up && "
			 "ip link set rwp%dp up && ip neigh replace %s lladdr 02:00:00:00:77:%02x "
			 "dev rwp%d nud permanent",
			 i, i, i, i, ip, i + 1, i);
		sh(cmd);
		snprintf(cmd, sizeof(cmd), "rwp%d", i);
		ifindex[i] = if_nametoindex(cmd);
		err = ifindex[i] ? rw_endpoint_bind(&dp, ifindex[i], pod_ip[i]) : -ENODEV;
		if (err)
			FATAL("binding rwp%d to %s: %s", i, ip, strerror(-err));
	}
	/* The quiet one: ours that the endpoints' order walks last. */
	while (!bpf_map_get_next_key(dp.map_fd[RW_M_ENDPOINTS], prev, &key)) {
		prev = &key;
		for (int i = 0; i < SHARE_SANDBOXES; i++)
			if (ifindex[i] == key)
				quiet = i;
	}
	if (quiet < 0)
		FATAL("none of the %d sandboxes is in rw_endpoints", SHARE_SANDBOXES);
	for (int i = 0; i < SHARE_SANDBOXES; i++)
		note_stale(ifindex[i], pod_ip[i], i == quiet ? 1 : SHARE_FLOWS);
	snprintf(cmd, sizeof(cmd), "rwp%dp", quiet);
	tap = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
	sll.sll_ifindex = (int)if_nametoindex(cmd);
	if (tap < 0 || bind(tap, (struct sockaddr *)&sll, sizeof(sll)))
		FATAL("packet socket on %s: %s", cmd, strerror(errno));

	err = rw_revoke_probe(&dp, NULL, &st);

	t_count++;
	ok = CHECK_EQ(err, 0, "rw_revoke_probe");
	p.fd = tap;
	while (seen != 3 && poll(&p, 1, 2000 * wait_scale()) == 1)
		while ((n = recv(tap, f, sizeof(f), 0)) > 0) {
			int half;

			if (is_probe(f, (size_t)n, pod_ip[quiet], &half))
				seen |= 1 << half;
		}
	ok &= CHECK(seen == 3, "the quiet sandbox's flow probed", "seen %#x of 0x3", seen);
	ok &= CHECK(st.probed == RW_PROBE_PER_APPLY, "the budget used whole", "%u probed of %u",
		    st.probed, RW_PROBE_PER_APPLY);
	ok &= CHECK(st.capped >= (SHARE_SANDBOXES - 1) * SHARE_FLOWS + 1 - RW_PROBE_PER_APPLY,
		    "the rest capped", "%u capped", st.capped);
	printf("%s %d - revoke probe: 16 sandboxes of %d stale flows each and one of a single flow: "
	       "the single flow is probed by the same apply (%u probed in %u sandboxes, %u "
	       "capped)\n",
	       ok ? "ok" : "not ok", t_count, SHARE_FLOWS, st.probed, st.sandboxes, st.capped);

	close(tap);
	for (int i = 0; i < SHARE_SANDBOXES; i++) {
		err = rw_endpoint_unbind(&dp, ifindex[i]);
		if (err)
			FATAL("unbinding rwp%d: %s", i, strerror(-err));
		snprintf(cmd, sizeof(cmd), "ip link del rwp%d", i);
		sh(cmd);
	}
}
