// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* bench_lookups.c: what one map lookup of each kind costs on the running kernel, measured the
 * way bench_datapath measures the datapath: BPF_PROG_TEST_RUN of a program that does that one
 * lookup (lookups.bpf.c), `repeat` times per run, next to an empty TC program in the same round;
 * median over rounds of the kernel's mean ns per run, and its ratio to the empty program's. The
 * tables are filled as the datapath's would be (lookups.h); every repeat looks up another key.
 *
 *   bench_lookups [--json FILE] [--repeat N] [--rounds N] [--quick]
 *
 * Rows {section "lookups", name, value (x empty), unit, ns, empty_ns, over_ns, kernel} go to FILE
 * (tests/bench/report.py merges them into build/bench.json).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define BENCH_NAME "bench_lookups"
#include "bench.h"
#include "runwall.h"
#include "lookups.h"
#include "lookups.skel.h"

#define MAX_ROUNDS 31

struct lk_case {
	const char *name;
	const char *key; /* its JSON name */
	struct bpf_program *prog;
};

#define MAX_CASES 64
static struct lk_case cases[MAX_CASES]; /* in the order of the output */
static int ncases;
static double ns_of[MAX_CASES][MAX_ROUNDS]; /* case, round */

static void add_case(const char *name, const char *key, struct bpf_program *prog)
{
	if (ncases == MAX_CASES)
		DIE("more than MAX_CASES (%d) cases", MAX_CASES);
	cases[ncases++] = (struct lk_case){name, key, prog};
}

/* The LPM_TRIE rows, one list for both families: the IPv4 and the IPv6 allow trie
 * (lookups.bpf.c's lk_trie4_* and lk_trie6_*) at each size, a key each holds and one it does not.
 */
static void add_lpm_cases(struct lookups_bpf *skel)
{
	static const struct {
		int key_bytes;
		const char *key, *prog;
	} family[] = {{16, "allow", "lk_trie4"}, {28, "allow6", "lk_trie6"}};
	static const struct {
		const char *name, *key, *prog;
	} size[] = {
		{"10 prefixes", "10", "10"},
		{"100 prefixes", "100", "100"},
		{"1 000 prefixes", "1000", "1k"},
		{"10 000 prefixes", "10000", "10k"},
		{"100 000 prefixes", "100000", "100k"},
		{"100 000 prefixes, one run's 100", "100000_one_run", "100k_one_run"},
	};
	static const char *const outcome[] = {"hit", "miss"};
	static char text[2 * 6 * 2][2][80]; /* each row's name and key, for the whole run */
	int n = 0;

	for (int f = 0; f < 2; f++)
		for (int s = 0; s < 6; s++)
			for (int o = 0; o < 2; o++, n++) {
				struct bpf_program *prog;
				char pname[64];

				snprintf(text[n][0], sizeof(text[n][0]),
					 "LPM_TRIE %d-byte %s key, %s, %s", family[f].key_bytes,
					 family[f].key, size[s].name, outcome[o]);
				snprintf(text[n][1], sizeof(text[n][1]), "lpm%d_%s_%s",
					 family[f].key_bytes, size[s].key, outcome[o]);
				snprintf(pname, sizeof(pname), "%s_%s_%s", family[f].prog,
					 size[s].prog, outcome[o]);
				prog = bpf_object__find_program_by_name(skel->obj, pname);
				if (!prog)
					DIE("lookups.bpf.o has no program %s", pname);
				add_case(text[n][0], text[n][1], prog);
			}
}

static double median(const double *v, int n)
{
	double s[MAX_ROUNDS];

	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* The kernel's mean ns per run of `repeat` runs of prog on one minimal frame. */
static double run(struct bpf_program *prog, __u32 repeat)
{
	__u8 frame[64] = {[12] = 0x08}; /* an Ethernet header of an IPv4 frame, the rest zeros */
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = sizeof(frame),
		    .repeat = repeat);

	if (bpf_prog_test_run_opts(bpf_program__fd(prog), &opts))
		DIE("test_run of %s: %s", bpf_program__name(prog), strerror(errno));
	return opts.duration;
}

static void update(struct bpf_map *map, const void *key, const void *value)
{
	if (bpf_map_update_elem(bpf_map__fd(map), key, value, BPF_ANY))
		DIE("filling %s: %s", bpf_map__name(map), strerror(errno));
}

static void update_fd(int fd, const char *what, const void *key, const void *value)
{
	if (bpf_map_update_elem(fd, key, value, BPF_ANY))
		DIE("filling %s: %s", what, strerror(errno));
}

static int inner_map(enum bpf_map_type type, __u32 key_size, __u32 value_size, __u32 max,
		     __u32 flags)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = flags);
	int fd = bpf_map_create(type, "lk_inner", key_size, value_size, max, &o);

	if (fd < 0)
		DIE("an inner map: %s", strerror(errno));
	return fd;
}

static void fill(struct lookups_bpf *skel)
{
	struct rw_ct_value ctv = {.stamp = 1, .run_idx = 1};
	struct rw_endpoint ep = {0};
	struct rw_rule rule = {.rule_id = 1};
	__u64 rev = 1;

	for (__u32 i = 0; i < LK_RUNS; i++)
		update(skel->maps.lk_array, &i, &rev);
	for (__u32 slot = 0; slot < LK_SLOTS; slot++) {
		int fd = inner_map(BPF_MAP_TYPE_ARRAY, sizeof(__u32), sizeof(__u64), LK_RUNS, 0);

		for (__u32 i = 0; i < LK_RUNS; i++)
			update_fd(fd, "a slot's array", &i, &rev);
		update(skel->maps.lk_slots_array, &slot, &fd);
		close(fd); /* the outer map holds it */
	}
	for (__u32 i = 0; i < LK_ENDPOINTS; i++) {
		__u32 ifindex = LK_IFINDEX0 + i;

		ep.pod_ip = LK_BE32(0x0a640000 | i);
		update(skel->maps.lk_hash4, &ifindex, &ep);
	}
	for (__u32 s = 0; s < LK_SANDBOXES; s++) {
		int fd = inner_map(BPF_MAP_TYPE_HASH, sizeof(struct rw_ct_key), sizeof(ctv),
				   RW_CT_PER_SANDBOX, BPF_F_NO_PREALLOC);
		__u32 ifindex = LK_IFINDEX0 + s;

		for (__u32 f = 0; f < LK_FLOWS; f++) {
			struct rw_ct_key k;

			lk_ct_key(&k, s, f);
			update_fd(fd, "a sandbox's table", &k, &ctv);
			update(skel->maps.lk_ct_node, &k, &ctv);
			if (s == 0) {
				struct rw_ct6_key k6;

				lk_ct6_key(&k6, s, f);
				update(skel->maps.lk_ct_sandbox, &k, &ctv);
				update(skel->maps.lk_ct6_sandbox, &k6, &ctv);
			}
		}
		update(skel->maps.lk_ct_by_ifindex, &ifindex, &fd);
		update(skel->maps.lk_ct_by_slot, &s, &fd);
		{
			__u32 slot = ifindex % LK_IFINDEX_SLOTS;

			update(skel->maps.lk_ct_by_ifindex_slot, &slot, &fd);
			update(skel->maps.lk_slot_owner, &slot, &ifindex);
		}
		close(fd);
	}
	{
		struct bpf_map *t4[] = {skel->maps.lk_trie4_10, skel->maps.lk_trie4_100,
					skel->maps.lk_trie4_1k, skel->maps.lk_trie4_10k,
					skel->maps.lk_trie4_100k};
		struct bpf_map *t6[] = {skel->maps.lk_trie6_10, skel->maps.lk_trie6_100,
					skel->maps.lk_trie6_1k, skel->maps.lk_trie6_10k,
					skel->maps.lk_trie6_100k};
		const __u32 n[] = {10, 100, 1000, 10000, 100000};

		for (int t = 0; t < 5; t++) {
			for (__u32 i = 0; i < n[t]; i++) {
				struct rw_allow_lpm_key k;
				struct rw_allow6_lpm_key k6;

				lk_allow_prefix(&k, i);
				lk_allow6_prefix(&k6, i);
				update(t4[t], &k, &rule);
				update(t6[t], &k6, &rule);
			}
		}
	}
#define FILL_SPECIAL(net, len, str, label)                                             \
	{                                                                              \
		struct rw_cidr_lpm_key k = {.prefixlen = (len), .addr = LK_BE32(net)}; \
		__u32 one = 1;                                                         \
                                                                                       \
		update(skel->maps.lk_special, &k, &one);                               \
	}
	RW_SPECIAL_RANGES(FILL_SPECIAL)
#undef FILL_SPECIAL
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"json", required_argument, NULL, 'j'},
					     {"repeat", required_argument, NULL, 'r'},
					     {"rounds", required_argument, NULL, 'n'},
					     {"quick", no_argument, NULL, 'q'},
					     {}};
	const char *json_path = NULL;
	__u32 repeat = 1000000;
	int rounds = 7, c;
	struct lookups_bpf *skel;
	struct utsname u;
	json_t *rows;
	double base;

	while ((c = bench_getopt(argc, argv, opts, &json_path)) != -1) {
		switch (c) {
		case 'r':
			repeat = strtoul(optarg, NULL, 10);
			break;
		case 'n':
			rounds = atoi(optarg);
			break;
		case 'q':
			repeat = 100000, rounds = 3;
			break;
		default:
			fprintf(stderr, "usage: bench_lookups [--json FILE] [--repeat N] "
					"[--rounds N] [--quick]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || !repeat)
		DIE("--rounds wants 1 to %d, --repeat at least 1", MAX_ROUNDS);
	setvbuf(stdout, NULL, _IOLBF, 0);
	uname(&u);
	skel = lookups_bpf__open_and_load();
	if (!skel)
		DIE("loading lookups.bpf.o: %s (root needed)", strerror(errno));
	fill(skel);

	/* The trie of special ranges says what the compiled-in compares say, on 10^5 addresses. */
	skel->bss->lk_wrong = 0;
	run(skel->progs.lk_special_agree, 100000);
	if (skel->bss->lk_wrong)
		DIE("the special-range trie and the compares disagree on %llu addresses",
		    (unsigned long long)skel->bss->lk_wrong);

	struct lk_case maps[] = {
		{"empty TC program", "empty", skel->progs.lk_empty},
		{"the key arithmetic alone (in every row below)", "pick", skel->progs.lk_pick_only},
		{"ARRAY, 1 024 x u64 (rw_run_revs)", "array", skel->progs.lk_array_lookup},
		{"ARRAY_OF_MAPS slot -> ARRAY (the policy's two slots)", "array_of_maps_array",
		 skel->progs.lk_slots_array_lookup},
		{"PERCPU_ARRAY, 1 024 x rw_counters, and one add", "percpu_array_add",
		 skel->progs.lk_percpu_count},
		{"HASH, 4-byte key (rw_endpoints, 1 024 veths)", "hash4",
		 skel->progs.lk_hash4_lookup},
		{"HASH, 20-byte rw_ct_key, one sandbox's table (4 096 flows)", "hash20_sandbox",
		 skel->progs.lk_ct_sandbox_lookup},
		{"HASH, 44-byte rw_ct6_key, one sandbox's table (4 096 flows)", "hash44_sandbox",
		 skel->progs.lk_ct6_sandbox_lookup},
		{"HASH, 20-byte rw_ct_key, one node table, 4 096 of its flows", "hash20_node_warm",
		 skel->progs.lk_ct_node_warm},
		{"HASH_OF_MAPS ifindex -> HASH 20-byte (runwall's), 4 096 flows",
		 "hash_of_maps_hash20_warm", skel->progs.lk_ct_by_ifindex_warm},
		{"ARRAY_OF_MAPS slot -> HASH 20-byte, 4 096 flows", "array_of_maps_hash20_warm",
		 skel->progs.lk_ct_by_slot_warm},
		{"owner check, ARRAY_OF_MAPS ifindex % 65 536 -> HASH 20-byte, 4 096 flows",
		 "ifindex_slot_hash20_warm", skel->progs.lk_ct_by_ifindex_slot_warm},
		{"HASH, 20-byte rw_ct_key, one node table, all 65 536 flows", "hash20_node_all",
		 skel->progs.lk_ct_node_all},
		{"HASH_OF_MAPS ifindex -> HASH 20-byte (runwall's), all 65 536 flows",
		 "hash_of_maps_hash20_all", skel->progs.lk_ct_by_ifindex_all},
		{"ARRAY_OF_MAPS slot -> HASH 20-byte, all 65 536 flows", "array_of_maps_hash20_all",
		 skel->progs.lk_ct_by_slot_all},
		{"owner check, ARRAY_OF_MAPS ifindex % 65 536 -> HASH, all 65 536 flows",
		 "ifindex_slot_hash20_all", skel->progs.lk_ct_by_ifindex_slot_all},
	};

	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
		add_case(maps[i].name, maps[i].key, maps[i].prog);
	add_lpm_cases(skel);
	add_case("special ranges: 15 inline compares (rw_is_special)", "special_compares",
		 skel->progs.lk_special_compares);
	add_case("special ranges: an LPM_TRIE of the 15 (8-byte key)", "special_trie",
		 skel->progs.lk_special_trie);

	printf("# lookups: BPF_PROG_TEST_RUN, one lookup per run, repeat %u, median of %d rounds, "
	       "kernel %s\n",
	       repeat, rounds, u.release);
	skel->bss->lk_wrong = 0;
	for (int rd = 0; rd < rounds; rd++)
		for (int i = 0; i < ncases; i++)
			ns_of[i][rd] = run(cases[i].prog, repeat);
	if (skel->bss->lk_wrong)
		DIE("%llu lookups had another outcome than their table was filled for",
		    (unsigned long long)skel->bss->lk_wrong);

	rows = json_array();
	base = median(ns_of[0], rounds);
	printf("  %-74s %8s %9s %8s\n", "lookup", "ns", "x empty", "+ns");
	for (int i = 0; i < ncases; i++) {
		double ns = median(ns_of[i], rounds);
		char name[160];

		printf("  %-74s %8.1f %9.2f %8.1f\n", cases[i].name, ns, ns / base, ns - base);
		snprintf(name, sizeof(name), "lookup: %s", cases[i].name);
		json_array_append_new(
			rows, json_pack("{s:s, s:s, s:s, s:f, s:s, s:f, s:f, s:f, s:s, s:i, s:i}",
					"section", "lookups", "name", name, "lookup", cases[i].key,
					"value", ns / base, "unit", "x empty", "ns", ns, "empty_ns",
					base, "over_ns", ns - base, "kernel", u.release, "repeat",
					(int)repeat, "rounds", rounds));
	}
	bench_write_json(rows, json_path);
	lookups_bpf__destroy(skel);
	return 0;
}
