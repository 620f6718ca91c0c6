// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_containers.c: what the agent reads to learn the pods' containers (issue 34): a CRI
 * bundle's config.json (user/lib/oci_bundle.c) taken, and each missing or ill-typed field
 * refused by its name; an OCI cgroupsPath turned into its cgroup v2 directory
 * (user/lib/cgroup2.c) for both of the kubelet's drivers and its three QoS classes, and hostile
 * paths ("..", a climb out of the root, a '/' in a unit name, over-long) refused; the cgroup2
 * mount found in a mountinfo of a hybrid and of a unified host.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>

#include "cgroup2.h"
#include "oci_bundle.h"

#define SID "4f2a0c9e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10"

/* A container's config.json as containerd's CRI writes it, the parts read and some others. */
static const char good_container[] =
	"{\"ociVersion\":\"1.1.0\",\"process\":{\"user\":{\"uid\":1001,\"gid\":1001}},"
	"\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","
	"\"io.kubernetes.cri.container-name\":\"identity-sidecar\","
	"\"io.kubernetes.cri.sandbox-id\":\"" SID "\","
	"\"io.kubernetes.cri.sandbox-uid\":\"5b2c1d7e-0f3a-4c8b-9d6e-1a2b3c4d5e6f\","
	"\"io.kubernetes.cri.sandbox-name\":\"agent-a\","
	"\"io.kubernetes.cri.sandbox-namespace\":\"sandboxes\","
	"\"io.kubernetes.cri.image-name\":\"registry.example/sidecar:1\"},"
	"\"linux\":{\"cgroupsPath\":\"kubepods-besteffort-pod5b2c1d7e_0f3a_4c8b_9d6e_1a2b3c4d5e6f."
	"slice:cri-containerd:abc\","
	"\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\",\"path\":\"/proc/42/ns/net\"}]}}";

static const char good_sandbox[] =
	"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\","
	"\"io.kubernetes.cri.sandbox-id\":\"" SID "\","
	"\"io.kubernetes.cri.sandbox-uid\":\"5b2c1d7e-0f3a-4c8b-9d6e-1a2b3c4d5e6f\","
	"\"io.kubernetes.cri.sandbox-name\":\"agent-a\","
	"\"io.kubernetes.cri.sandbox-namespace\":\"sandboxes\"},"
	"\"linux\":{\"cgroupsPath\":\"/kubepods/besteffort/pod5b2c/" SID "\","
	"\"namespaces\":[{\"type\":\"ipc\"},{\"type\":\"network\","
	"\"path\":\"/var/run/netns/cni-1f2e3d4c\"}]}}";

static int parse(const char *text, struct rw_oci_bundle *b, char *err, size_t errlen)
{
	return rw_oci_bundle_parse(text, strlen(text), "/b/x/config.json", b, err, errlen);
}

static void test_bundle_good(void **state)
{
	struct rw_oci_bundle *b = malloc(sizeof(*b));
	char err[512] = "";

	assert_non_null(b);
	assert_int_equal(parse(good_container, b, err, sizeof(err)), 0);
	assert_false(b->sandbox);
	assert_string_equal(b->name, "identity-sidecar");
	assert_string_equal(b->sandbox_id, SID);
	assert_string_equal(b->pod_uid, "5b2c1d7e-0f3a-4c8b-9d6e-1a2b3c4d5e6f");
	assert_string_equal(b->pod_name, "agent-a");
	assert_string_equal(b->pod_ns, "sandboxes");
	assert_string_equal(b->cgroups_path,
			    "kubepods-besteffort-pod5b2c1d7e_0f3a_4c8b_9d6e_1a2b3c4d5e6f.slice:"
			    "cri-containerd:abc");
	assert_string_equal(b->netns, ""); /* a container's netns is not read */

	assert_int_equal(parse(good_sandbox, b, err, sizeof(err)), 0);
	assert_true(b->sandbox);
	assert_string_equal(b->name, "");
	assert_string_equal(b->netns, "/var/run/netns/cni-1f2e3d4c");
	free(b);
}

/* good_container with one change made by jansson: the key at path (dots; the annotation keys
 * are taken whole) set to value (a JSON text), or removed (value NULL).
 */
static char *edit(const char *base, const char *obj, const char *key, const char *value)
{
	json_t *root = json_loads(base, 0, NULL), *o = root;
	char *out;

	assert_non_null(root);
	if (obj)
		o = json_object_get(root, obj);
	assert_non_null(o);
	if (value)
		json_object_set_new(o, key,
				    json_loads(value, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL));
	else
		json_object_del(o, key);
	out = json_dumps(root, 0);
	json_decref(root);
	return out;
}

static void refused(const char *text, const char *want)
{
	struct rw_oci_bundle *b = malloc(sizeof(*b));
	char err[512] = "";

	assert_non_null(b);
	assert_int_equal(parse(text, b, err, sizeof(err)), -EINVAL);
	if (!strstr(err, want))
		fail_msg("error \"%s\" does not say \"%s\"", err, want);
	assert_non_null(strstr(err, "/b/x/config.json: "));
	free(b);
}

static void test_bundle_fields(void **state)
{
	static const char *const ann[] = {
		"io.kubernetes.cri.container-type", "io.kubernetes.cri.container-name",
		"io.kubernetes.cri.sandbox-id",	    "io.kubernetes.cri.sandbox-uid",
		"io.kubernetes.cri.sandbox-name",   "io.kubernetes.cri.sandbox-namespace",
	};
	char want[200], *t;

	for (size_t i = 0; i < sizeof(ann) / sizeof(ann[0]); i++) {
		/* Missing, not a string, empty: each refused by its name. */
		snprintf(want, sizeof(want), "annotations.%s: missing", ann[i]);
		refused(t = edit(good_container, "annotations", ann[i], NULL), want);
		free(t);
		snprintf(want, sizeof(want), "annotations.%s: not a string", ann[i]);
		refused(t = edit(good_container, "annotations", ann[i], "7"), want);
		free(t);
		snprintf(want, sizeof(want), "annotations.%s: empty", ann[i]);
		refused(t = edit(good_container, "annotations", ann[i], "\"\""), want);
		free(t);
	}
	refused(t = edit(good_container, "annotations", "io.kubernetes.cri.container-type",
			 "\"podsandbox\""),
		"container-type: \"podsandbox\", not \"sandbox\" or \"container\"");
	free(t);
	refused(t = edit(good_container, "annotations", "io.kubernetes.cri.container-name",
			 "\"a123456789b123456789c123456789d123456789e123456789f123456789g1234\""),
		"container-name: longer than 63 bytes");
	free(t);
	refused(t = edit(good_container, "annotations", "io.kubernetes.cri.container-name",
			 "\"a\\u0000b\""),
		"\\u0000 is not allowed"); /* jansson refuses it before the field is read */
	free(t);
	refused(t = edit(good_container, "linux", "cgroupsPath", NULL),
		"linux.cgroupsPath: missing");
	free(t);
	refused(t = edit(good_container, "linux", "cgroupsPath", "[]"),
		"linux.cgroupsPath: not a string");
	free(t);
	refused(t = edit(good_container, NULL, "annotations", NULL), "annotations: missing");
	free(t);
	refused(t = edit(good_container, NULL, "annotations", "[]"), "annotations: not an object");
	free(t);
	refused(t = edit(good_container, NULL, "linux", "\"x\""), "linux: not an object");
	free(t);
	/* A sandbox's network namespace entry, ill-typed. */
	refused(t = edit(good_sandbox, "linux", "namespaces", "{}"),
		"linux.namespaces: not an array");
	free(t);
	refused(t = edit(good_sandbox, "linux", "namespaces",
			 "[{\"type\":\"network\",\"path\":1}]"),
		"linux.namespaces[0].path: not a string");
	free(t);
	refused(t = edit(good_sandbox, "linux", "namespaces", "[\"network\"]"),
		"linux.namespaces[0]: not an object");
	free(t);
	refused("{\"annotations\": {}", "line 1 column");
	refused("[1]", "not a JSON object");
	refused("{\"a\":1,\"a\":2}", "duplicate");
}

static void test_bundle_host_network(void **state)
{
	struct rw_oci_bundle *b = malloc(sizeof(*b));
	char err[512], *t = edit(good_sandbox, "linux", "namespaces", "[{\"type\":\"network\"}]");

	/* A hostNetwork pod's sandbox: a network entry without a path, or none: no netns. */
	assert_int_equal(parse(t, b, err, sizeof(err)), 0);
	assert_string_equal(b->netns, "");
	free(t);
	t = edit(good_sandbox, "linux", "namespaces", NULL);
	assert_int_equal(parse(t, b, err, sizeof(err)), 0);
	assert_string_equal(b->netns, "");
	free(t);
	free(b);
}

static void test_bundle_read_limit(void **state)
{
	char path[] = "/tmp/rw-test-bundle-XXXXXX", err[512];
	struct rw_oci_bundle *b = malloc(sizeof(*b));
	int fd = mkstemp(path);
	char *big = malloc(RW_OCI_CONFIG_MAX + 2);

	assert_true(fd >= 0 && b && big);
	memset(big, ' ', RW_OCI_CONFIG_MAX + 1);
	assert_int_equal(write(fd, big, RW_OCI_CONFIG_MAX + 1), RW_OCI_CONFIG_MAX + 1);
	close(fd);
	assert_int_equal(rw_oci_bundle_read(path, b, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "larger than 1048576 bytes"));
	unlink(path);
	assert_int_equal(rw_oci_bundle_read(path, b, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, path));
	free(big);
	free(b);
}

static void dir_is(const char *cp, const char *want)
{
	char out[PATH_MAX], err[512] = "";
	int ret = rw_cgroup2_dir(cp, out, sizeof(out), err, sizeof(err));

	if (ret)
		fail_msg("%s: %s", cp, err);
	assert_string_equal(out, want);
}

static void dir_refused(const char *cp, int want_ret, const char *want)
{
	char out[PATH_MAX], err[512] = "";

	assert_int_equal(rw_cgroup2_dir(cp, out, sizeof(out), err, sizeof(err)), want_ret);
	if (!strstr(err, want))
		fail_msg("%s: error \"%s\" does not say \"%s\"", cp, err, want);
}

static void test_dir_systemd(void **state)
{
	/* The kubelet's systemd driver, its three QoS classes. */
	dir_is("kubepods-besteffort-pod1a2b_3c4d.slice:cri-containerd:abc123",
	       "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b_3c4d.slice/"
	       "cri-containerd-abc123.scope");
	dir_is("kubepods-burstable-pod1a2b_3c4d.slice:cri-containerd:abc123",
	       "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c4d.slice/"
	       "cri-containerd-abc123.scope");
	dir_is("kubepods-pod1a2b_3c4d.slice:cri-containerd:abc123",
	       "kubepods.slice/kubepods-pod1a2b_3c4d.slice/cri-containerd-abc123.scope");
	/* The root slice, runc's default slice, a name that is a slice, no prefix. */
	dir_is("-.slice:cri-containerd:x", "cri-containerd-x.scope");
	dir_is(":cri-containerd:x", "system.slice/cri-containerd-x.scope");
	dir_is("kubepods.slice:p:sub.slice", "kubepods.slice/sub.slice");
	dir_is("kubepods.slice::x", "kubepods.slice/x.scope");
}

static void test_dir_cgroupfs(void **state)
{
	dir_is("/kubepods/besteffort/pod1a2b-3c4d/abc123",
	       "kubepods/besteffort/pod1a2b-3c4d/abc123");
	dir_is("/kubepods/burstable/pod1a2b-3c4d/abc123", "kubepods/burstable/pod1a2b-3c4d/abc123");
	dir_is("/kubepods/pod1a2b-3c4d/abc123", "kubepods/pod1a2b-3c4d/abc123");
	/* A name with dots that is not "." or "..". */
	dir_is("/kubepods/..x/a.b", "kubepods/..x/a.b");
}

static void test_dir_hostile(void **state)
{
	char *longp = malloc(PATH_MAX + 16), out[64], err[512];

	/* Climbing out of the root, or empty parts, in either form. */
	dir_refused("/kubepods/../../etc", -EINVAL, "\"..\"");
	dir_refused("/..", -EINVAL, "\"..\"");
	dir_refused("/kubepods/./x", -EINVAL, "\".\"");
	dir_refused("/kubepods//x", -EINVAL, "an empty");
	dir_refused("/kubepods/x/", -EINVAL, "an empty");
	dir_refused("/", -EINVAL, "the root itself");
	dir_refused("kubepods.slice:cri-containerd:..", -EINVAL, "\"..\"");
	dir_refused("kubepods.slice:..:x", -EINVAL, "\"..\"");
	dir_refused("kubepods.slice:cri-containerd:../../etc", -EINVAL, "a '/'");
	dir_refused("../kubepods.slice:cri-containerd:x", -EINVAL, "a '/'");
	dir_refused("kubepods.slice:cri/containerd:x", -EINVAL, "a '/'");
	dir_refused("kubepods--x.slice:p:x", -EINVAL, "empty part");
	dir_refused("-kubepods.slice:p:x", -EINVAL, "empty part");
	dir_refused("kubepods-.slice:p:x", -EINVAL, "empty part");
	dir_refused("kubepods:p:x", -EINVAL, "does not end in .slice");
	dir_refused("kubepods.slice:p:", -EINVAL, "the unit name is empty");
	dir_refused("a.slice:b:c:d", -EINVAL, "neither");
	dir_refused("kubepods/pod/x", -EINVAL, "a relative path");
	dir_refused("", -EINVAL, "empty");
	dir_refused("/kubepods/\n/x", -EINVAL, "control character at byte 10");
	/* Over-long: the input, and the output past its buffer. */
	assert_non_null(longp);
	memset(longp, 'a', PATH_MAX + 15);
	longp[0] = '/';
	longp[PATH_MAX + 15] = '\0';
	dir_refused(longp, -ENAMETOOLONG, "longer than");
	assert_int_equal(
		rw_cgroup2_dir("/kubepods/besteffort/pod1a2b-3c4d-5e6f-7a8b/0123456789abcdef"
			       "0123456789abcdef0123456789abcdef0123456789abcdef",
			       out, sizeof(out), err, sizeof(err)),
		-ENAMETOOLONG);
	assert_int_equal(rw_cgroup2_dir("a-b-c-d-e-f-g-h-i-j-k-l.slice:cri-containerd:x", out,
					sizeof(out), err, sizeof(err)),
			 -ENAMETOOLONG);
	free(longp);
}

static void mount_is(const char *mountinfo, int want_ret, const char *want)
{
	char path[] = "/tmp/rw-test-mountinfo-XXXXXX", out[PATH_MAX], err[512] = "";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, mountinfo, strlen(mountinfo)), (ssize_t)strlen(mountinfo));
	close(fd);
	assert_int_equal(rw_cgroup2_mount(path, out, sizeof(out), err, sizeof(err)), want_ret);
	assert_string_equal(want_ret ? err : out, want);
	unlink(path);
}

static void test_mount(void **state)
{
	char want[128];

	/* Hybrid (this host's layout), unified (the 6.1 VM's), an escaped blank, none. */
	mount_is("25 30 0:23 / /sys rw - sysfs sysfs rw\n"
		 "33 25 0:28 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755\n"
		 "34 33 0:29 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n"
		 "41 33 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
		 0, "/sys/fs/cgroup/unified");
	mount_is("30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n",
		 0, "/sys/fs/cgroup");
	mount_is("30 25 0:26 / /mnt/cg\\0402 rw - cgroup2 none rw\n", 0, "/mnt/cg 2");
	snprintf(want, sizeof(want), "no cgroup2 file system is mounted");
	{
		char path[] = "/tmp/rw-test-mountinfo-XXXXXX", out[64], err[512] = "";
		int fd = mkstemp(path);
		static const char v1[] =
			"34 33 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";

		assert_true(fd >= 0);
		assert_int_equal(write(fd, v1, sizeof(v1) - 1), (ssize_t)sizeof(v1) - 1);
		close(fd);
		assert_int_equal(rw_cgroup2_mount(path, out, sizeof(out), err, sizeof(err)),
				 -ENOENT);
		assert_non_null(strstr(err, want));
		assert_non_null(strstr(err, path));
		unlink(path);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bundle_good),
		cmocka_unit_test(test_bundle_fields),
		cmocka_unit_test(test_bundle_host_network),
		cmocka_unit_test(test_bundle_read_limit),
		cmocka_unit_test(test_dir_systemd),
		cmocka_unit_test(test_dir_cgroupfs),
		cmocka_unit_test(test_dir_hostile),
		cmocka_unit_test(test_mount),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
