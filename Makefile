# runwall: `make` builds, `make check` installs what is missing, builds and runs every test.
# Output goes to build/ only. V=1 shows the full commands.

BUILD     ?= build
CLANG     ?= clang
CC        ?= gcc
BPFTOOL   ?= bpftool
ARCH      := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

INCLUDES  := -Iinclude -Iuser -I$(BUILD)
CFLAGS    ?= -g -O2
CFLAGS    += -Wall -Wextra -Wno-unused-parameter -Werror -std=gnu11 -D_GNU_SOURCE $(INCLUDES)
LDLIBS    := -lbpf -lelf -lz -lmnl -ljansson -lmicrohttpd
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -Wall -Werror -D__TARGET_ARCH_$(ARCH) -Iinclude -Ibpf \
	      -I/usr/include/$(shell uname -m)-linux-gnu

BPF_SRC   := bpf/runwall.bpf.c
BPF_HDRS  := $(wildcard bpf/*.h) include/runwall.h
BPF_OBJ   := $(BUILD)/runwall.bpf.o
SKEL      := $(BUILD)/runwall.skel.h

LIB_SRC   := $(filter-out user/main.c,$(wildcard user/*.c))
LIB_OBJ   := $(patsubst user/%.c,$(BUILD)/user/%.o,$(LIB_SRC))
LIB       := $(BUILD)/librunwall.a
USER_HDRS := $(wildcard user/*.h) include/runwall.h

UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
DP_SRC    := $(wildcard tests/datapath/*.c)
DP_BIN    := $(BUILD)/tests/test_datapath
BENCH_BIN := $(BUILD)/tests/bench_datapath

RUNWALL   := $(BUILD)/runwall
SETUP_STAMP := $(BUILD)/.setup-done

.DELETE_ON_ERROR:
.PHONY: all setup check test vmtest bench clean demo demo-clean

all: $(if $(wildcard user/main.c),$(RUNWALL)) $(UNIT_BIN) $(DP_BIN)

# Installs the Debian packages the build and the tests need (idempotent; no-op when present).
setup: $(SETUP_STAMP)
$(SETUP_STAMP): scripts/setup.sh
	$(Q)scripts/setup.sh
	$(Q)mkdir -p $(BUILD) && touch $@

$(BUILD) $(BUILD)/user $(BUILD)/tests:
	$(Q)mkdir -p $@

$(BPF_OBJ): $(BPF_SRC) $(BPF_HDRS) | $(SETUP_STAMP) $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@.tmp.o
	$(Q)$(BPFTOOL) gen object $@ $@.tmp.o
	$(Q)rm -f $@.tmp.o

$(SKEL): $(BPF_OBJ)
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name runwall_bpf > $@

$(BUILD)/user/%.o: user/%.c $(USER_HDRS) $(SKEL) | $(BUILD)/user
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	$(call msg,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(RUNWALL): $(BUILD)/user/main.o $(LIB)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# cmocka: one binary per module; -Werror=unused-function makes a test left out of tests[] fail.
$(BUILD)/tests/test_%: tests/unit/test_%.c $(LIB) $(USER_HDRS) | $(BUILD)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Werror=unused-function $< $(LIB) $(LDLIBS) -lcmocka -o $@

$(DP_BIN): $(DP_SRC) $(wildcard tests/datapath/*.h) $(LIB) $(USER_HDRS) | $(BUILD)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Itests/datapath $(DP_SRC) $(LIB) $(LDLIBS) -o $@

$(BENCH_BIN): tests/bench/bench_datapath.c tests/datapath/pkt.c $(LIB) $(USER_HDRS) | $(BUILD)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Itests/datapath $(filter %.c,$^) $(LIB) $(LDLIBS) -o $@

# Per-packet cost of each verdict path against an empty program, median of repeated runs.
bench: setup $(BENCH_BIN)
	$(Q)$(BENCH_BIN)

# The test command: installs what is missing, builds without warnings, runs every suite.
check: setup all
	$(Q)tests/run.sh $(BUILD)

test: check

# The kernel-facing suites in a VM: Debian's 6.1 kernel (no tcx: the clsact fallback) by default,
# any other with VMTEST_KERNEL=/path/to/bzImage.
vmtest: setup all
	$(Q)scripts/vmtest.sh $(BUILD) $(if $(VMTEST_KERNEL),--kernel $(VMTEST_KERNEL))

# The run command: a demo node in network namespaces with the seed's default policy, left up for
# exploring with the CLI until `make demo-clean`.
demo: setup all
	$(Q)scripts/demo.sh up $(BUILD)

demo-clean:
	$(Q)scripts/demo.sh down

clean:
	$(Q)rm -rf $(BUILD)
