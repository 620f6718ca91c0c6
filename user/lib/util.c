// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* util.c: the clocks, the file reader, the keyed hash, the signals' block and a thread's stop
 * every part of runwall shares.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "util.h"

double rw_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int64_t rw_now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
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

int rw_read_token(const char *flag, const char *path, size_t min_len, char *out, size_t outlen,
		  char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	int ret = rw_read_file(path, outlen + 2, &buf, &len);

	if (ret) {
		snprintf(err, errlen, "%s %s: %s", flag, path,
			 ret == -EFBIG ? "longer than a token" : strerror(-ret));
		return ret;
	}
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
		len--;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] <= ' ' || (unsigned char)buf[i] > '~')
			ret = -EINVAL;
	if (ret || len < min_len || len >= outlen) {
		snprintf(err, errlen,
			 "%s %s: expected one token of %zu to %zu printable ASCII characters, "
			 "without spaces",
			 flag, path, min_len, outlen - 1);
		free(buf);
		return -EINVAL;
	}
	memcpy(out, buf, len);
	out[len] = '\0';
	free(buf);
	return 0;
}

/* ---- the keyed hash ---- */

static struct rw_hash_key hash_key;
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

static void hash_key_make(void)
{
	uint64_t k[2];
	ssize_t n = getrandom(k, sizeof(k), 0);

	if (n != (ssize_t)sizeof(k)) {
		struct timespec a, b;

		clock_gettime(CLOCK_REALTIME, &a);
		clock_gettime(CLOCK_MONOTONIC, &b);
		k[0] = (uint64_t)a.tv_sec * 1000000000ULL + (uint64_t)a.tv_nsec;
		k[1] = ((uint64_t)b.tv_sec * 1000000000ULL + (uint64_t)b.tv_nsec) ^
		       (uint64_t)getpid() << 32;
	}
	hash_key.k0 = k[0];
	hash_key.k1 = k[1];
}

const struct rw_hash_key *rw_hash_key(void)
{
	pthread_once(&hash_key_once, hash_key_make);
	return &hash_key;
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                   \
	do {                       \
		v0 += v1;          \
		v1 = ROTL(v1, 13); \
		v1 ^= v0;          \
		v0 = ROTL(v0, 32); \
		v2 += v3;          \
		v3 = ROTL(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = ROTL(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = ROTL(v1, 17); \
		v1 ^= v2;          \
		v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

uint64_t rw_siphash(const struct rw_hash_key *key, const void *data, size_t len)
{
	const unsigned char *p = data, *end = p + (len & ~(size_t)7);
	uint64_t v0 = 0x736f6d6570736575ULL ^ key->k0, v1 = 0x646f72616e646f6dULL ^ key->k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ key->k0, v3 = 0x7465646279746573ULL ^ key->k1;
	uint64_t m, b = (uint64_t)len << 56;

	for (; p != end; p += 8) {
		m = le64(p);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (int i = (int)(len & 7) - 1; i >= 0; i--)
		b |= (uint64_t)p[i] << (8 * i);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

int rw_fail_msg(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return ret;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

void rw_signals_block(sigset_t *mask, int also)
{
	sigemptyset(mask);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, also);
	sigprocmask(SIG_BLOCK, mask, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int rw_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

void rw_thread_stop(pthread_t thread, pthread_mutex_t *lock, pthread_cond_t *cond, bool *stop)
{
	pthread_mutex_lock(lock);
	*stop = true;
	pthread_cond_broadcast(cond);
	pthread_mutex_unlock(lock);
	pthread_join(thread, NULL);
}

void rw_beside_start(struct rw_beside *b, void *(*fn)(void *), void *arg)
{
	b->threaded = pthread_create(&b->thread, NULL, fn, arg) == 0;
	if (!b->threaded)
		fn(arg);
}

void rw_beside_join(struct rw_beside *b)
{
	if (b->threaded)
		pthread_join(b->thread, NULL);
	b->threaded = false;
}
