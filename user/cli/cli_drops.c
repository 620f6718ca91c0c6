// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_drops.c: `runwall drops`: follow the agent's stream of verdict events, filtered here.
 * One aligned line per event for people, the agent's JSON object line with -j (flushed at once:
 * other programs read it through a pipe).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_text.h"
#include "rulename.h"
#include "cli_event_filter.h"
#include "cli_pins.h"
#include "commands.h"
#include "ctl.h"
#include "eventfmt.h"
#include "util.h"

static const char drops_usage[] = "drops [--all] [--run ID] [--pod IP] [--reason REASON] "
				  "[--dst IP[:PORT]] [--count N] [--timeout SEC]";
static const char drops_options[] =
	"  --all             allowed new flows too, not only drops\n"
	"  --run ID          only this run's events\n"
	"  --pod IP          only events of this pod (either side) or of its veth; IPv4 "
	"or IPv6\n"
	"  --reason REASON   only this reason (\"allowed\": allowed flows)\n"
	"  --dst IP[:PORT]   only this destination; an IPv6 one with a port in brackets, "
	"[2001:db8::1]:443\n"
	"  --count N         exit 0 after N matching events\n"
	"  --timeout SEC     stop after SEC seconds (exit 1 if --count was not reached)\n";

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

/* The pod's veth, so that its events with another source address (spoofed, malformed) match
 * --pod too. Only when the maps are pinned where we look; never required.
 */
static void find_pod_veth(struct rw_cli_filter *f)
{
	struct rw_datapath dp;
	char err[256];

	if (rw_datapath_pinned_layout(rw_g.bpffs) != RW_LAYOUT_VERSION)
		return;
	if (rw_cli_open(&dp, rw_g.bpffs, err, sizeof(err)))
		return;
	rw_cli_pod_ifindex_of(&dp, &f->pod, &f->pod_ifindex);
	rw_datapath_close(&dp);
}

struct follow {
	const struct rw_cli_filter *f;
	unsigned long long count; /* 0: no limit */
	unsigned long long seen;
	int64_t mono_to_real;
	bool header_done;
};

#define FOLLOW_DONE (-1) /* on_line(): --count reached, or nobody reads any more */

/* One line of the stream. Returns 0 to go on, FOLLOW_DONE, or the exit code after reporting the
 * agent's error.
 */
static int on_line(struct follow *fl, char *line)
{
	json_error_t jerr;
	struct rw_event ev;
	char rule[RW_RULE_NAME_LEN], text[512], sender[128] = "", staged[200] = "";
	json_t *o, *st;

	if (!*line)
		return 0;
	o = json_loads(line, 0, &jerr);
	if (!o)
		return 0;
	if (json_is_false(json_object_get(o, "ok"))) {
		rw_fail(RW_EXIT_REFUSED, "agent: %s",
			json_string_value(json_object_get(o, "error")) ?: "refused the stream");
		json_decref(o);
		return RW_EXIT_REFUSED;
	}
	if (rw_event_from_json(o, &ev, rule, sizeof(rule)) || !rw_cli_filter_match(fl->f, &ev)) {
		json_decref(o);
		return 0;
	}
	/* Who in the pod sent it, where the datapath read it: for a wrong-principal refusal. */
	if (ev.reason == RW_REASON_WRONG_PRINCIPAL)
		rw_event_principal(&ev, json_string_value(json_object_get(o, "container")), sender,
				   sizeof(sender));
	/* The staged snapshot's verdict, where it differs from the kernel's. */
	st = json_object_get(o, "staged");
	if (json_is_object(st)) {
		const char *sr = json_string_value(json_object_get(st, "rule")) ?: "";

		if (!strcmp(json_string_value(json_object_get(st, "verdict")) ?: "", "allow"))
			snprintf(staged, sizeof(staged), "  STAGED r%lld: allowed%s%s",
				 rw_cli_jint(st, "revision"), *sr ? " by " : "", sr);
		else
			snprintf(staged, sizeof(staged), "  STAGED r%lld: refused (%s)",
				 rw_cli_jint(st, "revision"),
				 json_string_value(json_object_get(st, "reason")) ?: "");
	}
	json_decref(o);
	if (rw_g.json) {
		printf("%s\n", line);
	} else {
		rw_event_line(&ev, rule, fl->mono_to_real, text, sizeof(text));
		printf("%s%s%s%s\n", text, sender[0] ? "  sent by " : "", sender, staged);
	}
	/* Whoever reads through the pipe went away (`| head -3`): done. */
	if (fflush(stdout) == EOF || ferror(stdout))
		return FOLLOW_DONE;
	fl->seen++;
	return fl->count && fl->seen >= fl->count ? FOLLOW_DONE : 0;
}

static int reason_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	struct rw_cli_filter *f = o->data;
	char err[512];

	f->reason = rw_cli_reason_lookup(val, err, sizeof(err));
	return f->reason < 0 ? rw_fail(RW_EXIT_USAGE, "drops --reason: %s", err) : 0;
}

static int dst_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	struct rw_cli_filter *f = o->data;

	if (rw_ip_port_parse(val, &f->dst, &f->dport))
		return rw_fail(RW_EXIT_USAGE, "drops --dst: '%s' is not IP, IP:PORT or [IPv6]:PORT",
			       val);
	return 0;
}

static int count_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	unsigned long long *count = o->data;

	if (rw_parse_uint(val, 1ULL << 40, count) || !*count)
		return rw_fail(RW_EXIT_USAGE,
			       "drops --count: '%s' is not a number of events (1 or more)", val);
	return 0;
}

static int timeout_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	double *timeout = o->data;
	char *end;

	*timeout = strtod(val, &end);
	if (end == val || *end || !(*timeout > 0) || *timeout > 86400 * 365)
		return rw_fail(RW_EXIT_USAGE, "drops --timeout: '%s' is not a number of seconds",
			       val);
	return 0;
}

/* `runwall drops`'s options into the filter and the follow's count and timeout. Returns -1 to go
 * on, else the exit code (--help, or a usage error already reported).
 */
static int parse(int argc, char **argv, struct rw_cli_filter *f, unsigned long long *count,
		 double *timeout)
{
	const struct rw_cmd_opt opts[] = {
		{"all", 'a', .flag = &f->all},
		{"run", 'r', .str = &f->run},
		{"pod", 'p', .flag = &f->has_pod, .set = rw_cmd_ip_arg, .data = &f->pod},
		{"reason", 'R', .set = reason_arg, .data = f},
		{"dst", 'd', .flag = &f->has_dst, .set = dst_arg, .data = f},
		{"count", 'n', .set = count_arg, .data = count},
		{"timeout", 't', .set = timeout_arg, .data = timeout},
		{"json", 'j', .flag = &rw_g.json},
		{}};
	int ret = rw_cmd_options(&rw_cmd_drops, argc, argv, opts);

	if (ret < 0 && optind < argc)
		return rw_cmd_usage_error(&rw_cmd_drops, "unexpected '%s'", argv[optind]);
	return ret;
}

/* Read the agent's event stream on fd into lines for on_line() until the count is reached, the
 * deadline (0: none) passes, a signal stops it, or the stream fails. Returns the exit code.
 */
static int drops_follow(int fd, struct follow *fl, long long deadline, double timeout)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	int ret = RW_EXIT_OK;

	if (!buf)
		return rw_fail(RW_EXIT_REFUSED, "out of memory");
	while (!stop) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int wait = -1, r;
		ssize_t n;
		char *nl, *line;

		if (deadline) {
			long long left = deadline - rw_now_ms();

			if (left <= 0)
				break;
			wait = left > 1000000 ? 1000000 : (int)left;
		}
		r = poll(&pfd, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = rw_fail(RW_EXIT_REFUSED, "poll: %s", strerror(errno));
			goto cleanup;
		}
		if (r == 0)
			continue;
		if (len == cap) {
			/* A line longer than the buffer is not an event: drop it. */
			len = 0;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = rw_fail(RW_EXIT_REFUSED, "reading the event stream: %s",
				      strerror(errno));
			goto cleanup;
		}
		if (n == 0) {
			if (fl->count)
				ret = rw_fail(RW_EXIT_REFUSED,
					      "the agent closed the event stream "
					      "after %llu of %llu events",
					      fl->seen, fl->count);
			else
				ret = rw_fail(RW_EXIT_REFUSED, "the agent closed the event stream");
			goto cleanup;
		}
		len += n;
		buf[len] = '\0';
		line = buf;
		while ((nl = strchr(line, '\n'))) {
			*nl = '\0';
			r = on_line(fl, line);
			line = nl + 1;
			if (r) {
				ret = r == FOLLOW_DONE ? RW_EXIT_OK : r;
				goto cleanup;
			}
		}
		len -= line - buf;
		memmove(buf, line, len);
	}
	if (!stop && fl->count)
		ret = rw_fail(RW_EXIT_REFUSED, "%llu of %llu matching events in %g s", fl->seen,
			      fl->count, timeout);
cleanup:
	free(buf);
	return ret;
}

static int cmd_drops(int argc, char **argv)
{
	struct rw_cli_filter f;
	struct follow fl = {.f = &f};
	struct sigaction sa = {.sa_handler = on_signal};
	long long deadline = 0;
	double timeout = 0;
	int fd, ret;

	rw_cli_filter_init(&f);
	ret = parse(argc, argv, &f, &fl.count, &timeout);
	if (ret >= 0)
		return ret;
	fl.f = &f;
	if (f.has_pod)
		find_pod_veth(&f);

	fd = rw_ctl_send(rw_g.socket, "events", NULL, NULL, 0, RW_CTL_TIMEOUT_MS);
	if (fd < 0)
		return rw_fail(RW_EXIT_USAGE,
			       "no agent on %s (%s): drops follows the agent's event stream; "
			       "start `runwall agent` or pass --socket",
			       rw_g.socket, strerror(-fd));
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	fl.mono_to_real = rw_mono_to_real_offset();
	if (timeout > 0)
		deadline = rw_now_ms() + (long long)(timeout * 1000 + 0.999);
	if (!rw_g.json) {
		char head[256];

		rw_cli_event_header(head, sizeof(head));
		printf("%s\n", head);
		fflush(stdout);
	}
	ret = drops_follow(fd, &fl, deadline, timeout);
	close(fd);
	return ret;
}

RW_COMMAND(drops, .summary = "follow live verdicts (needs the agent)", .grammar = drops_usage,
	   .options = drops_options);
