// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_cni.c: runwall-cni's pure parts (user/cni): rw_cni_parse() on network configurations
 * and prevResults as runtimes send them (what it takes, the code and message of each refusal),
 * rw_cni_conflist_edit() (install and uninstall of the conflist entry, idempotent), and the
 * chain check of user/lib/cnichain.c on a folder of its own (which file the runtime loads, the
 * entry put back, a single-plugin file reported).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "install.h"

/* What ptp + host-local (Debian's reference plugins) hand on, chained in a 1.0.0 conflist. */
static const char ptp_add[] =
	"{\"cniVersion\":\"1.0.0\",\"name\":\"net\",\"type\":\"runwall-cni\","
	"\"bpffs\":\"/sys/fs/bpf/rw\",\"ifPrefix\":\"veth\",\"attachMode\":\"tc\","
	"\"runtimeConfig\":{},\"prevResult\":{\"cniVersion\":\"1.0.0\","
	"\"interfaces\":[{\"name\":\"veth1a2b3c4d\",\"mac\":\"aa:bb:cc:dd:ee:ff\"},"
	"{\"name\":\"eth0\",\"mac\":\"11:22:33:44:55:66\",\"sandbox\":\"/run/netns/p\"}],"
	"\"ips\":[{\"interface\":1,\"address\":\"10.1.9.11/24\",\"gateway\":\"10.1.9.1\"}],"
	"\"routes\":[{\"dst\":\"0.0.0.0/0\"}]}}";

static int parse(const char *s, struct rw_cni_req *req, char *err)
{
	return rw_cni_parse(s, strlen(s), req, err, 256);
}

/* rw_cni_parse() on an ADD whose prevResult is prev (JSON text): it parses, what it found is in
 * req.
 */
static void parse_prev(const char *prev, struct rw_cni_req *req)
{
	char doc[512], err[256] = "";

	snprintf(doc, sizeof(doc),
		 "{\"cniVersion\":\"1.0.0\",\"type\":\"runwall-cni\",\"prevResult\":%s}", prev);
	assert_int_equal(parse(doc, req, err), 0);
}

/* The same, of a prevResult with the host-side interface veth0 and the ips ips (a JSON list's
 * members).
 */
static void parse_ips(const char *ips, struct rw_cni_req *req)
{
	char prev[512];

	snprintf(prev, sizeof(prev), "{\"interfaces\":[{\"name\":\"veth0\"}],\"ips\":[%s]}", ips);
	parse_prev(prev, req);
}

/* What a refused prevResult leaves: parsed, incomplete, and the message msg. */
static void assert_prev_refused(struct rw_cni_req *req, const char *msg)
{
	assert_false(req->prev_complete);
	assert_string_equal(req->prev_error, msg);
	rw_cni_req_free(req);
}

/* A case of the tables below: what goes in, and what comes out of it (a message, an address). */
struct in_out {
	const char *in, *out;
};

/* Each case's input, parsed by parse_in(), is refused with its message. */
static void assert_each_refused(const struct in_out *cases, size_t n,
				void (*parse_in)(const char *, struct rw_cni_req *))
{
	for (size_t i = 0; i < n; i++) {
		struct rw_cni_req req;

		parse_in(cases[i].in, &req);
		assert_prev_refused(&req, cases[i].out);
	}
}

static void test_ptp_result(void **state)
{
	struct rw_cni_req req;
	char err[256] = "";

	assert_int_equal(parse(ptp_add, &req, err), 0);
	assert_string_equal(req.cni_version, "1.0.0");
	assert_string_equal(req.bpffs, "/sys/fs/bpf/rw");
	assert_string_equal(req.ifprefix, "veth");
	assert_int_equal(req.mode, RW_ATTACH_TC);
	assert_true(req.prev_complete);
	assert_string_equal(req.host_if, "veth1a2b3c4d");
	assert_int_equal(req.pod_ip, inet_addr("10.1.9.11"));
	assert_non_null(req.prev);
	rw_cni_req_free(&req);
}

static void test_defaults_and_no_prev(void **state)
{
	struct rw_cni_req req;
	char err[256] = "";

	assert_int_equal(parse("{\"cniVersion\":\"0.4.0\",\"type\":\"runwall-cni\"}", &req, err),
			 0);
	assert_string_equal(req.bpffs, "/sys/fs/bpf/runwall");
	assert_string_equal(req.ifprefix, "eni,vlan");
	assert_int_equal(req.mode, RW_ATTACH_AUTO);
	assert_null(req.prev);
	assert_false(req.prev_complete);
	rw_cni_req_free(&req);
}

/* The VPC CNI: host veth eniXXXX, a /32, and (pod ENI, branch mode) a dummy host-side
 * interface before it; the one matching ifPrefix is the sandbox's.
 */
static void test_vpc_cni_two_host_interfaces(void **state)
{
	struct rw_cni_req req;
	char err[256] = "";

	assert_int_equal(parse("{\"cniVersion\":\"1.0.0\",\"type\":\"runwall-cni\",\"prevResult\":{"
			       "\"interfaces\":[{\"name\":\"dummy1\"},{\"name\":\"eni0a1b2c3d\"},"
			       "{\"name\":\"eth0\",\"sandbox\":\"/proc/1/ns/net\"}],\"ips\":["
			       "{\"address\":\"fd00::5/128\"},{\"address\":\"10.1.2.3/32\","
			       "\"interface\":2}]}}",
			       &req, err),
			 0);
	assert_true(req.prev_complete);
	assert_string_equal(req.host_if, "eni0a1b2c3d");
	assert_int_equal(req.pod_ip, inet_addr("10.1.2.3"));
	rw_cni_req_free(&req);
}

static void test_incomplete_prev(void **state)
{
	static const struct in_out cases[] = {
		{"{}", "prevResult.interfaces: missing or not an array"},
		{"{\"interfaces\":[{\"name\":\"eth0\",\"sandbox\":\"/x\"}],\"ips\":[]}",
		 "prevResult.interfaces: no host-side interface (one without \"sandbox\")"},
		{"{\"interfaces\":[{\"name\":\"veth0\"}]}",
		 "prevResult.ips: missing or not an array"},
		{"{\"interfaces\":[{\"name\":\"veth0\"}],\"ips\":[]}",
		 "prevResult.ips: no IPv4 or IPv6 address"},
		{"{\"interfaces\":[{\"name\":\"a/b\"}],\"ips\":[]}",
		 "prevResult.interfaces[0].name: not an interface name"},
		{"{\"interfaces\":[{\"name\":\"0123456789abcdef\"}],\"ips\":[]}",
		 "prevResult.interfaces[0].name: not an interface name"},
		{"{\"interfaces\":[7],\"ips\":[]}",
		 "prevResult.interfaces[0]: not an object with a name"},
		{"{\"interfaces\":[{\"name\":\"v\"}],\"ips\":[{\"address\":5}]}",
		 "prevResult.ips[0].address: missing or not a string"},
	};

	assert_each_refused(cases, sizeof(cases) / sizeof(cases[0]), parse_prev);
}

/* An address no pod can have is never bound: ADD and CHECK fail with RW_CNI_E_PREV and the
 * message (DEL still works, with nothing of the pod's to unbind).
 */
static void test_not_pod_addresses(void **state)
{
	static const struct in_out cases[] = {
		{"{\"interface\":1,\"address\":\"0.0.0.0/0\"}",
		 "prevResult.ips[0].address: \"0.0.0.0/0\" is not a pod address: \"this network\" "
		 "(0.0.0.0/8)"},
		{"{\"address\":\"0.1.2.3/32\"}",
		 "prevResult.ips[0].address: \"0.1.2.3/32\" is not a pod address: \"this network\" "
		 "(0.0.0.0/8)"},
		{"{\"address\":\"127.0.0.1/8\"}",
		 "prevResult.ips[0].address: \"127.0.0.1/8\" is not a pod address: a loopback "
		 "address"},
		{"{\"address\":\"169.254.1.1/32\"}",
		 "prevResult.ips[0].address: \"169.254.1.1/32\" is not a pod address: a link-local "
		 "address"},
		{"{\"address\":\"224.0.0.251/32\"}",
		 "prevResult.ips[0].address: \"224.0.0.251/32\" is not a pod address: a multicast "
		 "address"},
		{"{\"address\":\"239.255.255.255\"}",
		 "prevResult.ips[0].address: \"239.255.255.255\" is not a pod address: a multicast "
		 "address"},
		{"{\"address\":\"240.0.0.1/32\"}",
		 "prevResult.ips[0].address: \"240.0.0.1/32\" is not a pod address: a reserved "
		 "address (240.0.0.0/4)"},
		{"{\"address\":\"255.255.255.255/32\"}",
		 "prevResult.ips[0].address: \"255.255.255.255/32\" is not a pod address: the "
		 "broadcast address"},
		{"{\"address\":\"10.1.4.0/24\"}",
		 "prevResult.ips[0].address: \"10.1.4.0/24\" is not a pod address: the network "
		 "address of 10.1.4.0/24"},
		{"{\"address\":\"10.1.4.255/24\"}",
		 "prevResult.ips[0].address: \"10.1.4.255/24\" is not a pod address: the broadcast "
		 "address of 10.1.4.0/24"},
		{"{\"address\":\"10.1.7.255/22\"}",
		 "prevResult.ips[0].address: \"10.1.7.255/22\" is not a pod address: the broadcast "
		 "address of 10.1.4.0/22"},
		{"{\"address\":\"10.1.4.7/33\"}",
		 "prevResult.ips[0].address: \"10.1.4.7/33\" is not a pod address: \"/33\" is not a "
		 "prefix length (0 to 32)"},
		{"{\"address\":\"10.1.4.7/24x\"}",
		 "prevResult.ips[0].address: \"10.1.4.7/24x\" is not a pod address: \"/24x\" is not "
		 "a prefix length (0 to 32)"},
		{"{\"address\":\"10.1.4.7/\"}",
		 "prevResult.ips[0].address: \"10.1.4.7/\" is not a pod address: \"/\" is not a "
		 "prefix length (0 to 32)"},
		{"{\"address\":\"10.1.4.7/024\"}",
		 "prevResult.ips[0].address: \"10.1.4.7/024\" is not a pod address: \"/024\" is not "
		 "a prefix length (0 to 32)"},
		{"{\"address\":\"10.1.4.7/-1\"}",
		 "prevResult.ips[0].address: \"10.1.4.7/-1\" is not a pod address: \"/-1\" is not "
		 "a prefix length (0 to 32)"},
		{"{\"address\":\"169.254.171.255/32\"}",
		 "prevResult.ips[0].address: \"169.254.171.255/32\" is not a pod address: a "
		 "link-local address"},
		{"{\"address\":\"169.254.176.0/32\"}",
		 "prevResult.ips[0].address: \"169.254.176.0/32\" is not a pod address: a "
		 "link-local address"},
		/* IPv6: global unicast or unique local only */
		{"{\"address\":\"::/128\"}",
		 "prevResult.ips[0].address: \"::/128\" is not a pod address: the unspecified "
		 "address (::)"},
		{"{\"address\":\"::1\"}",
		 "prevResult.ips[0].address: \"::1\" is not a pod address: the loopback address "
		 "(::1)"},
		{"{\"address\":\"fe80::1c2:3ff:fe04:506/64\"}",
		 "prevResult.ips[0].address: \"fe80::1c2:3ff:fe04:506/64\" is not a pod address: "
		 "a link-local address (fe80::/10)"},
		{"{\"address\":\"febf::1/128\"}",
		 "prevResult.ips[0].address: \"febf::1/128\" is not a pod address: a link-local "
		 "address (fe80::/10)"},
		{"{\"address\":\"ff02::1:ff00:7/128\"}",
		 "prevResult.ips[0].address: \"ff02::1:ff00:7/128\" is not a pod address: a "
		 "multicast address (ff00::/8)"},
		{"{\"address\":\"::ffff:10.1.2.3/128\"}",
		 "prevResult.ips[0].address: \"::ffff:10.1.2.3/128\" is not a pod address: not a "
		 "global unicast (2000::/3) or unique local (fc00::/7) address"},
		{"{\"address\":\"2002:a00:506::1/128\"}",
		 "prevResult.ips[0].address: \"2002:a00:506::1/128\" is not a pod address: an "
		 "address of an IPv4-embedding form (6to4, 2002::/16)"},
		{"{\"address\":\"2001:0:4136:e378:8000:63bf:3fff:fdd2/128\"}",
		 "prevResult.ips[0].address: \"2001:0:4136:e378:8000:63bf:3fff:fdd2/128\" is not a "
		 "pod address: an address of an IPv4-embedding form (Teredo, 2001::/32)"},
		{"{\"address\":\"2600:1f14:abc::/64\"}",
		 "prevResult.ips[0].address: \"2600:1f14:abc::/64\" is not a pod address: the "
		 "subnet-router anycast address of 2600:1f14:abc::/64"},
		{"{\"address\":\"2600:1f14:abc::7/129\"}",
		 "prevResult.ips[0].address: \"2600:1f14:abc::7/129\" is not a pod address: "
		 "\"/129\" is not a prefix length (0 to 128)"},
		{"{\"address\":\"2600:1f14:abc::7/064\"}",
		 "prevResult.ips[0].address: \"2600:1f14:abc::7/064\" is not a pod address: "
		 "\"/064\" is not a prefix length (0 to 128)"},
		/* neither family's address */
		{"{\"address\":\"pod.example/32\"}",
		 "prevResult.ips[0].address: \"pod.example/32\" is not an IPv4 or IPv6 address"},
		{"{\"address\":\"fe80::1%eth0/64\"}",
		 "prevResult.ips[0].address: \"fe80::1%eth0/64\" is not an IPv4 or IPv6 address"},
		/* one of each family: a second is refused, naming the first */
		{"{\"address\":\"10.1.2.3/32\"},{\"address\":\"10.1.2.4/32\"}",
		 "prevResult.ips[1].address: \"10.1.2.4/32\" is a second IPv4 address (ips[0] is "
		 "the pod's): a veth binds one of each family"},
		{"{\"address\":\"2600:1f14:abc::7/128\"},{\"address\":\"10.1.2.3/32\"},"
		 "{\"address\":\"2600:1f14:abc::8/128\"}",
		 "prevResult.ips[2].address: \"2600:1f14:abc::8/128\" is a second IPv6 address "
		 "(ips[0] is the pod's): a veth binds one of each family"},
		/* every address is judged, whatever its place */
		{"{\"address\":\"fd00::5/128\"},{\"address\":\"127.0.0.5/32\"},"
		 "{\"address\":\"10.1.2.3/32\"}",
		 "prevResult.ips[1].address: \"127.0.0.5/32\" is not a pod address: a loopback "
		 "address"},
	};

	assert_each_refused(cases, sizeof(cases) / sizeof(cases[0]), parse_ips);
}

/* What a pod can have: any host of a prefix, both of a /31, a /32 or a bare address. */
static void test_pod_addresses(void **state)
{
	static const struct in_out cases[] = {
		{"10.1.4.1/24", "10.1.4.1"},
		{"10.1.4.254/24", "10.1.4.254"},
		{"10.1.4.0/31", "10.1.4.0"},
		{"10.1.4.1/31", "10.1.4.1"},
		{"10.1.4.255/32", "10.1.4.255"},
		{"10.1.4.0/32", "10.1.4.0"},
		{"10.1.4.9", "10.1.4.9"},
		{"1.2.3.4/0", "1.2.3.4"},
		{"223.255.255.254/8", "223.255.255.254"},
		{"169.253.255.255/32", "169.253.255.255"},
		{"169.255.0.1/32", "169.255.0.1"},
		/* an IPv6 EKS node's node-local pod IPv4 (the VPC CNI's egress-cni) */
		{"169.254.172.1/22", "169.254.172.1"},
		{"169.254.172.2/22", "169.254.172.2"},
		{"169.254.175.254/32", "169.254.175.254"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rw_cni_req req;
		char ips[128];

		snprintf(ips, sizeof(ips), "{\"address\":\"%s\"}", cases[i].in);
		parse_ips(ips, &req);
		assert_string_equal(req.prev_error, "");
		assert_true(req.prev_complete);
		assert_int_equal(req.pod_ip, inet_addr(cases[i].out));
		rw_cni_req_free(&req);
	}
}

/* A pod's IPv6 (global unicast or ULA, of any prefix but its subnet-router anycast), alone or
 * beside an IPv4, in either order: both are the pod's.
 */
static void test_pod_addresses6(void **state)
{
	static const struct {
		const char *ips, *pod4, *pod6;
	} cases[] = {
		{"{\"address\":\"2600:1f14:abc:de00::7/128\"}", NULL, "2600:1f14:abc:de00::7"},
		{"{\"address\":\"2600:1f14:abc:de00::7\"}", NULL, "2600:1f14:abc:de00::7"},
		{"{\"address\":\"fd12:3456:789a::1/64\"}", NULL, "fd12:3456:789a::1"},
		{"{\"address\":\"2001:db8::/127\"}", NULL, "2001:db8::"},
		{"{\"address\":\"3fff:ffff::1/80\"}", NULL, "3fff:ffff::1"},
		/* an IPv6 EKS pod: its IPv6, and the node-local IPv4 the node SNATs */
		{"{\"address\":\"2600:1f14:abc:de00::7/128\",\"interface\":0},"
		 "{\"address\":\"169.254.172.9/22\",\"interface\":0}",
		 "169.254.172.9", "2600:1f14:abc:de00::7"},
		{"{\"address\":\"10.1.2.3/32\"},{\"address\":\"fd00:10::3/128\"}", "10.1.2.3",
		 "fd00:10::3"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rw_cni_req req;
		__be32 want6[4];

		parse_ips(cases[i].ips, &req);
		assert_string_equal(req.prev_error, "");
		assert_true(req.prev_complete);
		assert_int_equal(req.has_ip4, cases[i].pod4 != NULL);
		assert_int_equal(req.pod_ip, cases[i].pod4 ? inet_addr(cases[i].pod4) : 0);
		assert_true(req.has_ip6);
		assert_int_equal(inet_pton(AF_INET6, cases[i].pod6, want6), 1);
		assert_memory_equal(req.pod_ip6, want6, sizeof(want6));
		rw_cni_req_free(&req);
	}
}

static void test_refusals(void **state)
{
	static const struct {
		const char *doc;
		int code;
		const char *msg;
	} cases[] = {
		{"[]", RW_CNI_E_DECODE, "network config: not a JSON object"},
		{"{\"type\":\"runwall-cni\"}", RW_CNI_E_CONFIG,
		 "cniVersion: missing or not a string"},
		{"{\"cniVersion\":\"0.2.0\",\"type\":\"runwall-cni\"}", RW_CNI_E_VERSION,
		 "cniVersion: \"0.2.0\" is not one of 0.3.0, 0.3.1, 0.4.0, 1.0.0"},
		{"{\"cniVersion\":\"1.0.0\"}", RW_CNI_E_CONFIG, "type: missing or not a string"},
		{"{\"cniVersion\":\"1.0.0\",\"type\":\"runwall-cni\",\"bpffs\":3}", RW_CNI_E_CONFIG,
		 "bpffs: must be a string"},
		{"{\"cniVersion\":\"1.0.0\",\"type\":\"runwall-cni\",\"bpffs\":\"rel/dir\"}",
		 RW_CNI_E_CONFIG, "bpffs: \"rel/dir\" is not an absolute path"},
		{"{\"cniVersion\":\"1.0.0\",\"type\":\"runwall-cni\",\"ifPrefix\":\"\"}",
		 RW_CNI_E_CONFIG, "ifPrefix: must be a non-empty string of at most 127 bytes"},
		{"{\"cniVersion\":\"1.0.0\",\"type\":\"runwall-cni\",\"attachMode\":\"xdp\"}",
		 RW_CNI_E_CONFIG, "attachMode: \"xdp\" is not one of auto, tcx, tc"},
		{"{\"cniVersion\":\"1.0.0\",\"type\":\"runwall-cni\",\"prevResult\":[]}",
		 RW_CNI_E_CONFIG, "prevResult: not an object"},
		{"{\"cniVersion\":\"1.0.0\",\"cniVersion\":\"1.0.0\",\"type\":\"x\"}",
		 RW_CNI_E_DECODE,
		 "network config: line 1 column 34: duplicate object key near '\"cniVersion\"'"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rw_cni_req req;
		char err[256] = "";

		assert_int_equal(parse(cases[i].doc, &req, err), cases[i].code);
		assert_string_equal(err, cases[i].msg);
		assert_null(req.prev);
	}
}

static void test_versions(void **state)
{
	assert_true(rw_cni_version_has_check("0.4.0"));
	assert_true(rw_cni_version_has_check("1.0.0"));
	assert_false(rw_cni_version_has_check("0.3.1"));
	assert_true(rw_cni_version_ok("0.3.0"));
	assert_false(rw_cni_version_ok("1.1.0"));
}

static json_t *doc(const char *s)
{
	json_t *d = json_loads(s, 0, NULL);

	assert_non_null(d);
	return d;
}

/* rw_cni_conflist_edit() with entry (NULL: uninstall) changes the conflist into want; with
 * `again`, a second edit changes nothing and leaves want.
 */
static void expect_edit(const char *conflist, const char *entry, const char *want_text, bool again)
{
	json_t *d = doc(conflist), *e = entry ? doc(entry) : NULL, *want = doc(want_text);
	char err[128];
	bool changed;

	assert_int_equal(rw_cni_conflist_edit(d, e, &changed, err, sizeof(err)), 0);
	assert_true(changed);
	assert_true(json_equal(d, want));
	if (again) {
		assert_int_equal(rw_cni_conflist_edit(d, e, &changed, err, sizeof(err)), 0);
		assert_false(changed);
		assert_true(json_equal(d, want));
	}
	json_decref(d);
	json_decref(e);
	json_decref(want);
}

static void test_conflist_install_idempotent(void **state)
{
	expect_edit("{\"name\":\"aws-cni\",\"plugins\":[{\"type\":\"aws-cni\"},"
		    "{\"type\":\"portmap\"}]}",
		    "{\"type\":\"runwall-cni\",\"ifPrefix\":\"eni\"}",
		    "{\"name\":\"aws-cni\",\"plugins\":[{\"type\":\"aws-cni\"},"
		    "{\"type\":\"portmap\"},{\"type\":\"runwall-cni\",\"ifPrefix\":\"eni\"}]}",
		    true);
}

static void test_conflist_replace_in_place_and_dedupe(void **state)
{
	expect_edit("{\"plugins\":[{\"type\":\"aws-cni\"},{\"type\":\"runwall-cni\"},"
		    "{\"type\":\"portmap\"},{\"type\":\"runwall-cni\",\"bpffs\":\"/x\"}]}",
		    "{\"type\":\"runwall-cni\",\"bpffs\":\"/y\"}",
		    "{\"plugins\":[{\"type\":\"aws-cni\"},{\"type\":\"runwall-cni\","
		    "\"bpffs\":\"/y\"},{\"type\":\"portmap\"}]}",
		    false);
}

static void test_conflist_uninstall(void **state)
{
	expect_edit("{\"plugins\":[{\"type\":\"runwall-cni\"},{\"type\":\"aws-cni\"},"
		    "{\"type\":\"runwall-cni\"}]}",
		    NULL, "{\"plugins\":[{\"type\":\"aws-cni\"}]}", true);
}

static void test_conflist_refused(void **state)
{
	json_t *d = doc("{\"type\":\"aws-cni\"}");
	char err[128] = "";
	bool changed;

	assert_int_equal(rw_cni_conflist_edit(d, NULL, &changed, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "not a conflist: no \"plugins\" array");
	json_decref(d);
}

/* --- the chain: which file the runtime loads, and the agent's repair --------------------- */

static char netd[64];

static void put(const char *name, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", netd, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static json_t *file_doc(const char *name)
{
	char path[128];
	json_t *d;

	snprintf(path, sizeof(path), "%s/%s", netd, name);
	d = json_load_file(path, 0, NULL);
	assert_non_null(d);
	return d;
}

static int chain_setup(void **state)
{
	snprintf(netd, sizeof(netd), "/tmp/rwtest-netd.XXXXXX");
	return mkdtemp(netd) ? 0 : -1;
}

static int chain_teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", netd);
	return system(cmd);
}

static void test_conf_pick_order(void **state)
{
	char name[64], err[256];

	assert_int_equal(rw_cni_conf_pick(netd, name, sizeof(name), err, sizeof(err)), -ENOENT);
	put("10-aws.conflist", "{}");
	put(".05-hidden.conf", "{}");
	put("01-notes.txt", "{}");
	put(".10-aws.conflist.runwall.tmp", "{}");
	assert_int_equal(rw_cni_conf_pick(netd, name, sizeof(name), err, sizeof(err)), 0);
	assert_string_equal(name, "10-aws.conflist");
	/* libcni takes .conf, .conflist and .json together, in lexical order. */
	put("10-aws.conf", "{}");
	assert_int_equal(rw_cni_conf_pick(netd, name, sizeof(name), err, sizeof(err)), 0);
	assert_string_equal(name, "10-aws.conf");
	put("09-x.json", "{}");
	assert_int_equal(rw_cni_conf_pick(netd, name, sizeof(name), err, sizeof(err)), 0);
	assert_string_equal(name, "09-x.json");
}

static void test_chain_ensure(void **state)
{
	json_t *entry = doc("{\"type\":\"runwall-cni\"}"), *d, *plugins;
	struct rw_cni_chain st;

	assert_int_equal(rw_cni_chain_ensure(netd, entry, &st), -ENOENT);
	assert_false(st.chained);
	/* aws-node's file, as it writes it on start: the entry is appended, last. */
	put("10-aws.conflist", "{\"name\":\"aws-cni\",\"plugins\":[{\"type\":\"aws-cni\"},"
			       "{\"type\":\"portmap\"}]}");
	assert_int_equal(rw_cni_chain_ensure(netd, entry, &st), 0);
	assert_true(st.chained);
	assert_true(st.repaired);
	assert_string_equal(st.file, "10-aws.conflist");
	d = file_doc("10-aws.conflist");
	plugins = json_object_get(d, "plugins");
	assert_int_equal(json_array_size(plugins), 3);
	assert_true(json_equal(json_array_get(plugins, 2), entry));
	json_decref(d);
	/* Chained: nothing is written again. */
	assert_int_equal(rw_cni_chain_ensure(netd, entry, &st), 0);
	assert_true(st.chained);
	assert_false(st.repaired);
	/* An entry the installer wrote with other keys is kept as it is. */
	put("10-aws.conflist", "{\"name\":\"aws-cni\",\"plugins\":[{\"type\":\"aws-cni\"},"
			       "{\"type\":\"runwall-cni\",\"bpffs\":\"/sys/fs/bpf/x\"}]}");
	assert_int_equal(rw_cni_chain_ensure(netd, entry, &st), 0);
	assert_false(st.repaired);
	d = file_doc("10-aws.conflist");
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(d, "plugins"), 1), "bpffs")),
			    "/sys/fs/bpf/x");
	json_decref(d);
	/* A single-plugin .conf loaded first: not chained, not rewritten, and why. */
	put("05-other.conf", "{\"name\":\"other\",\"type\":\"bridge\"}");
	assert_int_equal(rw_cni_chain_ensure(netd, entry, &st), -EMEDIUMTYPE);
	assert_false(st.chained);
	assert_string_equal(st.file, "05-other.conf");
	assert_non_null(strstr(st.why, "05-other.conf is loaded first and holds one plugin"));
	d = file_doc("05-other.conf");
	assert_null(json_object_get(d, "plugins"));
	json_decref(d);
	/* A broken conflist loaded first: not chained, with the parser's message. */
	put("01-broken.conflist", "{\"plugins\": [");
	assert_true(rw_cni_chain_ensure(netd, entry, &st) < 0);
	assert_false(st.chained);
	assert_non_null(strstr(st.why, "01-broken.conflist"));
	json_decref(entry);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ptp_result),
		cmocka_unit_test(test_defaults_and_no_prev),
		cmocka_unit_test(test_vpc_cni_two_host_interfaces),
		cmocka_unit_test(test_incomplete_prev),
		cmocka_unit_test(test_not_pod_addresses),
		cmocka_unit_test(test_pod_addresses),
		cmocka_unit_test(test_pod_addresses6),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_conflist_install_idempotent),
		cmocka_unit_test(test_conflist_replace_in_place_and_dedupe),
		cmocka_unit_test(test_conflist_uninstall),
		cmocka_unit_test(test_conflist_refused),
		cmocka_unit_test_setup_teardown(test_conf_pick_order, chain_setup, chain_teardown),
		cmocka_unit_test_setup_teardown(test_chain_ensure, chain_setup, chain_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
