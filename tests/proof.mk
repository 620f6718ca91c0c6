# tests/proof.mk: issue 13's checks (the reference model and its differential test, libFuzzer
# targets, the ASan/UBSan build), included by the Makefile. Kept apart so that the Makefile's
# own layout can change without touching this.

MODEL_SRC := tests/model/model.c
# Built beside the other kernel suites, so tests/run.sh runs it with them.
DIFF_BIN  := $(BUILD)/tests/kernel/test_differential
# The model's verdict order (tests/model/model.h): 1 the planned one, now the datapath's; 0 the old.
MODEL_PLANNED ?= 1
# `make check RW_DIFF_SEED=N` (an environment variable) replays one seed of the short run.
export RW_DIFF_SEED

all: $(DIFF_BIN)

$(DIFF_BIN): tests/model/test_differential.c $(MODEL_SRC) tests/model/model.h $(TEST_LIBS) $(TEST_HDRS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(TEST_INC) -Itests/model -DRW_MODEL_PLANNED=$(MODEL_PLANNED) \
		tests/model/test_differential.c $(MODEL_SRC) $(TEST_LIBS) $(LDLIBS) -o $@

# ---- libFuzzer targets: every tests/fuzz/fuzz_NAME.c is one target, its seed corpus (and every
# crashing input kept as a regression case) in tests/fuzz/corpus/NAME/. Adding a target is one
# file (and a corpus folder); FUZZ_LDLIBS is where a target's extra libraries go.
FUZZ_BUILD   ?= build-fuzz
FUZZ_CC      ?= clang-14
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -g -O1 $(FUZZ_SAN) -Wall -Wextra -Wno-unused-parameter -Werror -std=gnu11 \
		-D_GNU_SOURCE $(subst -I$(BUILD),-I$(FUZZ_BUILD),$(FE_INC)) -Iuser/cni
FUZZ_LDLIBS  ?=
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
FUZZ_BINS    := $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_NAMES))
# The library, the CLI's parsers, and the parsers of the agent's HTTP queries and runwall-cni's stdin.
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(LIB_SRC) $(filter-out %/main.c,$(CLI_SRC)) \
		user/agent/event_store.c user/cni/conf.c)
FUZZ_LIB     := $(FUZZ_BUILD)/librunwall-fuzz.a
# Seconds per target: `make fuzz` (FUZZ_SECONDS) and the short runs of `make check`.
FUZZ_SECONDS ?= 60
FUZZ_CHECK_SECONDS ?= 4

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

fuzz-build: setup $(FUZZ_BINS)

# Each target from its committed corpus (copied, so that new inputs stay in FUZZ_BUILD), for a
# set time; a crash stops with the input saved under $(FUZZ_BUILD)/crashes/ (commit it into the
# target's corpus folder: from then on it is replayed by every run).
define fuzz_run
	@set -e; for n in $(FUZZ_NAMES); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$n $(FUZZ_BUILD)/crashes tests/fuzz/corpus/$$n; \
		echo "# fuzz_$$n: $(1) s from tests/fuzz/corpus/$$n ($$(ls tests/fuzz/corpus/$$n | wc -l) seeds)"; \
		$(FUZZ_BUILD)/fuzz_$$n -max_total_time=$(1) -timeout=10 -rss_limit_mb=1024 \
			-print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crashes/$$n- \
			$(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n 2>$(FUZZ_BUILD)/fuzz_$$n.log \
			|| { tail -40 $(FUZZ_BUILD)/fuzz_$$n.log; echo "# FAIL fuzz_$$n"; exit 1; }; \
		grep -E '^stat::number_of_executed_units|^stat::new_units_added' $(FUZZ_BUILD)/fuzz_$$n.log | tr '\n' ' '; echo; \
	done
endef

fuzz-short: fuzz-build
	$(call fuzz_run,$(FUZZ_CHECK_SECONDS))

# make fuzz: every fuzzer for FUZZ_SECONDS, then the long differential run (>= 1 000 000 packets
# over >= 1 000 snapshots; FUZZ_DIFF_PACKETS, FUZZ_DIFF_SNAPSHOTS, RW_DIFF_SEED).
# About 1.3 % of the generated frames are ones BPF_PROG_TEST_RUN cannot take (shorter than an
# Ethernet header): 1 020 000 generated is over 1 000 000 judged by both.
FUZZ_DIFF_PACKETS ?= 1020000
FUZZ_DIFF_SNAPSHOTS ?= 1000
fuzz: fuzz-build $(DIFF_BIN)
	$(call fuzz_run,$(FUZZ_SECONDS))
	$(Q)$(DIFF_BIN) --packets $(FUZZ_DIFF_PACKETS) --snapshots $(FUZZ_DIFF_SNAPSHOTS) \
		$(if $(RW_DIFF_SEED),--seed $(RW_DIFF_SEED))

check: fuzz-short

.PHONY: fuzz fuzz-build fuzz-short

# ---- make check-asan: user space and every suite that does not need the kernel, built with
# ASan and UBSan (nothing recovers: the first report fails the run, leaks included) into its own
# folder. The differential test runs there too, briefly: it drives the parser, rw_apply() and the
# datapath helpers under the sanitizers.
ASAN_BUILD  ?= build-asan
ASAN_CFLAGS := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

check-asan: setup
	$(Q)CFLAGS='$(ASAN_CFLAGS)' $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) all
	$(Q)set -e; export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1; \
	for t in $(ASAN_BUILD)/tests/unit/test_*; do echo "=== asan $$t"; $$t; done; \
	echo "=== asan runwall usage and errors"; \
	for args in "" "--help" "frobnicate" "map dupm pods" "-j explain --pod 10.1.2 1.2.3.4 443" \
		"drops --reason privat-destination"; do \
		rc=0; $(ASAN_BUILD)/runwall $$args >/dev/null 2>$(ASAN_BUILD)/runwall.err || rc=$$?; \
		[ $$rc -le 2 ] || { cat $(ASAN_BUILD)/runwall.err; echo "runwall $$args: exit $$rc"; exit 1; }; done; \
	echo "=== asan test_differential"; $(ASAN_BUILD)/tests/kernel/test_differential --packets 5000 --snapshots 20
	@echo "# check-asan: clean"

.PHONY: check-asan

# ---- make soak: the long agent run (tests/soak/agent_soak.sh) under ASan's leak checker, then on
# the normal build for its RSS. SOAK_SECONDS each (default 300).
SOAK_SECONDS ?= 300
soak: setup all
	$(Q)CFLAGS='$(ASAN_CFLAGS)' $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) all
	$(Q)tests/soak/agent_soak.sh $(ASAN_BUILD) $(SOAK_SECONDS)
	$(Q)tests/soak/agent_soak.sh $(BUILD) $(SOAK_SECONDS)

.PHONY: soak
