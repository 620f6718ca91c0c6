// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ctl.c: the control socket's framing, both ends. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "ctl.h"
#include "util.h"

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

int rw_ctl_listen(const char *path)
{
	char dir[PATH_MAX], *slash;
	struct sockaddr_un sa;
	int fd, err;

	err = fill_addr(&sa, path);
	if (err)
		return err;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) && errno != EEXIST)
			return -errno;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* A socket file left by a crashed agent: replace it only if nobody answers on it. */
	if (access(path, F_OK) == 0) {
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			close(fd);
			return -EADDRINUSE;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	/* Root only: the socket can change the policy of every sandbox on the node. */
	mode_t old = umask(0077);

	err = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (err || chmod(path, 0600) || listen(fd, 64)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int rw_ctl_parse_request(char *buf, size_t len, struct rw_ctl_request *req)
{
	char *nl = memchr(buf, '\n', len), *sp;

	if (!nl)
		return -EBADMSG;
	buf[len] = '\0';
	*nl = '\0';
	req->verb = buf;
	req->arg = NULL;
	sp = strchr(buf, ' ');
	if (sp) {
		*sp = '\0';
		req->arg = sp + 1;
	}
	req->body = nl + 1;
	req->body_len = len - (size_t)(nl + 1 - buf);
	return 0;
}

/* A decimal number and the one space after it, taken from the front of *s: 0 or -EINVAL. */
static int take_number(const char **s, unsigned long long *v)
{
	char *end;

	if (**s < '0' || **s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(*s, &end, 10);
	if (errno || *end != ' ')
		return -EINVAL;
	*s = end + 1;
	return 0;
}

int rw_ctl_parse_run_change(const char *arg, unsigned long long *base, unsigned long long *revision,
			    const char **name)
{
	if (!arg || take_number(&arg, base) || take_number(&arg, revision) || !*arg)
		return -EINVAL;
	*name = arg;
	return 0;
}

/* Write all of p, waiting for room at most until the deadline (rw_now_ms(); 0: 2 s per wait). */
static int write_all(int fd, const char *p, size_t len, double deadline)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			double left = deadline ? deadline - rw_now_ms() : 2000;

			if (left <= 0 || poll(&pfd, 1, (int)left + 1) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		if (n < 0)
			return -errno;
		p += n;
		len -= n;
	}
	return 0;
}

int rw_ctl_reply(int fd, json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT);
	int err;

	if (!s)
		return -ENOMEM;
	err = write_all(fd, s, strlen(s), 0);
	if (!err)
		err = write_all(fd, "\n", 1, 0);
	free(s);
	return err;
}

bool rw_ctl_no_agent(int err)
{
	return err == -ENOENT || err == -ECONNREFUSED || err == -ENOTDIR || err == -ENOTSOCK;
}

static int send_request(const char *path, const char *verb, const char *arg, const void *body,
			size_t body_len, double deadline)
{
	struct sockaddr_un sa;
	char line[PATH_MAX + 64];
	int fd, err;

	err = fill_addr(&sa, path);
	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* A Unix socket connects at once or says EAGAIN when the agent's backlog is full (it is
	 * not accepting): retry until the deadline.
	 */
	while (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		if (err != -EAGAIN || rw_now_ms() >= deadline) {
			close(fd);
			return err == -EAGAIN ? -ETIMEDOUT : err;
		}
		usleep(10000);
	}
	snprintf(line, sizeof(line), "%s%s%s\n", verb, arg ? " " : "", arg ? arg : "");
	err = write_all(fd, line, strlen(line), deadline);
	if (!err && body_len)
		err = write_all(fd, body, body_len, deadline);
	if (err) {
		close(fd);
		return err;
	}
	shutdown(fd, SHUT_WR);
	return fd;
}

int rw_ctl_send(const char *path, const char *verb, const char *arg, const void *body,
		size_t body_len, int timeout_ms)
{
	int fd = send_request(path, verb, arg, body, body_len, rw_now_ms() + timeout_ms);

	if (fd >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

int rw_ctl_call(const char *path, const char *verb, const char *arg, const void *body,
		size_t body_len, int timeout_ms, json_t **reply)
{
	double deadline = rw_now_ms() + timeout_ms;
	size_t len = 0, cap = 0;
	char *buf = NULL, *nl;
	json_error_t jerr;
	int fd, err = 0;

	*reply = NULL;
	fd = send_request(path, verb, arg, body, body_len, deadline);
	if (fd < 0)
		return fd;
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		double left = deadline - rw_now_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left + 1) == 0) {
			err = -ETIMEDOUT;
			goto out;
		}
		if (len + 4096 > cap) {
			char *grown;

			if (cap >= RW_CTL_MAX_BODY) {
				err = -E2BIG;
				goto out;
			}
			grown = realloc(buf, cap = cap ? cap * 2 : 16384);
			if (!grown) {
				err = -ENOMEM;
				goto out;
			}
			buf = grown;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0) {
			err = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += n;
		if (memchr(buf + len - n, '\n', n))
			break;
	}
	if (!buf) {
		err = -EBADMSG;
		goto out;
	}
	buf[len] = '\0';
	nl = strchr(buf, '\n');
	*reply = json_loadb(buf, nl ? (size_t)(nl - buf) : len, 0, &jerr);
	if (!*reply || !json_is_object(*reply)) {
		json_decref(*reply);
		*reply = NULL;
		err = -EBADMSG;
	}
out:
	free(buf);
	close(fd);
	return err;
}
