// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_pw_msg.c: libFuzzer target for PolicyWatch's wire format (user/agent/pw_msg.c).
 * The input is what a server sends on the stream: it goes into the framer in pieces whose sizes
 * the input's first byte chooses (a line may span any number of writes), with a line limit small
 * enough to be reached; every complete line goes to the message parser, the way the agent's loop
 * takes it. Checked: a line never exceeds the limit, a parsed message is consistent (revisions
 * in range, a run id where one is needed), a refusal always says why, and the path reader never
 * runs past the text it reads. (A change's revision not above its base is a message all the
 * same: the agent's loop refuses that change.)
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pw_msg.h"

#define LIMIT 2048

static int on_line(void *ctx, const char *line, size_t len)
{
	struct rw_pw_msg m;
	char err[300], path[64];
	const char *msg;

	if (len == 0 || len > LIMIT || memchr(line, '\n', len))
		abort();
	if (rw_pw_msg_parse(line, len, &m, err, sizeof(err))) {
		if (!err[0] || m.root)
			abort();
		/* The policy parser's form is "SOURCE:[L:C:] PATH: message"; any text must do. */
		if (rw_pw_error_path(err, path, sizeof(path), &msg) &&
		    (msg < err || msg > err + strlen(err)))
			abort();
		return 0;
	}
	switch (m.type) {
	case RW_WATCH_SNAPSHOT:
		if (!json_is_object(m.body))
			abort();
		break;
	case RW_WATCH_RUN_UPSERT:
	case RW_WATCH_RUN_DELETE:
		if (!m.revision || m.revision >= 1ULL << 56 || m.base >= 1ULL << 56)
			abort();
		if (m.type == RW_WATCH_RUN_DELETE && !m.id[0])
			abort();
		if (m.type == RW_WATCH_RUN_UPSERT && !json_is_object(m.body))
			abort();
		break;
	case RW_WATCH_HEARTBEAT:
		break;
	default:
		abort();
	}
	rw_pw_msg_free(&m);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rw_pw_framer f = {.max = LIMIT};
	size_t piece, off = 1;
	int ret = 0;

	if (!size)
		return 0;
	piece = data[0] % 64 + 1;
	while (off < size && !ret) {
		size_t n = size - off < piece ? size - off : piece;

		ret = rw_pw_feed(&f, (const char *)data + off, n, on_line, NULL);
		off += n;
	}
	if (ret && ret != -EMSGSIZE)
		abort();
	if (rw_pw_pending(&f) > LIMIT)
		abort();
	rw_pw_framer_free(&f);
	return 0;
}
