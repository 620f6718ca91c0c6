/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* util.h: the clocks, the file reader, the keyed hash, the error message, the signals' block
 * and a thread's stop every part of runwall shares.
 */
#ifndef RUNWALL_UTIL_H
#define RUNWALL_UTIL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit codes of every front end (docs/cli/README.md "Exit codes"). */
#define RW_EXIT_OK	0 /* done / found / applied */
#define RW_EXIT_REFUSED 1 /* refused, not found, not ready, a check failed */
#define RW_EXIT_USAGE	2 /* bad usage, or no agent where one is needed */

/* CLOCK_MONOTONIC in milliseconds, with fractions: for durations and deadlines. */
double rw_now_ms(void);

/* CLOCK_MONOTONIC in nanoseconds, bpf_ktime_get_ns()'s clock: for deadlines and ages. */
int64_t rw_now_mono_ns(void);

/* CLOCK_REALTIME in nanoseconds since the epoch: for "since" and "applied" times. */
int64_t rw_now_real_ns(void);

/* Read all of path ("-": standard input) into *out (NUL-terminated, free() it) and its length
 * into *len. Reads to EOF rather than trusting st_size (a pipe, a ConfigMap's symlink).
 * -EFBIG when it is longer than max bytes; -errno of open/read otherwise.
 */
int rw_read_file(const char *path, size_t max, char **out, size_t *len);

/* A bearer token from a file (a mounted Secret): one line of min_len to outlen - 1 printable
 * ASCII characters without spaces, trailing newline and blanks dropped. Errors name the flag and
 * the path: "FLAG PATH: No such file or directory", "FLAG PATH: expected one token of ...".
 */
int rw_read_token(const char *flag, const char *path, size_t min_len, char *out, size_t outlen,
		  char *err, size_t errlen);

/* A key for the hash tables whose keys a sandbox influences (the view's aggregates): a chain
 * can be built only by one who knows the key.
 */
struct rw_hash_key {
	uint64_t k0, k1;
};

/* The process's key: 128 bits from getrandom(2), taken once, on the first call (the agent
 * makes it at start). Should getrandom fail, the clocks and the pid: worse, never fixed.
 */
const struct rw_hash_key *rw_hash_key(void);

/* SipHash-2-4 of data under key. */
uint64_t rw_siphash(const struct rw_hash_key *key, const void *data, size_t len);

/* The library's way to fail: the sentence (printf-style) into err (errlen bytes; err may be NULL
 * when errlen is 0), and ret, the negative errno or code, returned: `return rw_fail_msg(err,
 * errlen, -ENOENT, "%s: no such file", path);`. The library never prints: callers do.
 */
int rw_fail_msg(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* SIGINT, SIGTERM and `also` blocked and in *mask, for sigtimedwait() or a signalfd (threads
 * started afterwards inherit the block); SIGPIPE ignored (a write to a closed socket is EPIPE).
 */
void rw_signals_block(sigset_t *mask, int also);

/* fn(arg) on a new thread with every signal blocked in it (a process that takes its signals
 * through a signalfd must never have one delivered there): 0 or pthread_create()'s error.
 */
int rw_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);

/* The stop of a thread that waits on cond under lock until *stop: *stop set under the lock,
 * cond broadcast, then the thread joined.
 */
void rw_thread_stop(pthread_t thread, pthread_mutex_t *lock, pthread_cond_t *cond, bool *stop);

/* fn(arg) on a thread of its own while the caller goes on, until rw_beside_join(); run at once,
 * here, when no thread can be made. For blocking calls whose waits can overlap: each write of a
 * map-in-map and each tcx attach waits for an RCU grace period.
 */
struct rw_beside {
	pthread_t thread;
	bool threaded;
};
void rw_beside_start(struct rw_beside *b, void *(*fn)(void *), void *arg);
void rw_beside_join(struct rw_beside *b);

#endif /* RUNWALL_UTIL_H */
