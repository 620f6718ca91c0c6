// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* util.c: the clocks and the file reader every part of runwall shares. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

double rw_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int64_t rw_now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int rw_read_file(const char *path, size_t max, char **out, size_t *len)
{
	bool is_stdin = !strcmp(path, "-");
	size_t n = 0, cap = 0;
	char *buf = NULL, *grown;
	int fd, err = 0;

	fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t got;

		if (n == cap) {
			/* One byte over the limit is enough to know it is too large. */
			if (cap > max) {
				err = -EFBIG;
				break;
			}
			cap = cap ? cap * 2 : 64 * 1024;
			if (cap > max + 1)
				cap = max + 1;
			grown = realloc(buf, cap + 1);
			if (!grown) {
				err = -ENOMEM;
				break;
			}
			buf = grown;
		}
		got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			err = -errno;
			break;
		}
		if (!got)
			break;
		n += got;
	}
	if (!is_stdin)
		close(fd);
	if (!err && !buf)
		buf = malloc(1);
	if (!err && !buf)
		err = -ENOMEM;
	if (err) {
		free(buf);
		return err;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}
