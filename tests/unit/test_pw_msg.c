// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_pw_msg.c: PolicyWatch's wire format (user/agent/pw_msg.c): the framer cuts a stream
 * written in any pieces into the same lines, refuses a line over its limit before buffering it
 * all, and leaves a line without its newline pending (a truncated message); the envelope parser
 * takes the six types (staged with a snapshot or a run, one of them) and refuses everything else with the key it is about; the path reader
 * finds the JSON path in the policy parser's errors.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pw_msg.h"

struct lines {
	char got[8][128];
	int n;
};

static int collect(void *ctx, const char *line, size_t len)
{
	struct lines *l = ctx;

	assert_true(l->n < 8 && len < 128);
	memcpy(l->got[l->n], line, len);
	l->got[l->n++][len] = '\0';
	return 0;
}

static void test_framer_pieces(void **state)
{
	static const char stream[] = "{\"type\":\"heartbeat\"}\n\n{\"a\":1}\r\n{\"b\"";

	/* Every piece size gives the same lines: blank ones skipped, CRLF taken as a newline. */
	for (size_t piece = 1; piece <= sizeof(stream); piece++) {
		struct rw_pw_framer f = {.max = 64};
		struct lines l = {};

		for (size_t off = 0; off < sizeof(stream) - 1; off += piece) {
			size_t n =
				sizeof(stream) - 1 - off < piece ? sizeof(stream) - 1 - off : piece;

			assert_int_equal(rw_pw_feed(&f, stream + off, n, collect, &l), 0);
		}
		assert_int_equal(l.n, 2);
		assert_string_equal(l.got[0], "{\"type\":\"heartbeat\"}");
		assert_string_equal(l.got[1], "{\"a\":1}");
		assert_int_equal(rw_pw_pending(&f), 4); /* {"b" : cut short */
		rw_pw_framer_free(&f);
	}
}

static void test_framer_limit(void **state)
{
	struct rw_pw_framer f = {.max = 16};
	struct lines l = {};
	char big[40];

	memset(big, 'x', sizeof(big));
	/* Exactly the limit passes; one byte more is refused, in one write or over many. */
	assert_int_equal(rw_pw_feed(&f, big, 16, collect, &l), 0);
	assert_int_equal(rw_pw_feed(&f, "\n", 1, collect, &l), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(rw_pw_feed(&f, big, sizeof(big), collect, &l), -EMSGSIZE);
	rw_pw_framer_reset(&f);
	for (int i = 0; i < 16; i++)
		assert_int_equal(rw_pw_feed(&f, "y", 1, collect, &l), 0);
	assert_int_equal(rw_pw_feed(&f, "y", 1, collect, &l), -EMSGSIZE);
	assert_true(f.cap <= 16);
	rw_pw_framer_free(&f);
}

static void parse_ok(const char *text, enum rw_pw_type type, uint64_t revision, uint64_t base,
		     const char *id)
{
	struct rw_pw_msg m;
	char err[200] = "";

	if (rw_pw_msg_parse(text, strlen(text), &m, err, sizeof(err)))
		fail_msg("%s: refused: %s", text, err);
	assert_int_equal(m.type, type);
	assert_int_equal(m.revision, revision);
	assert_int_equal(m.base, base);
	assert_string_equal(m.id, id);
	rw_pw_msg_free(&m);
}

static void parse_refused(const char *text, const char *want)
{
	struct rw_pw_msg m;
	char err[200] = "";

	if (!rw_pw_msg_parse(text, strlen(text), &m, err, sizeof(err)))
		fail_msg("%s: taken", text);
	if (strncmp(err, want, strlen(want)))
		fail_msg("%s: error '%s', expected it to start with '%s'", text, err, want);
	assert_null(m.root);
}

static void test_parse(void **state)
{
	parse_ok("{\"type\":\"heartbeat\"}", RW_WATCH_HEARTBEAT, 0, 0, "");
	parse_ok("{\"type\":\"snapshot\",\"snapshot\":{\"revision\":3}}", RW_WATCH_SNAPSHOT, 0, 0,
		 "");
	parse_ok("{\"type\":\"run-upsert\",\"revision\":5,\"base\":4,\"run\":{\"id\":\"run-a\"}}",
		 RW_WATCH_RUN_UPSERT, 5, 4, "run-a");
	parse_ok("{\"type\":\"run-delete\",\"revision\":2,\"base\":0,\"id\":\"run-b\"}",
		 RW_WATCH_RUN_DELETE, 2, 0, "run-b");
	/* Not above its base: a message all the same, whose change the agent refuses at
	 * "revision" with the stream kept (docs/policy-watch.md, Errors).
	 */
	parse_ok("{\"type\":\"run-upsert\",\"revision\":5,\"base\":5,\"run\":{\"id\":\"r\"}}",
		 RW_WATCH_RUN_UPSERT, 5, 5, "r");
	parse_ok("{\"type\":\"run-delete\",\"revision\":3,\"base\":7,\"id\":\"r\"}",
		 RW_WATCH_RUN_DELETE, 3, 7, "r");

	parse_refused("{\"type\":", "(message)");
	parse_refused("[1]", "(message)");
	parse_refused("{\"type\":\"heartbeat\",\"type\":\"heartbeat\"}", "(message)");
	parse_refused("{}", "type:");
	parse_refused("{\"type\":\"patch\"}", "type:");
	parse_refused("{\"type\":\"heartbeat\",\"time\":1}", "time:");
	parse_refused("{\"type\":\"snapshot\",\"snapshot\":[]}", "snapshot:");
	parse_refused("{\"type\":\"run-upsert\",\"revision\":5,\"run\":{}}", "base:");
	parse_refused("{\"type\":\"run-upsert\",\"revision\":0,\"base\":0,\"run\":{}}",
		      "revision:");
	parse_refused("{\"type\":\"run-upsert\",\"revision\":72057594037927936,\"base\":1,"
		      "\"run\":{}}",
		      "revision:");
	parse_refused("{\"type\":\"run-upsert\",\"revision\":5,\"base\":-1,\"run\":{}}", "base:");
	parse_refused("{\"type\":\"run-upsert\",\"revision\":5,\"base\":4,\"run\":[]}", "run:");
	parse_refused("{\"type\":\"run-delete\",\"revision\":5,\"base\":4,\"id\":\"a b\"}", "id:");
	parse_refused("{\"type\":\"run-delete\",\"revision\":5,\"base\":4,\"id\":\"\"}", "id:");
}

/* staged: a snapshot or a run (one of them), never a revision or base of its own; unstage:
 * nothing else.
 */
static void test_parse_staged(void **state)
{
	struct rw_pw_msg m;
	char err[200] = "";
	const char *snap = "{\"type\":\"staged\",\"snapshot\":{\"revision\":9}}";
	const char *run = "{\"type\":\"staged\",\"run\":{\"id\":\"run-a\"}}";

	assert_int_equal(rw_pw_msg_parse(snap, strlen(snap), &m, err, sizeof(err)), 0);
	assert_int_equal(m.type, RW_WATCH_STAGED);
	assert_false(m.run_staged);
	assert_int_equal(json_integer_value(json_object_get(m.body, "revision")), 9);
	rw_pw_msg_free(&m);
	assert_int_equal(rw_pw_msg_parse(run, strlen(run), &m, err, sizeof(err)), 0);
	assert_true(m.run_staged);
	assert_string_equal(m.id, "run-a");
	assert_string_equal(json_string_value(json_object_get(m.body, "id")), "run-a");
	rw_pw_msg_free(&m);
	parse_ok("{\"type\":\"unstage\"}", RW_WATCH_UNSTAGE, 0, 0, "");

	parse_refused("{\"type\":\"staged\"}", "snapshot:");
	parse_refused("{\"type\":\"staged\",\"snapshot\":{},\"run\":{}}", "snapshot:");
	parse_refused("{\"type\":\"staged\",\"snapshot\":[]}", "snapshot:");
	parse_refused("{\"type\":\"staged\",\"run\":\"run-a\"}", "run:");
	parse_refused("{\"type\":\"staged\",\"revision\":3,\"snapshot\":{}}", "revision:");
	parse_refused("{\"type\":\"staged\",\"id\":\"r\",\"run\":{}}", "id:");
	parse_refused("{\"type\":\"unstage\",\"snapshot\":{}}", "snapshot:");
}

static void test_error_path(void **state)
{
	char path[64];
	const char *msg;

	assert_true(rw_pw_error_path("policy-watch:1:42: runs[2].pods[0]: \"x\" is not an IPv4 "
				     "address",
				     path, sizeof(path), &msg));
	assert_string_equal(path, "runs[2].pods[0]");
	assert_string_equal(msg, "\"x\" is not an IPv4 address");
	assert_true(rw_pw_error_path("policy-watch: revision: 3 is not above 3", path, sizeof(path),
				     &msg));
	assert_string_equal(path, "revision");
	assert_false(rw_pw_error_path("policy-watch: out of memory", path, sizeof(path), &msg));
	assert_false(rw_pw_error_path("no colon at all", path, sizeof(path), &msg));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_framer_pieces), cmocka_unit_test(test_framer_limit),
		cmocka_unit_test(test_parse),	      cmocka_unit_test(test_parse_staged),
		cmocka_unit_test(test_error_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
