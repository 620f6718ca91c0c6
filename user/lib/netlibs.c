// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* netlibs.c: libcurl and libmicrohttpd, loaded at their first call.
 *
 * Linked the usual way, the two libraries and the thirty they need (GnuTLS, nettle, nghttp2,
 * Kerberos, LDAP, SASL, ...) are mapped and relocated by the dynamic loader before main() of
 * every runwall process: about 15 ms of each command's start on this machine (a program linked
 * with them starts in 20 ms at the median, without them in 5), though only the agent (PolicyWatch,
 * access requests, the page) and `runwall view` call them. `runwall apply` paid it on the way
 * from the command to the first packet under the new policy.
 *
 * So the functions runwall calls are defined here, each with the library's own prototype (the
 * headers' declarations make the compiler check it): its first call opens the library
 * (dlopen(), once per library, pthread_once()) and finds the library's function (dlsym()); every
 * call then goes straight on to it. A library that cannot be opened, or a function it lacks, is
 * logged once, with dlerror()'s text, and each function answers as that library answers a
 * failure of its own: NULL from curl_easy_init(), curl_url(), curl_slist_append(),
 * MHD_start_daemon() and the MHD lookups, CURLE_FAILED_INIT or MHD_NO from the others. The
 * functions that take a handle are only reached with one that the library made, so the library
 * is open by then (tests/unit/test_netlibs.c: a library without the names runwall calls).
 *
 * The variadic ones are forwarded by what their argument is: curl_easy_setopt()'s one argument
 * by the option's type (CURLOPTTYPE_*: a long, a pointer, a function pointer or a curl_off_t),
 * curl_easy_getinfo()'s always a pointer, MHD_start_daemon()'s option list through its va_list
 * twin, MHD_set_connection_option()'s timeout an unsigned int (its one option), and the MHD info
 * queries with none (libmicrohttpd reads none for any info type).
 */
#define CURL_DISABLE_TYPECHECK /* curl_easy_setopt() is defined here, not checked as a macro */
#include <curl/curl.h>
#include <dlfcn.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>

#include "log.h"

enum { LIB_CURL, LIB_MHD, LIB_COUNT };

static const char *const lib_names[LIB_COUNT] = {"libcurl.so.4", "libmicrohttpd.so.12"};
static void *lib_handle[LIB_COUNT];
static pthread_once_t lib_once[LIB_COUNT] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};

static void lib_open(int lib)
{
	lib_handle[lib] = dlopen(lib_names[lib], RTLD_NOW | RTLD_LOCAL);
	if (!lib_handle[lib])
		rw_err("%s", dlerror());
}

static void open_curl(void)
{
	lib_open(LIB_CURL);
}

static void open_mhd(void)
{
	lib_open(LIB_MHD);
}

/* The library's own `name`, or NULL when the library (or the name in it) is missing. */
static void *lib_sym(int lib, const char *name)
{
	void *sym;

	pthread_once(&lib_once[lib], lib == LIB_CURL ? open_curl : open_mhd);
	if (!lib_handle[lib])
		return NULL;
	sym = dlsym(lib_handle[lib], name);
	if (!sym)
		rw_err("%s: %s", lib_names[lib], dlerror());
	return sym;
}

/* fn, the library's `name` of the type of fn, looked for at the first call only: a name the
 * library lacks is logged then, and every later call answers the failure without looking (and
 * logging) again. The pointer and the flag are written and read whole (atomics), so two threads'
 * first calls find the same function.
 */
#define RESOLVE(lib, fn, name)                                                    \
	do {                                                                      \
		static int looked_;                                               \
		if (!__atomic_load_n(&looked_, __ATOMIC_ACQUIRE)) {               \
			void *sym_ = lib_sym(lib, name);                          \
			__atomic_store_n((void **)&(fn), sym_, __ATOMIC_RELEASE); \
			__atomic_store_n(&looked_, 1, __ATOMIC_RELEASE);          \
		}                                                                 \
	} while (0)

/* A function of the library with no variadic part: NAME(PARAMS) calls the library's NAME(ARGS),
 * or answers FAIL when the library is missing.
 */
#define FORWARD(lib, ret, name, params, args, fail) \
	ret name params                             \
	{                                           \
		static ret(*fn) params;             \
		RESOLVE(lib, fn, #name);            \
		if (!fn)                            \
			return fail;                \
		return fn args;                     \
	}
#define FORWARD_VOID(lib, name, params, args) \
	void name params                      \
	{                                     \
		static void(*fn) params;      \
		RESOLVE(lib, fn, #name);      \
		if (fn)                       \
			fn args;              \
	}

/* ---- libcurl ------------------------------------------------------------------------------- */

FORWARD(LIB_CURL, CURLcode, curl_global_init, (long flags), (flags), CURLE_FAILED_INIT)
FORWARD(LIB_CURL, CURL *, curl_easy_init, (void), (), NULL)
FORWARD(LIB_CURL, CURLcode, curl_easy_perform, (CURL * c), (c), CURLE_FAILED_INIT)
FORWARD_VOID(LIB_CURL, curl_easy_cleanup, (CURL * c), (c))
FORWARD_VOID(LIB_CURL, curl_easy_reset, (CURL * c), (c))
FORWARD(LIB_CURL, const char *, curl_easy_strerror, (CURLcode code), (code),
	"libcurl is not loaded")
FORWARD(LIB_CURL, char *, curl_easy_escape, (CURL * c, const char *s, int len), (c, s, len), NULL)
FORWARD_VOID(LIB_CURL, curl_free, (void *p), (p))
FORWARD(LIB_CURL, struct curl_slist *, curl_slist_append, (struct curl_slist * list, const char *s),
	(list, s), NULL)
FORWARD_VOID(LIB_CURL, curl_slist_free_all, (struct curl_slist * list), (list))
FORWARD(LIB_CURL, CURLU *, curl_url, (void), (), NULL)
FORWARD_VOID(LIB_CURL, curl_url_cleanup, (CURLU * u), (u))
FORWARD(LIB_CURL, CURLUcode, curl_url_set,
	(CURLU * u, CURLUPart what, const char *part, unsigned int flags), (u, what, part, flags),
	CURLUE_OUT_OF_MEMORY)
FORWARD(LIB_CURL, CURLUcode, curl_url_get,
	(CURLU * u, CURLUPart what, char **part, unsigned int flags), (u, what, part, flags),
	CURLUE_OUT_OF_MEMORY)

CURLcode curl_easy_setopt(CURL *c, CURLoption option, ...)
{
	static CURLcode (*fn)(CURL *, CURLoption, ...);
	CURLcode rc;
	va_list ap;

	RESOLVE(LIB_CURL, fn, "curl_easy_setopt");
	if (!fn)
		return CURLE_FAILED_INIT;
	va_start(ap, option);
	if (option < CURLOPTTYPE_OBJECTPOINT)
		rc = fn(c, option, va_arg(ap, long));
	else if (option < CURLOPTTYPE_FUNCTIONPOINT)
		rc = fn(c, option, va_arg(ap, void *));
	else if (option < CURLOPTTYPE_OFF_T)
		rc = fn(c, option, va_arg(ap, void (*)(void)));
	else if (option < CURLOPTTYPE_BLOB)
		rc = fn(c, option, va_arg(ap, curl_off_t));
	else
		rc = fn(c, option, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

CURLcode curl_easy_getinfo(CURL *c, CURLINFO info, ...)
{
	static CURLcode (*fn)(CURL *, CURLINFO, ...);
	va_list ap;
	void *out; /* every CURLINFO's one argument is a pointer */

	va_start(ap, info);
	out = va_arg(ap, void *);
	va_end(ap);
	RESOLVE(LIB_CURL, fn, "curl_easy_getinfo");
	return fn ? fn(c, info, out) : CURLE_FAILED_INIT;
}

/* ---- libmicrohttpd ------------------------------------------------------------------------- */

FORWARD_VOID(LIB_MHD, MHD_stop_daemon, (struct MHD_Daemon * d), (d))
FORWARD(LIB_MHD, enum MHD_Result, MHD_queue_response,
	(struct MHD_Connection * c, unsigned int status, struct MHD_Response *r), (c, status, r),
	MHD_NO)
FORWARD_VOID(LIB_MHD, MHD_destroy_response, (struct MHD_Response * r), (r))
FORWARD(LIB_MHD, enum MHD_Result, MHD_add_response_header,
	(struct MHD_Response * r, const char *header, const char *content), (r, header, content),
	MHD_NO)
FORWARD(LIB_MHD, struct MHD_Response *, MHD_create_response_from_buffer,
	(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode), (size, buffer, mode), NULL)
FORWARD(LIB_MHD, struct MHD_Response *, MHD_create_response_from_callback,
	(uint64_t size, size_t block_size, MHD_ContentReaderCallback crc, void *crc_cls,
	 MHD_ContentReaderFreeCallback crfc),
	(size, block_size, crc, crc_cls, crfc), NULL)
FORWARD(LIB_MHD, const char *, MHD_lookup_connection_value,
	(struct MHD_Connection * c, enum MHD_ValueKind kind, const char *key), (c, kind, key), NULL)
FORWARD(LIB_MHD, int, MHD_get_connection_values,
	(struct MHD_Connection * c, enum MHD_ValueKind kind, MHD_KeyValueIterator it, void *it_cls),
	(c, kind, it, it_cls), -1)

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
				    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	static struct MHD_Daemon *(*fn)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
					MHD_AccessHandlerCallback, void *, va_list);
	struct MHD_Daemon *d;
	va_list ap;

	RESOLVE(LIB_MHD, fn, "MHD_start_daemon_va");
	if (!fn)
		return NULL;
	va_start(ap, dh_cls);
	d = fn(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *c,
							enum MHD_ConnectionInfoType type, ...)
{
	static const union MHD_ConnectionInfo *(*fn)(struct MHD_Connection *,
						     enum MHD_ConnectionInfoType, ...);

	RESOLVE(LIB_MHD, fn, "MHD_get_connection_info");
	return fn ? fn(c, type) : NULL;
}

const union MHD_DaemonInfo *MHD_get_daemon_info(struct MHD_Daemon *d, enum MHD_DaemonInfoType type,
						...)
{
	static const union MHD_DaemonInfo *(*fn)(struct MHD_Daemon *, enum MHD_DaemonInfoType, ...);

	RESOLVE(LIB_MHD, fn, "MHD_get_daemon_info");
	return fn ? fn(d, type) : NULL;
}

enum MHD_Result MHD_set_connection_option(struct MHD_Connection *c,
					  enum MHD_CONNECTION_OPTION option, ...)
{
	static enum MHD_Result (*fn)(struct MHD_Connection *, enum MHD_CONNECTION_OPTION, ...);
	enum MHD_Result rc;
	va_list ap;

	RESOLVE(LIB_MHD, fn, "MHD_set_connection_option");
	if (!fn)
		return MHD_NO;
	va_start(ap, option);
	rc = fn(c, option, va_arg(ap, unsigned int));
	va_end(ap);
	return rc;
}
