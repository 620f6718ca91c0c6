// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_cni.c: runwall-cni's pure parts (user/cni): rw_cni_parse() on network configurations
 * and prevResults as runtimes send them (what it takes, the code and message of each refusal),
 * and rw_cni_conflist_edit() (install and uninstall of the conflist entry, idempotent).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

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
	static const struct {
		const char *prev, *msg;
	} cases[] = {
		{"{}", "prevResult.interfaces: missing or not an array"},
		{"{\"interfaces\":[{\"name\":\"eth0\",\"sandbox\":\"/x\"}],\"ips\":[]}",
		 "prevResult.interfaces: no host-side interface (one without \"sandbox\")"},
		{"{\"interfaces\":[{\"name\":\"veth0\"}]}",
		 "prevResult.ips: missing or not an array"},
		{"{\"interfaces\":[{\"name\":\"veth0\"}],\"ips\":[{\"address\":\"fd00::1/64\"}]}",
		 "prevResult.ips: no IPv4 address"},
		{"{\"interfaces\":[{\"name\":\"a/b\"}],\"ips\":[]}",
		 "prevResult.interfaces[0].name: not an interface name"},
		{"{\"interfaces\":[{\"name\":\"0123456789abcdef\"}],\"ips\":[]}",
		 "prevResult.interfaces[0].name: not an interface name"},
		{"{\"interfaces\":[7],\"ips\":[]}",
		 "prevResult.interfaces[0]: not an object with a name"},
		{"{\"interfaces\":[{\"name\":\"v\"}],\"ips\":[{\"address\":5}]}",
		 "prevResult.ips[0].address: missing or not a string"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rw_cni_req req;
		char doc[512], err[256] = "";

		snprintf(doc, sizeof(doc),
			 "{\"cniVersion\":\"1.0.0\",\"type\":\"runwall-cni\","
			 "\"prevResult\":%s}",
			 cases[i].prev);
		assert_int_equal(parse(doc, &req, err), 0);
		assert_false(req.prev_complete);
		assert_string_equal(req.prev_error, cases[i].msg);
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

static void test_conflist_install_idempotent(void **state)
{
	json_t *d = doc("{\"name\":\"aws-cni\",\"plugins\":[{\"type\":\"aws-cni\"},"
			"{\"type\":\"portmap\"}]}");
	json_t *e = doc("{\"type\":\"runwall-cni\",\"ifPrefix\":\"eni\"}");
	json_t *want =
		doc("{\"name\":\"aws-cni\",\"plugins\":[{\"type\":\"aws-cni\"},"
		    "{\"type\":\"portmap\"},{\"type\":\"runwall-cni\",\"ifPrefix\":\"eni\"}]}");
	char err[128];
	bool changed;

	assert_int_equal(rw_cni_conflist_edit(d, e, &changed, err, sizeof(err)), 0);
	assert_true(changed);
	assert_true(json_equal(d, want));
	assert_int_equal(rw_cni_conflist_edit(d, e, &changed, err, sizeof(err)), 0);
	assert_false(changed);
	assert_true(json_equal(d, want));
	json_decref(d);
	json_decref(e);
	json_decref(want);
}

static void test_conflist_replace_in_place_and_dedupe(void **state)
{
	json_t *d = doc("{\"plugins\":[{\"type\":\"aws-cni\"},{\"type\":\"runwall-cni\"},"
			"{\"type\":\"portmap\"},{\"type\":\"runwall-cni\",\"bpffs\":\"/x\"}]}");
	json_t *e = doc("{\"type\":\"runwall-cni\",\"bpffs\":\"/y\"}");
	json_t *want = doc("{\"plugins\":[{\"type\":\"aws-cni\"},{\"type\":\"runwall-cni\","
			   "\"bpffs\":\"/y\"},{\"type\":\"portmap\"}]}");
	char err[128];
	bool changed;

	assert_int_equal(rw_cni_conflist_edit(d, e, &changed, err, sizeof(err)), 0);
	assert_true(changed);
	assert_true(json_equal(d, want));
	json_decref(d);
	json_decref(e);
	json_decref(want);
}

static void test_conflist_uninstall(void **state)
{
	json_t *d = doc("{\"plugins\":[{\"type\":\"runwall-cni\"},{\"type\":\"aws-cni\"},"
			"{\"type\":\"runwall-cni\"}]}");
	json_t *want = doc("{\"plugins\":[{\"type\":\"aws-cni\"}]}");
	char err[128];
	bool changed;

	assert_int_equal(rw_cni_conflist_edit(d, NULL, &changed, err, sizeof(err)), 0);
	assert_true(changed);
	assert_true(json_equal(d, want));
	assert_int_equal(rw_cni_conflist_edit(d, NULL, &changed, err, sizeof(err)), 0);
	assert_false(changed);
	json_decref(d);
	json_decref(want);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ptp_result),
		cmocka_unit_test(test_defaults_and_no_prev),
		cmocka_unit_test(test_vpc_cni_two_host_interfaces),
		cmocka_unit_test(test_incomplete_prev),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_conflist_install_idempotent),
		cmocka_unit_test(test_conflist_replace_in_place_and_dedupe),
		cmocka_unit_test(test_conflist_uninstall),
		cmocka_unit_test(test_conflist_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
