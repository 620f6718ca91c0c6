// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* containers.c: the agent's table of containers (containers.h). Each scan reads the bundle
 * folder (--containers): a bundle not seen before is parsed once (oci_bundle.h; config.json does
 * not change after the runtime writes it), a bundle gone takes its entry with it. Then, for every
 * container, the cgroup id of the directory its cgroupsPath names (cgroup2.h; 0 while that
 * directory is not there: a bundle appears before its cgroup does), and for every pod the sandbox
 * veth whose peer is in the pod's network namespace (IFLA_LINK_NETNSID of the veth equal to the
 * id RTM_GETNSID gives that namespace). gen counts the changes the datapath's admit map follows.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/timerfd.h>

#include "agent.h"
#include "cgroup2.h"
#include "log.h"
#include "netlink.h"
#include "oci_bundle.h"
#include "util.h"

struct container_meta {
	char *cg_dir; /* relative to the cgroup v2 root */
	char sandbox_id[72];
	bool seen;
	int cg_errno; /* the last error reading its cgroup id other than ENOENT, logged once */
};

struct container_pod {
	char id[72]; /* the sandbox (pause) container's id */
	char *netns; /* its network namespace's path; NULL: the host's network */
	uint32_t ifindex;
	bool seen;
};

struct container_bad {
	char id[72];
	struct timespec mtime; /* of its config.json when refused: read again once it changes */
	off_t size;
	bool seen;
};

/* A bundle folder's name is a container id: 1 to 71 of [A-Za-z0-9_.-], not "." or "..". */
static bool id_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= sizeof(((struct rw_container *)0)->id) || !strcmp(s, ".") ||
	    !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
			return false;
	return true;
}

static struct container_bad *bad_find(struct agent_containers *t, const char *id)
{
	for (size_t i = 0; i < t->n_bad; i++)
		if (!strcmp(t->bad[i].id, id))
			return &t->bad[i];
	return NULL;
}

/* Grow an array of n elements of size sz to hold one more; false when out of memory. */
static bool grow(void **arr, size_t n, size_t sz)
{
	void *p;

	if (n & (n - 1) && n) /* capacity doubles at each power of two */
		return true;
	p = realloc(*arr, (n ? n * 2 : 8) * sz);
	if (!p)
		return false;
	*arr = p;
	return true;
}

static void bad_add(struct agent_containers *t, const char *id, const struct stat *st,
		    const char *why)
{
	struct container_bad *b = bad_find(t, id);

	if (!b) {
		if (t->n_bad >= RW_MAX_CONTAINERS + RW_MAX_CONTAINER_PODS ||
		    !grow((void **)&t->bad, t->n_bad, sizeof(*t->bad)))
			return;
		b = &t->bad[t->n_bad++];
		memset(b, 0, sizeof(*b));
		snprintf(b->id, sizeof(b->id), "%s", id);
	}
	b->mtime = st->st_mtim;
	b->size = st->st_size;
	b->seen = true;
	t->refused++;
	rw_err("containers: %s; the bundle is left out until its config.json changes", why);
}

static bool pod_add(struct agent_containers *t, const char *id, const struct rw_oci_bundle *b)
{
	struct container_pod *p;

	if (t->n_pods >= RW_MAX_CONTAINER_PODS) {
		rw_err("containers: %s/%s: more than %d pods, left out", t->dir, id,
		       RW_MAX_CONTAINER_PODS);
		return false;
	}
	if (!grow((void **)&t->pods, t->n_pods, sizeof(*t->pods)))
		return false;
	p = &t->pods[t->n_pods];
	memset(p, 0, sizeof(*p));
	snprintf(p->id, sizeof(p->id), "%s", id);
	if (b->netns[0]) {
		p->netns = strdup(b->netns);
		if (!p->netns)
			return false;
	}
	p->seen = true;
	t->n_pods++;
	t->resolve = true;
	return true;
}

static bool container_add(struct agent_containers *t, const char *id, const struct rw_oci_bundle *b,
			  const char *cg_dir)
{
	struct rw_container *c;
	struct container_meta *m;

	if (t->n >= RW_MAX_CONTAINERS) {
		t->left_out++;
		return false;
	}
	if (!grow((void **)&t->c, t->n, sizeof(*t->c)) ||
	    !grow((void **)&t->meta, t->n, sizeof(*t->meta)))
		return false;
	c = &t->c[t->n];
	m = &t->meta[t->n];
	memset(c, 0, sizeof(*c));
	memset(m, 0, sizeof(*m));
	m->cg_dir = strdup(cg_dir);
	if (!m->cg_dir)
		return false;
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->name, sizeof(c->name), "%s", b->name);
	snprintf(c->pod_uid, sizeof(c->pod_uid), "%s", b->pod_uid);
	snprintf(c->pod, sizeof(c->pod), "%s/%s", b->pod_ns, b->pod_name);
	snprintf(m->sandbox_id, sizeof(m->sandbox_id), "%s", b->sandbox_id);
	m->seen = true;
	t->n++;
	t->gen++;
	return true;
}

/* A bundle not known yet: read it, and add its pod or its container. Its config.json may not
 * be there yet (the runtime makes the folder first): the next scan looks again.
 */
static void bundle_new(struct agent_containers *t, const char *id)
{
	char path[PATH_MAX], err[PATH_MAX + 200], cg_dir[PATH_MAX];
	struct rw_oci_bundle *b;
	struct container_bad *bad;
	bool good = false;
	struct stat st;

	if (snprintf(path, sizeof(path), "%s/%s/config.json", t->dir, id) >= (int)sizeof(path) ||
	    stat(path, &st))
		return;
	bad = bad_find(t, id);
	if (bad) {
		bad->seen = true;
		if (bad->size == st.st_size && bad->mtime.tv_sec == st.st_mtim.tv_sec &&
		    bad->mtime.tv_nsec == st.st_mtim.tv_nsec)
			return;
	}
	b = malloc(sizeof(*b));
	if (!b)
		return;
	if (rw_oci_bundle_read(path, b, err, sizeof(err))) {
		bad_add(t, id, &st, err);
	} else if (b->sandbox) {
		good = pod_add(t, id, b);
	} else if (rw_cgroup2_dir(b->cgroups_path, cg_dir, sizeof(cg_dir), err, sizeof(err))) {
		char why[sizeof(err) + PATH_MAX + 32];

		snprintf(why, sizeof(why), "%s: linux.cgroupsPath: %s", path, err);
		bad_add(t, id, &st, why);
	} else {
		good = container_add(t, id, b, cg_dir);
	}
	free(b);
	/* Refused before, good since it changed. */
	if (good && (bad = bad_find(t, id)))
		*bad = t->bad[--t->n_bad];
}

/* Mark everything unseen, read the folder, mark what is there (adding what is new). When the
 * folder cannot be read, nothing is there.
 */
/* The ids known when a scan starts, sorted, so that a folder of n bundles is matched in
 * O(n log n), not O(n^2) (16 384 containers would take most of a second): by kind (a container
 * or a pod) and index into its array, read through t, whose arrays may grow meanwhile.
 */
struct id_ref {
	bool pod;
	size_t i;
};

static const char *ref_id(const struct agent_containers *t, const struct id_ref *r)
{
	return r->pod ? t->pods[r->i].id : t->c[r->i].id;
}

static int ref_cmp(const void *a, const void *b, void *t)
{
	return strcmp(ref_id(t, a), ref_id(t, b));
}

static struct id_ref *ref_find(const struct agent_containers *t, struct id_ref *refs, size_t n,
			       const char *id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(id, ref_id(t, &refs[mid]));

		if (!c)
			return &refs[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* The pods (pods) or the containers and the pods, sorted by id; NULL when out of memory. */
static struct id_ref *refs_sorted(struct agent_containers *t, bool pods_only, size_t *n)
{
	struct id_ref *refs = malloc((t->n + t->n_pods + 1) * sizeof(*refs));

	*n = 0;
	if (!refs)
		return NULL;
	for (size_t i = 0; !pods_only && i < t->n; i++)
		refs[(*n)++] = (struct id_ref){false, i};
	for (size_t i = 0; i < t->n_pods; i++)
		refs[(*n)++] = (struct id_ref){true, i};
	qsort_r(refs, *n, sizeof(*refs), ref_cmp, t);
	return refs;
}

static void scan_dir(struct agent_containers *t)
{
	struct id_ref *refs, *r;
	struct dirent *d;
	size_t n_refs;
	DIR *dir;

	for (size_t i = 0; i < t->n; i++)
		t->meta[i].seen = false;
	for (size_t i = 0; i < t->n_pods; i++)
		t->pods[i].seen = false;
	for (size_t i = 0; i < t->n_bad; i++)
		t->bad[i].seen = false;
	refs = refs_sorted(t, false, &n_refs);
	dir = refs ? opendir(t->dir) : NULL;
	if (!dir) {
		/* Nothing is there, or out of memory: keep what is known for now. */
		if (!refs)
			for (size_t i = 0; i < t->n; i++)
				t->meta[i].seen = true;
		for (size_t i = 0; !refs && i < t->n_pods; i++)
			t->pods[i].seen = true;
		free(refs);
		return;
	}
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.' || !id_ok(d->d_name))
			continue;
		r = ref_find(t, refs, n_refs, d->d_name);
		if (r && r->pod)
			t->pods[r->i].seen = true;
		else if (r)
			t->meta[r->i].seen = true;
		else
			bundle_new(t, d->d_name);
	}
	closedir(dir);
	free(refs);
}

/* What the scan did not see is gone: its bundle went away (a container removed, or restarted
 * under a new id).
 */
static void sweep(struct agent_containers *t)
{
	for (size_t i = 0; i < t->n;) {
		if (t->meta[i].seen) {
			i++;
			continue;
		}
		free(t->meta[i].cg_dir);
		t->c[i] = t->c[t->n - 1];
		t->meta[i] = t->meta[t->n - 1];
		t->n--;
		t->gen++;
	}
	for (size_t i = 0; i < t->n_pods;) {
		if (t->pods[i].seen) {
			i++;
			continue;
		}
		free(t->pods[i].netns);
		t->pods[i] = t->pods[--t->n_pods];
		t->resolve = true;
	}
	for (size_t i = 0; i < t->n_bad;) {
		if (t->bad[i].seen)
			i++;
		else
			t->bad[i] = t->bad[--t->n_bad];
	}
}

/* Each container's cgroup id, read again on every scan: 0 while (or once) its directory is not
 * there.
 */
static void read_cgroup_ids(struct agent_containers *t)
{
	char path[PATH_MAX * 2 + 2], err[sizeof(path) + 100];

	for (size_t i = 0; i < t->n; i++) {
		uint64_t id = 0;
		int ret = -ENOENT;

		if (t->cgroup_root[0]) {
			snprintf(path, sizeof(path), "%s/%s", t->cgroup_root, t->meta[i].cg_dir);
			ret = rw_cgroup2_id(path, &id, err, sizeof(err));
		}
		if (ret && ret != -ENOENT && ret != t->meta[i].cg_errno)
			rw_warn("containers: %s (%s): %s", t->c[i].name, t->c[i].id, err);
		t->meta[i].cg_errno = ret == -ENOENT ? 0 : ret;
		if (ret)
			id = 0;
		if (id != t->c[i].cgroup_id) {
			t->c[i].cgroup_id = id;
			t->gen++;
		}
	}
}

/* The agent's sandbox veths as one number: when it changes, the pods' veths are resolved again. */
static unsigned long long veths_sig(const struct agent *a)
{
	unsigned long long sig = a->sandboxes.n_sbx;

	for (size_t i = 0; i < a->sandboxes.n_sbx; i++)
		sig = sig * 1000003ULL ^ (unsigned long long)a->sandboxes.sbx[i].ifindex;
	return sig;
}

static bool is_sandbox(const struct agent *a, int ifindex)
{
	for (size_t i = 0; i < a->sandboxes.n_sbx; i++)
		if (a->sandboxes.sbx[i].ifindex == ifindex)
			return true;
	return false;
}

/* The agent's sandbox veths and the namespace ids of their peers. */
struct veth_ns {
	const struct agent *a;
	int *ifindex, *nsid;
	size_t n, cap;
};

static int veth_ns_cb(const struct rw_nl_link *l, void *data)
{
	struct veth_ns *v = data;

	if (!l->veth || l->link_netnsid < 0 || !is_sandbox(v->a, l->ifindex) || v->n == v->cap)
		return 0;
	v->ifindex[v->n] = l->ifindex;
	v->nsid[v->n++] = l->link_netnsid;
	return 0;
}

/* Each pod's veth: the sandbox veth whose peer is in the pod's network namespace. The link dump
 * comes first: it has the kernel give each peer's namespace an id, which RTM_GETNSID then
 * reports.
 */
static void resolve_veths(struct agent *a)
{
	struct agent_containers *t = &a->containers;
	struct veth_ns v = {.a = a, .cap = a->sandboxes.n_sbx};
	int ret;

	t->veths_sig = veths_sig(a);
	t->resolve = false;
	v.ifindex = calloc(v.cap + 1, sizeof(int));
	v.nsid = calloc(v.cap + 1, sizeof(int));
	if (!v.ifindex || !v.nsid)
		goto out;
	ret = rw_nl_dump_links(veth_ns_cb, &v);
	if (ret) {
		rw_warn("containers: the links dump: %s; the pods' veths are resolved again at the "
			"next scan",
			strerror(-ret));
		t->resolve = true;
		goto out;
	}
	for (size_t p = 0; p < t->n_pods; p++) {
		struct container_pod *pod = &t->pods[p];
		uint32_t ifindex = 0;
		int fd, nsid;

		if (pod->netns && (fd = open(pod->netns, O_RDONLY | O_CLOEXEC)) >= 0) {
			if (rw_nl_netns_id(fd, &nsid) == 0)
				for (size_t i = 0; i < v.n; i++)
					if (v.nsid[i] == nsid)
						ifindex = (uint32_t)v.ifindex[i];
			close(fd);
		}
		pod->ifindex = ifindex;
	}
out:
	free(v.ifindex);
	free(v.nsid);
}

/* Each container takes its pod's veth. */
static void set_ifindexes(struct agent_containers *t)
{
	size_t n_refs;
	struct id_ref *refs = refs_sorted(t, true, &n_refs), *r;

	if (!refs)
		return;
	for (size_t i = 0; i < t->n; i++) {
		uint32_t ifindex = (r = ref_find(t, refs, n_refs, t->meta[i].sandbox_id))
					   ? t->pods[r->i].ifindex
					   : 0;

		if (ifindex != t->c[i].ifindex) {
			t->c[i].ifindex = ifindex;
			t->gen++;
		}
	}
	free(refs);
}

static void drain_inotify(struct agent_containers *t)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(t->inotify_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			if (ev->mask & IN_IGNORED) /* the folder went away */
				t->watch = -1;
			p += sizeof(*ev) + ev->len;
		}
	}
}

void containers_poll(struct agent *a)
{
	struct agent_containers *t = &a->containers;
	unsigned long long gen = t->gen;
	size_t left_out = t->left_out;
	double start = rw_now_ms();
	char buf[8];

	if (!t->on)
		return;
	if (t->timer_fd >= 0)
		while (read(t->timer_fd, buf, sizeof(buf)) > 0)
			;
	if (t->inotify_fd >= 0) {
		drain_inotify(t);
		if (t->watch < 0) {
			t->watch = inotify_add_watch(t->inotify_fd, t->dir,
						     IN_CREATE | IN_DELETE | IN_MOVED_FROM |
							     IN_MOVED_TO | IN_DELETE_SELF |
							     IN_ONLYDIR);
			if (t->watch >= 0)
				rw_info("containers: watching %s", t->dir);
		}
	}
	scan_dir(t);
	sweep(t);
	read_cgroup_ids(t);
	/* Pods whose veth is not known, or a veth the agent no longer has, or a new set of veths. */
	for (size_t p = 0; p < t->n_pods && !t->resolve; p++)
		if (t->pods[p].ifindex && !is_sandbox(a, (int)t->pods[p].ifindex))
			t->resolve = true;
	if (t->resolve || veths_sig(a) != t->veths_sig)
		resolve_veths(a);
	set_ifindexes(t);
	if (t->left_out != left_out)
		rw_err("containers: the table is full (%d containers): %llu left out in this scan",
		       RW_MAX_CONTAINERS, t->left_out - left_out);
	t->left_out = left_out; /* counted per scan: those left out are tried again */
	t->scan_ms = rw_now_ms() - start;
	if (t->gen != gen) {
		agent_view_changed(a);
		admissions_sync(a); /* the live slot's rw_admit follows the table */
	}
}

int containers_init(struct agent *a)
{
	struct agent_containers *t = &a->containers;
	struct itimerspec its = {.it_interval = {RW_CONTAINERS_POLL_MS / 1000, 0},
				 .it_value = {RW_CONTAINERS_POLL_MS / 1000, 0}};
	char err[PATH_MAX + 100];

	t->inotify_fd = t->timer_fd = t->watch = -1;
	t->resolve = true;
	if (!t->dir)
		t->dir = RW_CONTAINERS_DIR;
	if (t->cgroup_root_opt) {
		int ret = rw_cgroup2_root(t->cgroup_root_opt, t->cgroup_root,
					  sizeof(t->cgroup_root), err, sizeof(err));

		if (ret) {
			rw_err("--cgroup-root %s", err);
			return ret;
		}
	} else if (rw_cgroup2_mount(NULL, t->cgroup_root, sizeof(t->cgroup_root), err,
				    sizeof(err))) {
		t->cgroup_root[0] = '\0';
		rw_warn("containers: %s: no container's cgroup id can be known (cgroup_id 0)", err);
	}
	t->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	t->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (t->inotify_fd < 0 || t->timer_fd < 0) {
		rw_err("containers: inotify or timer: %s", strerror(errno));
		return -errno;
	}
	timerfd_settime(t->timer_fd, 0, &its, NULL);
	t->on = true;
	containers_poll(a);
	if (t->watch < 0)
		rw_info("containers: %s is not there (yet): looked for every %d ms", t->dir,
			RW_CONTAINERS_POLL_MS);
	rw_info("containers: %zu in %zu pods, cgroup v2 at %s", t->n, t->n_pods,
		t->cgroup_root[0] ? t->cgroup_root : "(none)");
	return 0;
}

void containers_free(struct agent *a)
{
	struct agent_containers *t = &a->containers;

	for (size_t i = 0; i < t->n; i++)
		free(t->meta[i].cg_dir);
	for (size_t i = 0; i < t->n_pods; i++)
		free(t->pods[i].netns);
	free(t->c);
	free(t->meta);
	free(t->pods);
	free(t->bad);
	if (t->inotify_fd >= 0)
		close(t->inotify_fd);
	if (t->timer_fd >= 0)
		close(t->timer_fd);
	t->c = NULL;
	t->meta = NULL;
	t->pods = NULL;
	t->bad = NULL;
	t->n = t->n_pods = t->n_bad = 0;
	t->inotify_fd = t->timer_fd = -1;
	t->on = false;
}

json_t *containers_status(struct agent *a)
{
	struct agent_containers *t = &a->containers;
	json_t *list = json_array();
	int waiting = 0;

	if (!t->on)
		return json_null();
	for (size_t i = 0; i < t->n; i++) {
		const struct rw_container *c = &t->c[i];
		const char *ifname = NULL;

		for (size_t s = 0; s < a->sandboxes.n_sbx && c->ifindex; s++)
			if (a->sandboxes.sbx[s].ifindex == (int)c->ifindex)
				ifname = a->sandboxes.sbx[s].ifname;
		if (!c->cgroup_id || !c->ifindex)
			waiting++;
		json_array_append_new(list, json_pack("{s:s, s:s, s:s%, s:s, s:I, s:i, s:o}", "pod",
						      c->pod, "name", c->name, "id", c->id,
						      strnlen(c->id, 12), "pod_uid", c->pod_uid,
						      "cgroup_id", (json_int_t)c->cgroup_id,
						      "ifindex", (int)c->ifindex, "ifname",
						      ifname ? json_string(ifname) : json_null()));
	}
	return json_pack("{s:s, s:o, s:b, s:i, s:i, s:i, s:I, s:I, s:f, s:o}", "dir", t->dir,
			 "cgroup_root",
			 t->cgroup_root[0] ? json_string(t->cgroup_root) : json_null(), "watching",
			 t->watch >= 0, "count", (int)t->n, "pods", (int)t->n_pods, "waiting",
			 waiting, "refused", (json_int_t)t->refused, "gen", (json_int_t)t->gen,
			 "scan_ms", t->scan_ms, "list", list);
}
