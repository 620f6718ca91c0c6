// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* flowset.c: see flowset.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>

#include "eventfmt.h"
#include "flowset.h"
#include "reasons.h"

static int key_cmp(const void *x, const void *y)
{
	const struct rw_flow *a = x, *b = y;
	int c = memcmp(&a->key, &b->key, sizeof(a->key));

	if (c)
		return c;
	return a->last_ns < b->last_ns ? -1 : a->last_ns > b->last_ns;
}

void rw_flowset_merge(struct rw_flowset *s)
{
	size_t out = 0;

	if (s->merged == s->n)
		return;
	qsort(s->v, s->n, sizeof(*s->v), key_cmp);
	for (size_t i = 0; i < s->n; i++) {
		struct rw_flow *f = &s->v[i], *o = out ? &s->v[out - 1] : NULL;

		if (o && !memcmp(&o->key, &f->key, sizeof(f->key))) {
			o->count += f->count;
			if (f->first_ns < o->first_ns)
				o->first_ns = f->first_ns;
			/* Sorted by last seen within a key: f is the later. */
			o->last_ns = f->last_ns;
			o->verdict = f->verdict;
			o->reason = f->reason;
			continue;
		}
		s->v[out++] = *f;
	}
	s->n = s->merged = out;
}

int rw_flowset_add(struct rw_flowset *s, const struct rw_flow *f)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct rw_flow *v;

		/* Fold first: grow only when at least half of it is distinct flows. */
		rw_flowset_merge(s);
		if (s->n >= s->cap / 2) {
			v = realloc(s->v, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			s->v = v;
			s->cap = cap;
		}
	}
	s->v[s->n++] = *f;
	return 0;
}

bool rw_flow_key_of(const struct rw_event *ev, struct rw_flow_key *k)
{
	if (!ev->run_id[0] || (ev->proto != IPPROTO_TCP && ev->proto != IPPROTO_UDP) ||
	    (ev->ethertype != htons(0x0800) && ev->ethertype != htons(0x86dd)))
		return false;
	memset(k, 0, sizeof(*k));
	snprintf(k->run, sizeof(k->run), "%s", ev->run_id);
	k->pod = rw_event_pod_ip(ev);
	k->peer = rw_event_peer_ip(ev);
	k->port = ntohs(ev->dport);
	k->proto = ev->proto;
	k->dir = ev->dir;
	return true;
}

int rw_flowset_add_event(struct rw_flowset *s, const struct rw_event *ev, int64_t real_ns)
{
	struct rw_flow f;

	memset(&f, 0, sizeof(f));
	if (!rw_flow_key_of(ev, &f.key)) {
		s->skipped++;
		return 0;
	}
	f.count = 1;
	f.first_ns = f.last_ns = real_ns;
	f.verdict = ev->verdict;
	f.reason = ev->reason;
	return rw_flowset_add(s, &f);
}

void rw_flowset_free(struct rw_flowset *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

json_t *rw_flow_json(const struct rw_flow *f)
{
	char pod[RW_IP_STRLEN], peer[RW_IP_STRLEN], first[40], last[40];

	rw_ip_str(&f->key.pod, pod, sizeof(pod));
	rw_ip_str(&f->key.peer, peer, sizeof(peer));
	rw_format_time(f->first_ns, first, sizeof(first));
	rw_format_time(f->last_ns, last, sizeof(last));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:s, s:s, s:I, s:I, s:s, s:s}", "run",
			 f->key.run, "pod", pod, "dir", rw_dir_name(f->key.dir), "proto",
			 rw_proto_name(f->key.proto), "peer", peer, "port", (int)f->key.port,
			 "count", (json_int_t)f->count, "first", first, "last", last, "first_ns",
			 (json_int_t)f->first_ns, "last_ns", (json_int_t)f->last_ns, "verdict",
			 f->verdict == RW_VERDICT_ALLOW ? "allow" : "drop", "reason",
			 rw_reason_name(f->reason));
}

int rw_flow_from_json(json_t *o, struct rw_flow *f, char *err, size_t errlen)
{
	const char *run, *pod, *dir, *proto, *peer, *verdict, *reason;
	json_int_t count, first, last;
	json_error_t jerr;
	int port, n;

	memset(f, 0, sizeof(*f));
	if (json_unpack_ex(o, &jerr, 0, "{s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:s, s:s}",
			   "run", &run, "pod", &pod, "dir", &dir, "proto", &proto, "peer", &peer,
			   "port", &port, "count", &count, "first_ns", &first, "last_ns", &last,
			   "verdict", &verdict, "reason", &reason)) {
		snprintf(err, errlen, "%s", jerr.text);
		return -EINVAL;
	}
	if (strlen(run) >= sizeof(f->key.run) || rw_ip_parse(pod, &f->key.pod) ||
	    rw_ip_parse(peer, &f->key.peer) || f->key.pod.family != f->key.peer.family) {
		snprintf(err, errlen,
			 "run, pod or peer: not a run id and two addresses of a family");
		return -EINVAL;
	}
	if (port < 1 || port > 65535 || count < 1) {
		snprintf(err, errlen, "port %d or count %lld out of range", port, (long long)count);
		return -EINVAL;
	}
	snprintf(f->key.run, sizeof(f->key.run), "%s", run);
	f->key.port = (__u16)port;
	f->key.dir = strcmp(dir, "ingress") == 0 ? RW_DIR_INGRESS : RW_DIR_EGRESS;
	if (!strcmp(proto, "tcp"))
		f->key.proto = IPPROTO_TCP;
	else if (!strcmp(proto, "udp"))
		f->key.proto = IPPROTO_UDP;
	else {
		snprintf(err, errlen, "proto: '%s' is not tcp or udp", proto);
		return -EINVAL;
	}
	f->count = (uint64_t)count;
	f->first_ns = first;
	f->last_ns = last;
	f->verdict = strcmp(verdict, "allow") == 0 ? RW_VERDICT_ALLOW : RW_VERDICT_DROP;
	n = rw_reason_parse(reason);
	f->reason = n < 0 ? 0xff : (__u8)n;
	return 0;
}

int rw_parse_time(const char *s, int64_t *real_ns)
{
	struct tm tm;
	const char *p;
	int64_t frac = 0, scale = 1000000000;
	time_t sec;

	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -EINVAL;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (scale > 1) {
				scale /= 10;
				frac += (*p - '0') * scale;
			}
		}
	}
	if (strcmp(p, "Z"))
		return -EINVAL;
	sec = timegm(&tm);
	*real_ns = (int64_t)sec * 1000000000LL + frac;
	return 0;
}
