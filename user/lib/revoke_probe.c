// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* revoke_probe.c: reaching a connection that sends nothing.
 *
 * The datapath resets a cut connection at its next segment (bpf/revoke.h), but an idle one has
 * none. So after an apply, for each TCP entry of a sandbox's own conntrack table whose cached
 * verdict the apply made stale, the agent sends into the pod, from the remote's address and
 * port, two bare ACKs whose sequence numbers lie 2^31 apart: a TCP window is below 2^30
 * (RFC 7323 2.3), so at least one is outside the pod's receive window, and the pod answers it
 * with an ACK carrying its exact SND.NXT and RCV.NXT (RFC 793 3.9, "If an incoming segment is
 * not acceptable, an acknowledgment should be sent in reply"; Linux: tcp_send_dupack()). The
 * other one may fall in the window: its ack number acknowledges nothing of an idle connection
 * (SND.UNA = SND.NXT), being either an old one, taken as a harmless duplicate, or one beyond
 * SND.NXT, which Linux discards (tcp_ack(): "ack of unsent data"). For a connection with data
 * in flight the odds that it lands among the unacknowledged bytes are theirs over 2^32. The pod's answer then meets
 * rw_egress: a cut flow's is refused and both ends are reset; an allowed flow's goes to the
 * remote as one duplicate ACK, which TCP ignores. The flows of a run that ended while its pod
 * lives are among them: the apply keeps them in the still bound veth's table, and the freed run
 * index makes their stamps stale; the pod's answer is unknown-source, and reset the same way.
 * A connection the datapath saw close (an RST, or a FIN each way: rw_ct_value's fin_pod,
 * fin_peer and rst) has nothing left to reach, and is not probed.
 *
 * IPv6 flows are probed the same way from the veth's rw_conntrack6 table, with IPv6 ACKs to the
 * pod's bound IPv6 address; the pod's MAC is its IPv6 neighbour entry on the veth, or else its
 * IPv4 one (one eth0, one MAC).
 *
 * The ACKs are written to an AF_PACKET socket on the host veth with PACKET_QDISC_BYPASS, which
 * hands the frame to the driver (dev_direct_xmit()) without the veth's egress hook: rw_ingress
 * does not judge them (it would refuse them: that is the point). Why this cannot be aimed: the
 * 4-tuple is an entry of that sandbox's own table, the frame goes only into that sandbox's own
 * veth, to the pod's own MAC and address, and carries no payload, no SYN, no RST.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <libmnl/libmnl.h>
#include <bpf/bpf.h>

#include "apply.h"
#include "log.h"
#include "nlutil.h"
#include "revoke_probe.h"

#define RW_PROBE_NEIGH_MAX 4096

_Static_assert(RW_MAX_ENDPOINTS <= RW_PROBE_PER_APPLY,
	       "every sandbox with a stale flow gets at least one probe (probe_shares())");

struct neigh {
	__u32 ifindex;
	__u8 family;
	__be32 ip[4]; /* IPv4 in the first word */
	__u8 mac[ETH_ALEN];
};

struct neigh_list {
	struct neigh *v;
	size_t n;
};

static int on_neigh(const struct nlmsghdr *nlh, void *data)
{
	const struct ndmsg *nd = mnl_nlmsg_get_payload(nlh);
	struct neigh_list *l = data;
	const struct nlattr *a;
	struct neigh e = {.ifindex = nd->ndm_ifindex, .family = nd->ndm_family};
	size_t ip_len = nd->ndm_family == AF_INET6 ? 16 : 4;
	int have_ip = 0, have_mac = 0;

	if (nlh->nlmsg_type != RTM_NEWNEIGH ||
	    (nd->ndm_family != AF_INET && nd->ndm_family != AF_INET6) ||
	    (nd->ndm_state & (NUD_INCOMPLETE | NUD_FAILED | NUD_NOARP)) ||
	    l->n >= RW_PROBE_NEIGH_MAX)
		return MNL_CB_OK;
	mnl_attr_for_each(a, nlh, sizeof(*nd))
	{
		if (mnl_attr_get_type(a) == NDA_DST && mnl_attr_get_payload_len(a) == ip_len) {
			memcpy(e.ip, mnl_attr_get_payload(a), ip_len);
			have_ip = 1;
		} else if (mnl_attr_get_type(a) == NDA_LLADDR &&
			   mnl_attr_get_payload_len(a) == ETH_ALEN) {
			memcpy(e.mac, mnl_attr_get_payload(a), ETH_ALEN);
			have_mac = 1;
		}
	}
	if (have_ip && have_mac)
		l->v[l->n++] = e;
	return MNL_CB_OK;
}

/* The neighbour entry of address ip (4 or 16 bytes, by family) on the veth. */
static const struct neigh *neigh_find(const struct neigh_list *l, __u32 ifindex, __u8 family,
				      const void *ip)
{
	size_t ip_len = family == AF_INET6 ? 16 : 4;

	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].ifindex == ifindex && l->v[i].family == family &&
		    !memcmp(l->v[i].ip, ip, ip_len))
			return &l->v[i];
	return NULL;
}

static __u16 csum_fold(__u32 sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

static __u32 csum_add(const void *p, size_t len, __u32 sum)
{
	const __u8 *b = p;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (b[i] << 8) | b[i + 1];
	return sum;
}

/* The TCP header of a bare ACK from the remote's port to the pod's, <SEQ=seq><ACK=ack>, window
 * 65535 (nothing rides on it), its checksum left 0.
 */
static void put_bare_ack(__u8 *t, __be16 sport, __be16 dport, __u32 seq, __u32 ack)
{
	memcpy(t, &sport, 2);
	memcpy(t + 2, &dport, 2);
	for (int i = 0; i < 4; i++) {
		t[4 + i] = seq >> (24 - 8 * i);
		t[8 + i] = ack >> (24 - 8 * i);
	}
	t[12] = 5 << 4;
	t[13] = 0x10; /* ACK */
	t[14] = 0xff;
	t[15] = 0xff;
}

/* A probe's len bytes zeroed, then its Ethernet header: from the veth to the pod, of ethertype
 * proto.
 */
static void probe_eth(__u8 *f, size_t len, const __u8 *pod_mac, const __u8 *veth_mac, __u16 proto)
{
	memset(f, 0, len);
	memcpy(f, pod_mac, ETH_ALEN);
	memcpy(f + 6, veth_mac, ETH_ALEN);
	f[12] = proto >> 8;
	f[13] = proto & 0xff;
}

/* A bare ACK <SEQ=seq><ACK=ack> from the remote to the pod: the flow's 4-tuple, nothing else. */
static size_t probe_frame(__u8 *f, const __u8 *pod_mac, const __u8 *veth_mac,
			  const struct rw_ct_key *k, __u32 seq, __u32 ack)
{
	__u8 ph[12] = {0};
	__u16 sum;

	probe_eth(f, 54, pod_mac, veth_mac, ETH_P_IP);
	f[14] = 0x45;
	f[17] = 40;
	f[20] = 0x40; /* DF */
	f[22] = 64;
	f[23] = IPPROTO_TCP;
	memcpy(f + 26, &k->peer_ip, 4);
	memcpy(f + 30, &k->pod_ip, 4);
	sum = csum_fold(csum_add(f + 14, 20, 0));
	f[24] = sum >> 8;
	f[25] = sum;
	put_bare_ack(f + 34, k->peer_port, k->pod_port, seq, ack);
	memcpy(ph, f + 26, 8);
	ph[9] = IPPROTO_TCP;
	ph[11] = 20;
	sum = csum_fold(csum_add(f + 34, 20, csum_add(ph, 12, 0)));
	f[50] = sum >> 8;
	f[51] = sum;
	return 54;
}

/* probe_frame() for IPv6: the same bare ACK, its checksum over the IPv6 pseudo-header (RFC 8200
 * 8.1).
 */
static size_t probe_frame6(__u8 *f, const __u8 *pod_mac, const __u8 *veth_mac,
			   const struct rw_ct6_key *k, __u32 seq, __u32 ack)
{
	__u8 ph[8] = {0, 0, 0, 20, 0, 0, 0, IPPROTO_TCP};
	__u16 sum;

	probe_eth(f, 74, pod_mac, veth_mac, ETH_P_IPV6);
	f[14] = 6 << 4;
	f[19] = 20; /* payload length */
	f[20] = IPPROTO_TCP;
	f[21] = 64; /* hop limit */
	memcpy(f + 22, k->peer_ip, 16);
	memcpy(f + 38, k->pod_ip, 16);
	put_bare_ack(f + 54, k->peer_port, k->pod_port, seq, ack);
	sum = csum_fold(csum_add(f + 54, 20, csum_add(ph, 8, csum_add(f + 22, 32, 0))));
	f[70] = sum >> 8;
	f[71] = sum;
	return 74;
}

/* The veth's own MAC, the probes' source (the node's side, as every packet into the pod has). */
static int veth_mac(int fd, __u32 ifindex, __u8 *mac)
{
	struct ifreq ifr = {0};

	if (!if_indextoname(ifindex, ifr.ifr_name) || ioctl(fd, SIOCGIFHWADDR, &ifr))
		return -errno;
	memcpy(mac, ifr.ifr_hwaddr.sa_data, ETH_ALEN);
	return 0;
}

/* One sandbox's probing: its veth, the pod's MAC and its share of the apply's budget. Each
 * sandbox's tables are walked once counting its stale flows (counting), then, if it has any,
 * once more probing up to its quota.
 */
struct probe_sandbox {
	const struct rw_datapath *dp;
	const __u64 *cut; /* cut_limits() as the pass began, RW_MAX_RUNS of them */
	__u32 ifindex;
	__u32 run_idx[2]; /* the pod's run in the live slot, by family; RW_MAX_RUNS: in none */
	struct rw_endpoint ep;
	const __u8 *pod_mac; /* NULL: the node has no neighbour entry for the pod */
	__u8 veth_mac[ETH_ALEN];
	int pfd;
	bool counting;
	unsigned int found; /* counting: its stale TCP flows */
	unsigned int stale; /* of those, what it can probe: its pod has a MAC; at most
			     * RW_PROBE_PER_SANDBOX */
	unsigned int left; /* probing: stale flows not probed (no MAC, over the bounds, not sent) */
	unsigned int quota;  /* its share of RW_PROBE_PER_APPLY (probe_shares()) */
	unsigned int probed; /* flows probed so far */
	struct rw_probe_stats *st;
};

/* Whether an entry's cached verdict may be cut: an apply since it was judged may refuse its
 * run's flows. Judged against cut_limits() as the pass began: an apply made since asks for a
 * pass of its own after this one (prober.c), which reads them again.
 */
static int entry_stale(const struct probe_sandbox *sb, const struct rw_ct_value *v)
{
	return v->run_idx < RW_MAX_RUNS && v->stamp < sb->cut[v->run_idx];
}

/* rw_run_revs whole, in one call where the kernel has batch lookups (an index that cannot be
 * read is 0: none of its flows is stale).
 */
static void read_run_revs(const struct rw_datapath *dp, __u64 *revs)
{
	int fd = dp->map_fd[RW_M_RUN_REVS];
	__u32 keys[RW_MAX_RUNS], count = RW_MAX_RUNS, out;

	/* The whole array in one batch ends with ENOENT (nothing after it) or with none. */
	if ((!bpf_map_lookup_batch(fd, NULL, &out, keys, revs, &count, NULL) || errno == ENOENT) &&
	    count == RW_MAX_RUNS) {
		/* An array's batch returns its entries in index order. */
		for (__u32 i = 0; i < RW_MAX_RUNS; i++)
			if (keys[i] != i)
				goto by_key;
		return;
	}
by_key:
	for (__u32 i = 0; i < RW_MAX_RUNS; i++)
		if (bpf_map_lookup_elem(fd, &i, &revs[i]))
			revs[i] = 0;
}

/* Per run index, the revision below which its flows may be cut: its rw_run_revs entry (revs, as
 * read), or the last apply that could refuse them where the apply says so (dp->cut_revs): an
 * apply that only added rules to a run moves its rw_run_revs entry, so that its flows are
 * judged again, but cuts none of them.
 */
static void cut_limits(const struct rw_datapath *dp, __u64 *revs)
{
	if (!dp->cut_revs)
		return;
	for (__u32 i = 0; i < RW_MAX_RUNS; i++) {
		__u64 cut = __atomic_load_n(&dp->cut_revs[i], __ATOMIC_RELAXED);

		if (cut < revs[i])
			revs[i] = cut;
	}
}

/* Probes one stale TCP flow of the sandbox: its IPv4 key k4, or its IPv6 key k6. */
static void probe_flow(struct probe_sandbox *sb, const struct rw_ct_value *v,
		       const struct rw_ct_key *k4, const struct rw_ct6_key *k6)
{
	struct sockaddr_ll to = {.sll_family = AF_PACKET,
				 .sll_protocol = htons(k6 ? ETH_P_IPV6 : ETH_P_IP),
				 .sll_ifindex = (int)sb->ifindex,
				 .sll_halen = ETH_ALEN};
	unsigned int failed = 0;
	__u8 f[80];

	if (sb->counting) {
		sb->found++;
		return;
	}
	if (!sb->pod_mac || sb->probed >= sb->quota) {
		if (!sb->pod_mac)
			sb->st->no_mac++;
		else
			sb->st->capped++;
		sb->left++;
		return;
	}
	memcpy(to.sll_addr, sb->pod_mac, ETH_ALEN);
	/* Two sequence numbers 2^31 apart, one surely outside the window; any ack number will do
	 * (see the top of this file). Fixed by the entry: the same probes for the same flow.
	 */
	for (__u32 half = 0; half < 2; half++) {
		__u32 seq = (__u32)v->created_ns + half * 0x80000000u;
		__u32 ack = (__u32)v->created_ns + 0x40000000u;
		size_t len = k6 ? probe_frame6(f, sb->pod_mac, sb->veth_mac, k6, seq, ack)
				: probe_frame(f, sb->pod_mac, sb->veth_mac, k4, seq, ack);

		if (sendto(sb->pfd, f, len, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to)) !=
		    (ssize_t)len)
			failed++;
	}
	sb->st->failed += failed;
	sb->left += failed != 0;
	sb->probed++;
}

/* A connection the datapath saw close (an RST, or a FIN each way): nothing is left to reach. */
static bool entry_closed(const struct rw_ct_value *v)
{
	return v->rst || (v->fin_pod && v->fin_peer);
}

/* One entry of the veth's table of the family: probed (or counted) if it is a TCP flow of the
 * bound pod's address whose verdict is stale, and not closed.
 */
static void probe_entry(struct probe_sandbox *sb, bool ip6, const void *key,
			const struct rw_ct_value *v)
{
	const struct rw_ct_key *k4 = key;
	const struct rw_ct6_key *k6 = key;
	bool own = ip6 ? k6->proto == IPPROTO_TCP &&
				   !memcmp(k6->pod_ip, sb->ep.pod_ip6, sizeof(k6->pod_ip))
		       : k4->proto == IPPROTO_TCP && k4->pod_ip == sb->ep.pod_ip;

	if (own && entry_stale(sb, v) && !entry_closed(v))
		probe_flow(sb, v, ip6 ? NULL : k4, ip6 ? k6 : NULL);
}

/* The table walked key by key: where the kernel refuses a batch. */
static void probe_table_by_key(struct probe_sandbox *sb, bool ip6, int fd)
{
	union {
		struct rw_ct_key k4;
		struct rw_ct6_key k6;
	} k, next;
	bool first = true;
	struct rw_ct_value v;

	while (!bpf_map_get_next_key(fd, first ? NULL : &k, &next)) {
		k = next;
		first = false;
		if (!bpf_map_lookup_elem(fd, &k, &v))
			probe_entry(sb, ip6, &k, &v);
	}
}

struct probe_walk {
	struct probe_sandbox *sb;
	bool ip6;
};

static void probe_batch(void *arg, const __u8 *keys, struct rw_ct_value *vals, __u32 n)
{
	const struct probe_walk *pw = arg;
	size_t ksz = pw->ip6 ? sizeof(struct rw_ct6_key) : sizeof(struct rw_ct_key);

	for (__u32 i = 0; i < n; i++) {
		union {
			struct rw_ct_key k4;
			struct rw_ct6_key k6;
		} k;

		memcpy(&k, keys + i * ksz, ksz);
		probe_entry(pw->sb, pw->ip6, &k, &vals[i]);
	}
}

/* The stale TCP flows of the bound pod's address in the veth's table of the family: its IPv4
 * table (rw_conntrack) or, with ip6, its rw_conntrack6 table. Read in batches
 * (rw_conntrack_batches()): an entry the datapath adds or removes meanwhile is read once or not
 * at all, as by a walk key by key.
 */
static void probe_table(struct probe_sandbox *sb, bool ip6)
{
	struct probe_walk pw = {.sb = sb, .ip6 = ip6};
	int fd = ip6 ? rw_conntrack6_table_fd(sb->dp, sb->ifindex)
		     : rw_conntrack_table_fd(sb->dp, sb->ifindex);

	if (fd < 0)
		return;
	if (rw_conntrack_batches(fd, probe_batch, &pw))
		probe_table_by_key(sb, ip6, fd);
	close(fd);
}

/* The pod's MAC, the one of its eth0, whichever family's neighbour entry names it; `fd` any
 * socket, for the veth's own.
 */
static void sandbox_mac(struct probe_sandbox *sb, const struct neigh_list *nl, int fd)
{
	const struct neigh *pod = NULL;

	if (sb->ep.flags & RW_EP_IP4)
		pod = neigh_find(nl, sb->ifindex, AF_INET, &sb->ep.pod_ip);
	if (!pod && (sb->ep.flags & RW_EP_IP6))
		pod = neigh_find(nl, sb->ifindex, AF_INET6, sb->ep.pod_ip6);
	if (pod && !veth_mac(fd, sb->ifindex, sb->veth_mac))
		sb->pod_mac = pod->mac;
}

/* The sandbox's flows of each family its veth binds: counted, or probed. */
static void walk_sandbox(struct probe_sandbox *sb)
{
	if (sb->ep.flags & RW_EP_IP4)
		probe_table(sb, false);
	if (sb->ep.flags & RW_EP_IP6)
		probe_table(sb, true);
}

/* The budget shared max-min fairly: each sandbox gets its stale flows (at most
 * RW_PROBE_PER_SANDBOX), or the level L where the sandboxes' min(stale, L) together take
 * RW_PROBE_PER_APPLY, whichever is less; what the level leaves (fewer than one per sandbox)
 * goes one each to the first sandboxes above it. So a sandbox holding many stale flows takes
 * only what the others leave, and one holding a single flow always has it probed (a node has at
 * most RW_MAX_ENDPOINTS sandboxes, no more than the budget: the level is at least one).
 */
static void probe_shares(struct probe_sandbox *sbs, size_t n)
{
	unsigned int lo = 0, hi = RW_PROBE_PER_SANDBOX, left = RW_PROBE_PER_APPLY;

	while (lo < hi) { /* the highest level whose sum fits the budget */
		unsigned int mid = lo + (hi - lo + 1) / 2;
		unsigned long sum = 0;

		for (size_t i = 0; i < n; i++)
			sum += sbs[i].stale < mid ? sbs[i].stale : mid;
		if (sum <= RW_PROBE_PER_APPLY)
			lo = mid;
		else
			hi = mid - 1;
	}
	for (size_t i = 0; i < n; i++) {
		sbs[i].quota = sbs[i].stale < lo ? sbs[i].stale : lo;
		left -= sbs[i].quota;
	}
	for (size_t i = 0; i < n && left; i++)
		if (sbs[i].stale > sbs[i].quota) {
			sbs[i].quota++;
			left--;
		}
}

/* The pod's run in the live slot's pods map of the family (fd), or RW_MAX_RUNS where it has none
 * (a pod in no run, a table that cannot be read).
 */
static __u32 pod_run(int fd, const void *ip)
{
	struct rw_pod pod;

	if (fd < 0 || bpf_map_lookup_elem(fd, ip, &pod) || pod.run_idx >= RW_MAX_RUNS)
		return RW_MAX_RUNS;
	return pod.run_idx;
}

/* Whether a sandbox may hold flows cut since `seen`, the cut revisions the last pass left (all
 * but those of the runs whose sandboxes it left a flow in): its pod's run moved since, or the
 * pod is in no run (then its flows' runs are unknown here). Every flow of a pod in run r carries r, or the run it was in before an
 * apply moved it to r; that apply changed r's pods, so it moved r too. run_idx: the pod's run
 * for each family the veth binds (IPv4's, IPv6's), RW_MAX_RUNS for the others.
 */
static bool sandbox_moved(const struct rw_endpoint *ep, int pods, int pods6, const __u64 *cut,
			  const __u64 *seen, __u32 run_idx[2])
{
	bool moved = !(ep->flags & (RW_EP_IP4 | RW_EP_IP6));

	if (ep->flags & RW_EP_IP4)
		run_idx[0] = pod_run(pods, &ep->pod_ip);
	if (ep->flags & RW_EP_IP6)
		run_idx[1] = pod_run(pods6, ep->pod_ip6);
	for (int f = 0; f < 2; f++) {
		__u32 r = run_idx[f];

		if (ep->flags & (f ? RW_EP_IP6 : RW_EP_IP4))
			moved |= r == RW_MAX_RUNS || cut[r] != seen[r];
	}
	return moved;
}

int rw_revoke_probe(const struct rw_datapath *dp, __u64 *seen, struct rw_probe_stats *st)
{
	struct neigh_list nl = {0};
	__u64 *cut = calloc(RW_MAX_RUNS, sizeof(*cut));
	bool *hold = calloc(RW_MAX_RUNS, sizeof(*hold));
	struct probe_sandbox *sbs = NULL;
	size_t n = 0, cap = 0;
	__u32 ifindex, *prev = NULL, key;
	int pfd = -1, ifd = -1, pods = -1, pods6 = -1, err, one = 1;
	unsigned int quota = 0;
	bool any_stale = false;

	memset(st, 0, sizeof(*st));
	if (!cut || !hold) {
		err = -ENOMEM;
		goto out;
	}
	read_run_revs(dp, cut);
	cut_limits(dp, cut);
	if (seen) {
		pods = rw_live_inner_fd(dp, RW_M_PODS);
		pods6 = rw_live_inner_fd(dp, RW_M_PODS6);
	}
	/* The sandboxes whose flows may be stale: every one without `seen`. */
	while (!bpf_map_get_next_key(dp->map_fd[RW_M_ENDPOINTS], prev, &ifindex)) {
		struct probe_sandbox *sb;

		key = ifindex;
		prev = &key;
		if (n == cap) {
			size_t grown_cap = cap ? cap * 2 : 64;
			struct probe_sandbox *grown = realloc(sbs, grown_cap * sizeof(*sbs));

			if (!grown) {
				err = -ENOMEM;
				goto out;
			}
			sbs = grown;
			cap = grown_cap;
		}
		sb = &sbs[n];
		*sb = (struct probe_sandbox){.dp = dp,
					     .cut = cut,
					     .ifindex = key,
					     .run_idx = {RW_MAX_RUNS, RW_MAX_RUNS},
					     .pfd = -1,
					     .counting = true,
					     .st = st};
		if (bpf_map_lookup_elem(dp->map_fd[RW_M_ENDPOINTS], &key, &sb->ep))
			continue;
		if (seen && !sandbox_moved(&sb->ep, pods, pods6, cut, seen, sb->run_idx))
			continue;
		n++;
	}
	st->walked = n;
	/* First the stale flows of every sandbox, counted: most passes find none, and need no
	 * neighbour, no socket and no MAC.
	 */
	for (size_t i = 0; i < n; i++) {
		walk_sandbox(&sbs[i]);
		any_stale |= sbs[i].found > 0;
	}
	if (!any_stale)
		goto done;
	nl.v = calloc(RW_PROBE_NEIGH_MAX, sizeof(struct neigh));
	if (!nl.v) {
		err = -ENOMEM;
		goto out;
	}
	/* IPv4's and IPv6's neighbours */
	err = rw_mnl_dump_all(RTM_GETNEIGH, sizeof(struct ndmsg), on_neigh, &nl);
	if (err)
		goto out;
	/* For the veths' own MACs: closing it costs nothing, unlike a packet socket's close
	 * (synchronize_net(), a grace period): that one is opened only when there is a probe to send.
	 */
	ifd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (ifd < 0) {
		err = -errno;
		goto out;
	}
	/* Then what each sandbox can have probed: its stale flows if its pod has a MAC; then the
	 * shares; then the probes.
	 */
	for (size_t i = 0; i < n; i++) {
		if (!sbs[i].found)
			continue;
		sandbox_mac(&sbs[i], &nl, ifd);
		if (sbs[i].pod_mac)
			sbs[i].stale = sbs[i].found < RW_PROBE_PER_SANDBOX ? sbs[i].found
									   : RW_PROBE_PER_SANDBOX;
	}
	probe_shares(sbs, n);
	for (size_t i = 0; i < n; i++)
		quota += sbs[i].quota;
	if (quota) {
		/* No protocol: the socket sends only, it receives nothing. */
		pfd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
		if (pfd < 0 ||
		    setsockopt(pfd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one))) {
			err = -errno;
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!sbs[i].found)
			continue;
		sbs[i].pfd = pfd;
		sbs[i].counting = false;
		walk_sandbox(&sbs[i]);
		if (sbs[i].probed)
			st->sandboxes++;
		st->probed += sbs[i].probed;
		/* Its runs stay unseen, so that the next pass walks it again. */
		for (int f = 0; f < 2; f++)
			if (sbs[i].left && sbs[i].run_idx[f] < RW_MAX_RUNS)
				hold[sbs[i].run_idx[f]] = true;
	}
done:
	if (seen)
		for (__u32 i = 0; i < RW_MAX_RUNS; i++)
			if (!hold[i])
				seen[i] = cut[i];
	err = 0;
out:
	if (pfd >= 0)
		close(pfd);
	if (ifd >= 0)
		close(ifd);
	if (pods >= 0)
		close(pods);
	if (pods6 >= 0)
		close(pods6);
	free(sbs);
	free(hold);
	free(cut);
	free(nl.v);
	return err;
}
