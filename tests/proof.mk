# tests/proof.mk: issue 13's checks (the reference model and its differential test, libFuzzer
# targets, the ASan/UBSan build), included by the Makefile. Kept apart so that the Makefile's
# own layout can change without touching this.

MODEL_SRC := tests/model/model.c
# Built beside the other kernel suites, so tests/run.sh runs it with them.
DIFF_BIN  := $(BUILD)/tests/kernel/test_differential
# `make check RW_DIFF_SEED=N` (an environment variable) replays one seed of the short run.
export RW_DIFF_SEED

all: $(DIFF_BIN)

$(DIFF_BIN): tests/model/test_differential.c $(MODEL_SRC) tests/model/model.h $(TEST_LIBS) $(TEST_HDRS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(TEST_INC) -Itests/model \
		tests/model/test_differential.c $(MODEL_SRC) $(TEST_LIBS) $(LDLIBS) -o $@

# ---- libFuzzer targets: every tests/fuzz/fuzz_NAME.c is one target, its seed corpus (and every
# crashing input kept as a regression case) in tests/fuzz/corpus/NAME/. Adding a target is one
# file (and a corpus folder); FUZZ_LDLIBS is where a target's extra libraries go.
#> FUZZ_BUILD the fuzzers' build folder
FUZZ_BUILD   ?= build-fuzz
#> FUZZ_CC the fuzzers' compiler
FUZZ_CC      ?= clang-14
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -g -O1 $(FUZZ_SAN) -Wall -Wextra -Wno-unused-parameter -Werror -std=gnu11 \
		-D_GNU_SOURCE $(subst -I$(BUILD),-I$(FUZZ_BUILD),$(FE_INC)) -Iuser/cni
#> FUZZ_LDLIBS extra libraries of the fuzz targets
FUZZ_LDLIBS  ?=
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
FUZZ_BINS    := $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_NAMES))
# The library, the CLI's parsers, and the parsers of the agent's HTTP queries and runwall-cni's stdin.
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(LIB_SRC) $(filter-out %/main.c,$(CLI_SRC)) \
		user/view/event_store.c user/view/run_shares.c user/agent/pw_msg.c user/cni/conf.c)
FUZZ_LIB     := $(FUZZ_BUILD)/librunwall-fuzz.a
# `make fuzz`: seconds per target of open-ended exploration. `make check` explores nothing at
# random: it replays the committed inputs, then runs FUZZ_CHECK_RUNS inputs from seed
# FUZZ_CHECK_SEED, the same ones every time (see fuzz-short).
#> FUZZ_SECONDS fuzz: seconds per fuzzer
FUZZ_SECONDS ?= 60
#> FUZZ_CHECK_SEED fuzz-short: the seed
FUZZ_CHECK_SEED ?= 1
#> FUZZ_CHECK_RUNS fuzz-short: inputs per fuzzer
FUZZ_CHECK_RUNS ?= 20000
FUZZ_OPTS := -timeout=10 -rss_limit_mb=1024

$(FUZZ_BUILD)/runwall.skel.h: $(SKEL)
	$(Q)mkdir -p $(@D) && cp $< $@

$(FUZZ_BUILD)/obj/%.o: %.c $(FE_HDRS) $(FUZZ_BUILD)/runwall.skel.h
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJ)
	$(Q)$(AR) rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB) $(FE_HDRS)
	$(call msg,FUZZ-LD,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_LIB) $(LDLIBS) $(FUZZ_LDLIBS) -o $@

#> fuzz-build build the fuzzers into FUZZ_BUILD
fuzz-build: setup $(FUZZ_BINS)

# Open-ended exploration (make fuzz): each target from its committed corpus for $(1) s, new
# inputs kept in $(FUZZ_BUILD)/corpus/NAME. A crash stops with the input saved under
# $(FUZZ_BUILD)/crashes/ and says how to commit it into the target's corpus folder: from then on
# every `make check` replays it.
define fuzz_run
	@set -e; for n in $(FUZZ_NAMES); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$n $(FUZZ_BUILD)/crashes tests/fuzz/corpus/$$n; \
		echo "# fuzz_$$n: $(1) s from tests/fuzz/corpus/$$n ($$(ls tests/fuzz/corpus/$$n | wc -l) seeds)"; \
		$(FUZZ_BUILD)/fuzz_$$n -max_total_time=$(1) $(FUZZ_OPTS) \
			-print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crashes/$$n- \
			$(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n 2>$(FUZZ_BUILD)/fuzz_$$n.log || { \
			tail -40 $(FUZZ_BUILD)/fuzz_$$n.log; echo "# FAIL fuzz_$$n"; \
			art=$$(sed -n 's/.*Test unit written to \(.*\)$$/\1/p' $(FUZZ_BUILD)/fuzz_$$n.log | tail -1); \
			if [ -n "$$art" ]; then \
				echo "# keep it as a regression input (replayed by every make check):"; \
				echo "#   cp $$art tests/fuzz/corpus/$$n/crash-WHAT && git add tests/fuzz/corpus/$$n/crash-WHAT"; \
				echo "# then fix it and commit both."; fi; \
			exit 1; }; \
		grep -E '^stat::number_of_executed_units|^stat::new_units_added' $(FUZZ_BUILD)/fuzz_$$n.log | tr '\n' ' '; echo; \
	done
endef

# make check's fuzz step, the same result for the same commit: every file of each target's
# tests/fuzz/corpus/NAME/ (the seeds and the crashes kept as regression inputs) run once, a
# crash naming its input; then FUZZ_CHECK_RUNS mutations from seed FUZZ_CHECK_SEED over that
# corpus (-runs, no time limit, no corpus reload; address randomization off, as libFuzzer's
# comparison tracing sees pointer values), the new inputs written under
# $(FUZZ_BUILD)/check-corpus/ (emptied first), never into tests/.
#> fuzz-replay run every committed fuzz input once
fuzz-replay: fuzz-build
	@set -e; mkdir -p $(FUZZ_BUILD)/crashes; for n in $(FUZZ_NAMES); do \
		log=$(FUZZ_BUILD)/replay_$$n.log; \
		count=$$(find tests/fuzz/corpus/$$n -type f 2>/dev/null | wc -l); \
		if [ "$$count" -eq 0 ]; then echo "# fuzz_$$n: no inputs in tests/fuzz/corpus/$$n"; continue; fi; \
		find tests/fuzz/corpus/$$n -type f -print0 | sort -z | \
			xargs -0 $(FUZZ_BUILD)/fuzz_$$n $(FUZZ_OPTS) \
			-artifact_prefix=$(FUZZ_BUILD)/crashes/$$n- >$$log 2>&1 || { \
			tail -40 $$log; \
			f=$$(sed -n 's/^Running: //p' $$log | tail -1); \
			echo "# FAIL fuzz_$$n: the committed input $$f (replay: $(FUZZ_BUILD)/fuzz_$$n $$f)"; \
			exit 1; }; \
		echo "# fuzz_$$n: $$count committed inputs replayed"; \
	done

#> fuzz-short fuzz-replay, then FUZZ_CHECK_RUNS inputs from FUZZ_CHECK_SEED (in check)
fuzz-short: fuzz-replay
	@set -e; norand="setarch -R"; $$norand true 2>/dev/null || { norand=; \
		echo "# setarch -R is refused here: addresses randomized, the runs below may differ"; }; \
	for n in $(FUZZ_NAMES); do \
		log=$(FUZZ_BUILD)/check_$$n.log; \
		rm -rf $(FUZZ_BUILD)/check-corpus/$$n; mkdir -p $(FUZZ_BUILD)/check-corpus/$$n tests/fuzz/corpus/$$n; \
		$$norand $(FUZZ_BUILD)/fuzz_$$n -seed=$(FUZZ_CHECK_SEED) -runs=$(FUZZ_CHECK_RUNS) -reload=0 \
			$(FUZZ_OPTS) -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crashes/$$n- \
			$(FUZZ_BUILD)/check-corpus/$$n tests/fuzz/corpus/$$n >$$log 2>&1 || { \
			tail -40 $$log; \
			echo "# FAIL fuzz_$$n (seed $(FUZZ_CHECK_SEED), $(FUZZ_CHECK_RUNS) runs; the input is under $(FUZZ_BUILD)/crashes/)"; \
			exit 1; }; \
		echo "# fuzz_$$n: seed $(FUZZ_CHECK_SEED), $$(awk '/^stat::number_of_executed_units:/ {print $$2}' $$log) runs," \
			"$$(awk '/^stat::new_units_added:/ {print $$2}' $$log) new inputs, $$(grep -o 'cov: [0-9]*' $$log | tail -1)"; \
	done

# make fuzz: every fuzzer for FUZZ_SECONDS, then the long differential run (>= 1 000 000 packets
# over >= 1 000 snapshots; FUZZ_DIFF_PACKETS, FUZZ_DIFF_SNAPSHOTS, RW_DIFF_SEED).
# About 1.3 % of the generated frames are ones BPF_PROG_TEST_RUN cannot take (shorter than an
# Ethernet header): 1 020 000 generated is over 1 000 000 judged by both.
#> FUZZ_DIFF_PACKETS fuzz: packets of the long differential run
FUZZ_DIFF_PACKETS ?= 1020000
#> FUZZ_DIFF_SNAPSHOTS fuzz: snapshots of the long differential run
FUZZ_DIFF_SNAPSHOTS ?= 1000
#> fuzz every fuzzer for FUZZ_SECONDS, then the long differential run (root)
fuzz: fuzz-build $(DIFF_BIN)
	$(call fuzz_run,$(FUZZ_SECONDS))
	$(Q)$(DIFF_BIN) --packets $(FUZZ_DIFF_PACKETS) --snapshots $(FUZZ_DIFF_SNAPSHOTS) \
		$(if $(RW_DIFF_SEED),--seed $(RW_DIFF_SEED))

# `make check` runs fuzz-short: the Makefile's check target names it.

.PHONY: fuzz fuzz-build fuzz-replay fuzz-short

# ---- make check-asan: user space and every suite that does not need the kernel, built with
# ASan and UBSan (nothing recovers: the first report fails the run, leaks included) into its own
# folder. The differential test runs there too, briefly: it drives the parser, rw_apply() and the
# datapath helpers under the sanitizers.
#> ASAN_BUILD check-asan and soak: their build folder
ASAN_BUILD  ?= build-asan
ASAN_CFLAGS := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

#> check-asan user space and the unit suites under ASan and UBSan, in ASAN_BUILD (root)
check-asan: setup
	$(Q)CFLAGS='$(ASAN_CFLAGS)' $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) all
	$(Q)set -e; export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1; \
	for t in $(ASAN_BUILD)/tests/unit/test_*; do [ -x "$$t" ] || continue; echo "=== asan $$t"; $$t; done; \
	echo "=== asan runwall usage and errors"; \
	for args in "" "--help" "frobnicate" "map dupm pods" "-j explain --pod 10.1.2 1.2.3.4 443" \
		"drops --reason privat-destination"; do \
		rc=0; $(ASAN_BUILD)/runwall $$args >/dev/null 2>$(ASAN_BUILD)/runwall.err || rc=$$?; \
		[ $$rc -le 2 ] || { cat $(ASAN_BUILD)/runwall.err; echo "runwall $$args: exit $$rc"; exit 1; }; done; \
	echo "=== asan test_differential"; $(ASAN_BUILD)/tests/kernel/test_differential --packets 5000 --snapshots 20 \
		--seed $${RW_DIFF_SEED:-1}
	@echo "# check-asan: clean"

.PHONY: check-asan

# ---- make soak: the long agent run (tests/soak/agent_soak.sh) under ASan's leak checker, then on
# the normal build for its RSS. SOAK_SECONDS each (default 300).
#> SOAK_SECONDS soak: seconds of each run
SOAK_SECONDS ?= 300
#> soak the agent for SOAK_SECONDS under ASan, then on the normal build (root)
soak: setup all
	$(Q)CFLAGS='$(ASAN_CFLAGS)' $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) all
	$(Q)tests/soak/agent_soak.sh $(ASAN_BUILD) $(SOAK_SECONDS)
	$(Q)tests/soak/agent_soak.sh $(BUILD) $(SOAK_SECONDS)

.PHONY: soak
