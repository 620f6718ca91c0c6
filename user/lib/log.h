/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* log.h: one line per event worth an operator's attention. The library formats the line and
 * hands it to the print callback a front end sets (as libbpf's libbpf_set_print()); with none
 * set, nothing is printed: the library itself never writes.
 */
#ifndef RUNWALL_LOG_H
#define RUNWALL_LOG_H

enum rw_log_level { RW_LOG_ERROR, RW_LOG_WARN, RW_LOG_INFO, RW_LOG_DEBUG, RW_LOG_TRACE };

extern int rw_log_verbosity; /* messages up to this level are printed; default RW_LOG_INFO */

/* A whole line: "2026-01-02T03:04:05.678Z warn MESSAGE\n". Called from any thread. */
typedef void (*rw_log_print_fn)(enum rw_log_level level, const char *line);

/* The line's format: text (above), or json: {"ts":"2026-01-02T03:04:05.678Z","level":"warn",
 * "msg":"MESSAGE"} and a newline (`runwall agent --log-format json`). Set before any thread logs.
 */
enum rw_log_format { RW_LOG_TEXT, RW_LOG_JSON };
void rw_log_set_format(enum rw_log_format format);

/* Sets the callback (NULL: print nothing) and returns the one it replaces. */
rw_log_print_fn rw_log_set_print(rw_log_print_fn fn);

void rw_log(enum rw_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Route libbpf's own messages through rw_log: warnings as warnings, info at -v, debug at -vv. */
void rw_log_setup_libbpf(void);

#define rw_err(...)   rw_log(RW_LOG_ERROR, __VA_ARGS__)
#define rw_warn(...)  rw_log(RW_LOG_WARN, __VA_ARGS__)
#define rw_info(...)  rw_log(RW_LOG_INFO, __VA_ARGS__)
#define rw_debug(...) rw_log(RW_LOG_DEBUG, __VA_ARGS__)

#endif /* RUNWALL_LOG_H */
