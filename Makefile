# runwall: `make` builds (no root: it only says which packages are missing); `make check`, `demo`,
# `vmtest` and `bench` install what is missing (scripts/setup.sh), then build and run as root.
# Output goes to build/ only. V=1 shows the full commands. `make help` lists every target and
# variable.

#> BUILD build folder
BUILD     ?= build
#> CLANG compiler of the BPF object
CLANG     ?= clang
#> CC C compiler of user space
CC        ?= gcc
#> BPFTOOL bpftool, for the object and the skeleton
BPFTOOL   ?= $(or $(shell PATH=$$PATH:/usr/sbin:/sbin command -v bpftool),bpftool)
ARCH      := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')

, := ,

#> V 1 shows the full commands
ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

#> CFLAGS flags of user space (-Wall -Werror ... are added)
CFLAGS    ?= -g -O2
CFLAGS    += -Wall -Wextra -Wno-unused-parameter -Werror -std=gnu11 -D_GNU_SOURCE
# Each object's headers, as the compiler saw them (BUILD/**/*.d, read below): a changed header
# rebuilds what includes it and nothing else. Generated headers (the skeleton, the page) are
# order-only prerequisites, so that they exist before the first compile.
DEPFLAGS  := -MMD -MP
LDLIBS    := -lbpf -lelf -lz -lmnl -ljansson -lpthread
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -Wall -Werror -D__TARGET_ARCH_$(ARCH) -Iinclude -Ibpf \
	      -I/usr/include/$(shell uname -m)-linux-gnu

BPF_SRC   := bpf/runwall.bpf.c
BPF_HDRS  := $(wildcard bpf/*.h) include/runwall.h
BPF_OBJ   := $(BUILD)/runwall.bpf.o
SKEL      := $(BUILD)/runwall.skel.h

# Layout (README "Layout"): user/lib is librunwall, which never prints and never exits; each front
# end is a folder of its own linked against it. Every .c file in a folder is built: adding a file
# needs no edit here. The library sees only its own headers and include/, so it cannot reach into a
# front end; `make check-lib` proves the archive needs nothing but itself and system libraries.
LIB_INC   := -Iinclude -Iuser/lib -I$(BUILD)
LIB_SRC   := $(wildcard user/lib/*.c)
LIB_OBJ   := $(patsubst user/%.c,$(BUILD)/%.o,$(LIB_SRC))
LIB_HDRS  := $(wildcard user/lib/*.h) include/runwall.h
LIB       := $(BUILD)/librunwall.a

# The `runwall` binary: the CLI (user/cli, main.c holds the command table, cli_agent.c parses
# `runwall agent`'s options), the agent (user/agent, started by rw_agent_run(), agent_run.h) and
# the live view (user/view, shared by `agent --listen` and `runwall view`). Each layer sees only
# the headers of the layers below it: the view the library's, the agent the view's, the CLI the
# view's and the agent's entry point; `make check-layers` proves the archives' references agree.
VIEW_SRC  := $(wildcard user/view/*.c)
VIEW_OBJ  := $(patsubst user/%.c,$(BUILD)/%.o,$(VIEW_SRC))
VIEW_AR   := $(BUILD)/librunwall-view.a
VIEW_INC  := $(LIB_INC) -Iuser/view
AGENT_SRC := $(wildcard user/agent/*.c)
AGENT_OBJ := $(patsubst user/%.c,$(BUILD)/%.o,$(AGENT_SRC))
AGENT_AR  := $(BUILD)/librunwall-agent.a
AGENT_INC := $(VIEW_INC) -Iuser/agent
CLI_SRC   := $(wildcard user/cli/*.c)
CLI_OBJ   := $(patsubst user/%.c,$(BUILD)/%.o,$(CLI_SRC))
CLI_AR    := $(BUILD)/librunwall-cli.a
CLI_INC   := $(VIEW_INC) -Iuser/cli -Iuser/agent
FE_INC    := $(LIB_INC) -Iuser/view -Iuser/cli -Iuser/agent
FE_HDRS   := $(LIB_HDRS) $(wildcard user/view/*.h user/cli/*.h user/agent/*.h)
RUNWALL   := $(BUILD)/runwall

# The fault hooks of user/lib/apply.c exist only in a test build: the library with
# -DRW_TEST_FAULTS, linked into build/tests/runwall-faults (RUNWALL_APPLY_FAULT, for
# tests/netns/test_faults.sh) and into test_datapath (rw_apply_inject_fault()). build/runwall
# has no trace of either.
FAULT_LIB := $(BUILD)/tests/librunwall-faults.a
FAULT_BIN := $(BUILD)/tests/runwall-faults

# The CNI plugin, its own front end on the same library, once user/cni/ has sources.
CNI_SRC   := $(wildcard user/cni/*.c)
CNI_OBJ   := $(patsubst user/%.c,$(BUILD)/%.o,$(CNI_SRC))
CNI_BIN   := $(if $(CNI_SRC),$(BUILD)/runwall-cni)
CNI_AR    := $(BUILD)/librunwall-cni.a

# Tests: tests/unit (cmocka, no root) and tests/kernel (need root and the kernel's BPF). Each
# test_*.c is one binary; the other .c files of tests/kernel are helpers any kernel test may use.
TEST_INC  := $(FE_INC) -Iuser/cni -Itests/kernel
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRC))
KERN_SRC  := $(wildcard tests/kernel/test_*.c)
KERN_BIN  := $(patsubst tests/kernel/%.c,$(BUILD)/tests/kernel/%,$(KERN_SRC))
# test_datapath's parts, one per area (tests/README.md), linked into its binary alone.
DP_SRC    := $(wildcard tests/kernel/datapath/*.c)
DP_OBJ    := $(patsubst tests/kernel/%.c,$(BUILD)/tests/kernel/%.o,$(DP_SRC))
KHELP_SRC := $(filter-out tests/kernel/test_%.c,$(wildcard tests/kernel/*.c))
KHELP_OBJ := $(patsubst tests/kernel/%.c,$(BUILD)/tests/kernel/%.o,$(KHELP_SRC))
KHELP_AR  := $(BUILD)/tests/kernel/libhelpers.a
TEST_HDRS := $(FE_HDRS) $(wildcard user/cni/*.h tests/kernel/*.h tests/kernel/datapath/*.h)
# log_stderr.o first, as an object: the suites' log lines go to stderr (tests/kernel/log_stderr.c).
TEST_LIBS := $(BUILD)/tests/kernel/log_stderr.o $(CLI_AR) $(AGENT_AR) $(VIEW_AR) $(CNI_AR) \
	     $(KHELP_AR) $(LIB)
BENCH_BIN := $(BUILD)/tests/bench_datapath
# bench_lookups: one map lookup of each kind, its own BPF object (tests/bench/lookups.bpf.c).
LOOKUPS_OBJ  := $(BUILD)/tests/lookups.bpf.o
LOOKUPS_SKEL := $(BUILD)/tests/lookups.skel.h
LOOKUPS_BIN  := $(BUILD)/tests/bench_lookups

# The C sources clang-format keeps in shape (.clang-format; clang-format 14).
#> CLANG_FORMAT clang-format of format and format-check, version 14
CLANG_FORMAT ?= clang-format
FORMAT_SRC := $(wildcard user/*/*.[ch] include/*.h bpf/*.[ch] tests/*/*.[ch] tests/kernel/datapath/*.[ch])

SETUP_STAMP := $(BUILD)/.setup-done

.DELETE_ON_ERROR:
.PHONY: all deps setup check check-lib check-layers check-headers check-docs format format-check test vmtest bench bench-node clean demo \
	demo-clean image check-image install help

# The targets that run what they build as root install what is missing first; any other build
# only checks (scripts/check-deps.sh names the missing packages) and never needs root.
NEEDS_SETUP := $(filter check test vmtest demo bench bench-node image check-image,$(MAKECMDGOALS))

#> all build everything into BUILD (the default; no root: names the packages missing)
all: $(RUNWALL) $(FAULT_BIN) $(CNI_BIN) $(UNIT_BIN) $(KERN_BIN) $(BENCH_BIN) $(LOOKUPS_BIN)

# The reference model, differential test, fuzzers and sanitizer build (issue 13).
include tests/proof.mk

# Installs the Debian packages the build and the tests need and mounts bpffs (root; idempotent).
#> setup install the Debian packages the build and the tests need, mount bpffs (root)
setup: $(SETUP_STAMP)
$(SETUP_STAMP): scripts/setup.sh tests/manifests/package-lock.json tests/logql/package-lock.json
	$(Q)scripts/setup.sh
	$(Q)mkdir -p $(BUILD) && touch $@

#> deps check the build dependencies (scripts/check-deps.sh)
deps: $(if $(NEEDS_SETUP),$(SETUP_STAMP))
	$(Q)scripts/check-deps.sh

$(BUILD):
	$(Q)mkdir -p $@

$(BPF_OBJ): $(BPF_SRC) $(BPF_HDRS) | deps $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@.tmp.o
	$(Q)$(BPFTOOL) gen object $@ $@.tmp.o
	$(Q)rm -f $@.tmp.o

$(SKEL): $(BPF_OBJ)
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name runwall_bpf > $@

$(BUILD)/lib/%.o: user/lib/%.c | $(SKEL)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $(LIB_INC) -c $< -o $@

$(BUILD)/tests/faults/apply.o: user/lib/apply.c | $(SKEL)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) -DRW_TEST_FAULTS $(LIB_INC) -c $< -o $@

$(BUILD)/cli/%.o: user/cli/%.c | $(SKEL)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $(CLI_INC) -c $< -o $@

# The page of the HTTP view (user/view/view.html), embedded into the binary.
$(BUILD)/view_page.h: user/view/view.html | deps
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)xxd -i -n rw_view_page $< > $@

$(BUILD)/view/%.o: user/view/%.c | $(SKEL) $(BUILD)/view_page.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $(VIEW_INC) -c $< -o $@

$(BUILD)/agent/%.o: user/agent/%.c | $(SKEL)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $(AGENT_INC) -c $< -o $@

$(BUILD)/cni/%.o: user/cni/%.c | $(SKEL)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $(LIB_INC) -Iuser/cni -c $< -o $@

$(LIB): $(LIB_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(CLI_AR): $(filter-out %/main.o,$(CLI_OBJ))
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(AGENT_AR): $(AGENT_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(VIEW_AR): $(VIEW_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(RUNWALL): $(BUILD)/cli/main.o $(CLI_AR) $(AGENT_AR) $(VIEW_AR) $(LIB)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

$(FAULT_LIB): $(filter-out %/apply.o,$(LIB_OBJ)) $(BUILD)/tests/faults/apply.o
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(FAULT_BIN): $(BUILD)/cli/main.o $(CLI_AR) $(AGENT_AR) $(VIEW_AR) $(FAULT_LIB)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# runwall-cni's parts but main.o, for the unit tests (rw_cni_parse, the conflist edit).
$(CNI_AR): $(filter-out %/main.o,$(CNI_OBJ))
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# runwall-cni is copied onto the host and run there by the container runtime, so it carries its
# libraries: libbpf, libelf, zlib and jansson are linked in. Debian ships no static libmnl, so
# libmnl and glibc (2.34 symbols at most: Amazon Linux 2023's) are what it asks of the host.
CNI_LDLIBS := -Wl,-Bstatic -lbpf -lelf -lz -ljansson -Wl,-Bdynamic -lmnl
$(BUILD)/runwall-cni: $(CNI_OBJ) $(LIB)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(CNI_LDLIBS) -o $@

# The boundary: link every member of librunwall.a, and nothing else of runwall's, into a program.
# An undefined reference (to rw_g, rw_fail, cmd_*, anything of a front end's) fails the link.
#> check-lib librunwall.a references only itself and system libraries
check-lib: $(LIB)
	$(call msg,CHECK,$(LIB) references only itself and system libraries)
	$(Q)echo 'int main(void) { return 0; }' > $(BUILD)/check-lib.c
	$(Q)$(CC) $(BUILD)/check-lib.c -Wl,--whole-archive $(LIB) -Wl,--no-whole-archive $(LDLIBS) \
		-o $(BUILD)/check-lib || { echo "librunwall.a must not reference the agent or the CLI" >&2; exit 1; }
	$(Q)rm -f $(BUILD)/check-lib $(BUILD)/check-lib.c

# Every layer, as check-lib does for the library: link each archive whole with only what it may
# use, so that a reference to anything else fails the link. The view may use the library; the
# agent the view and the library; the CLI the view, the library and, of the agent, rw_agent_run()
# alone (the link gets a stand-in that defines only that: the real one is the agent archive's,
# which the runwall binary links after the CLI's); runwall-cni the library. No layer may use a
# sibling, and nothing below may use what is above it. The CLI's sources may include, of the
# agent's headers, agent_run.h alone.
LAYER_MAIN := $(BUILD)/check-layers/main.c
LAYER_STUB := $(BUILD)/check-layers/agent_entry.c
define layer_link
	$(Q)$(CC) $(1) -Wl,--whole-archive $(2) -Wl,--no-whole-archive $(3) $(LDLIBS) \
		-o $(BUILD)/check-layers/a.out || { echo "check-layers: $(4)" >&2; exit 1; }
endef
#> check-layers view, agent, CLI and CNI archives reference only the layers below them
check-layers: $(LIB) $(VIEW_AR) $(AGENT_AR) $(CLI_AR) $(BUILD)/cli/main.o $(CNI_AR) $(CNI_OBJ)
	$(call msg,CHECK,view -> lib; agent -> view+lib; cli -> view+lib+rw_agent_run; cni -> lib)
	$(Q)mkdir -p $(BUILD)/check-layers
	$(Q)echo 'int main(void) { return 0; }' > $(LAYER_MAIN)
	$(Q)echo 'int rw_agent_run(void) { return 0; }' > $(LAYER_STUB)
	$(call layer_link,$(LAYER_MAIN),$(VIEW_AR),$(LIB),librunwall-view.a must reference only the library)
	$(call layer_link,$(LAYER_MAIN),$(AGENT_AR),$(VIEW_AR) $(LIB),librunwall-agent.a must reference only the view and the library)
	$(call layer_link,$(BUILD)/cli/main.o $(LAYER_STUB),$(CLI_AR),$(VIEW_AR) $(LIB),the CLI must reference only the view$(,) the library and rw_agent_run())
	$(call layer_link,$(filter %/main.o,$(CNI_OBJ)),$(CNI_AR),$(LIB),runwall-cni must reference only the library)
	$(Q)! grep -n '#include "' user/cli/*.c user/cli/*.h | grep -v '"agent_run.h"' | \
		grep -F "$$(cd user/agent && ls *.h | sed 's/.*/"&"/')" || \
		{ echo "check-layers: user/cli includes an agent header other than agent_run.h" >&2; exit 1; }
	$(Q)rm -rf $(BUILD)/check-layers

# Each kernel header compiles alone and first (twice: its guard), so that no include order in
# runwall.bpf.c is load-bearing: every bpf/*.h includes what it uses. Its API block names what
# it offers and needs (scripts/check-bpf-api.py).
#> check-headers each bpf/*.h compiles alone and its API block (offers, needs) is true
check-headers: | deps
	$(call msg,CHECK,each bpf/*.h compiles alone)
	$(Q)for h in $(notdir $(wildcard bpf/*.h)); do \
		printf '#include "%s"\n#include "%s"\n' $$h $$h | \
			$(CLANG) $(BPF_CFLAGS) -Wno-unused-function -fsyntax-only -x c - || \
			{ echo "check-headers: bpf/$$h does not compile on its own" >&2; exit 1; }; \
	done
	$(Q)scripts/check-bpf-api.py

# `make format` rewrites the sources in place; `make format-check` (run by `make check`) fails,
# naming file and line, when any of them has drifted.
#> format rewrite the C sources with clang-format
format:
	$(Q)$(CLANG_FORMAT) -i $(FORMAT_SRC)

#> format-check fail when a C source differs from .clang-format
format-check:
	$(call msg,FORMAT,C sources under user/ include/ bpf/ tests/)
	$(Q)$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_SRC) || \
		{ echo "make format-check: run \`make format\` and commit the result" >&2; exit 1; }

$(BUILD)/tests/kernel/%.o: tests/kernel/%.c | $(SKEL)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $(TEST_INC) -c $< -o $@

$(KHELP_AR): $(KHELP_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# cmocka: one binary per module; -Werror=unused-function makes a test left out of tests[] fail.
# TEST_LIBS is in layer order (check-layers), so one pass of the linker resolves them.
$(BUILD)/tests/unit/test_%: tests/unit/test_%.c $(TEST_LIBS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $(TEST_INC) -Werror=unused-function $< $(TEST_LIBS) $(LDLIBS) -lcmocka -o $@

# test_netlibs runs against libraries of its own: a libcurl with one name and a libmicrohttpd
# that is no library.
FAKELIBS := $(BUILD)/tests/unit/fakelibs
$(BUILD)/tests/unit/test_netlibs: $(FAKELIBS)/libcurl.so.4 $(FAKELIBS)/libmicrohttpd.so.12
$(FAKELIBS)/libcurl.so.4: tests/unit/fake_libcurl.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -fPIC -shared -Wl,-soname,libcurl.so.4 $< -o $@
$(FAKELIBS)/libmicrohttpd.so.12:
	$(Q)mkdir -p $(@D) && printf 'not a library\n' > $@

$(BUILD)/tests/kernel/test_%: tests/kernel/test_%.c $(TEST_LIBS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $(TEST_INC) -Werror=unused-function $< $(TEST_LIBS) $(LDLIBS) -lcmocka -o $@

$(BUILD)/tests/kernel/datapath/%.o: tests/kernel/datapath/%.c | $(SKEL)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) -DRW_TEST_FAULTS $(TEST_INC) -Itests/kernel/datapath -Werror=unused-function -c $< -o $@

$(BUILD)/tests/kernel/test_datapath: tests/kernel/test_datapath.c $(DP_OBJ) $(TEST_LIBS) $(FAULT_LIB)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) -DRW_TEST_FAULTS $(TEST_INC) -Itests/kernel/datapath -Werror=unused-function $< \
		$(DP_OBJ) $(patsubst $(LIB),$(FAULT_LIB),$(TEST_LIBS)) $(LDLIBS) -lcmocka -o $@

$(BENCH_BIN): tests/bench/bench_datapath.c $(TEST_LIBS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $(TEST_INC) $< $(TEST_LIBS) $(LDLIBS) -o $@

$(LOOKUPS_OBJ): tests/bench/lookups.bpf.c tests/bench/lookups.h bpf/map_defs.h bpf/ranges.h include/runwall.h | deps $(BUILD)
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -Itests/bench -c $< -o $@.tmp.o
	$(Q)$(BPFTOOL) gen object $@ $@.tmp.o
	$(Q)rm -f $@.tmp.o

$(LOOKUPS_SKEL): $(LOOKUPS_OBJ)
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name lookups_bpf > $@

$(LOOKUPS_BIN): tests/bench/bench_lookups.c tests/bench/bench.h tests/bench/lookups.h include/runwall.h \
		$(LOOKUPS_SKEL)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Iinclude -Itests/bench -I$(BUILD)/tests $< -lbpf -lelf -lz -ljansson -o $@

# The benchmarks (tests/bench/run.sh): per-packet cost, lookups, veth throughput, apply, events,
# memory.
# A table with each target on stdout, JSON in $(BUILD)/bench.json. Not part of `make check`.
#> bench the benchmarks (tests/bench/run.sh), results in BUILD/bench.json (root)
bench: setup all
	$(Q)tests/bench/run.sh $(BUILD)

# A node at full density (tests/bench/node.sh, issue 36): 250 pods bound through runwall-cni,
# 1 000 PolicyWatch runs, traffic, CNI churn, claims at 50 and 300 a second. A table on stdout,
# JSON in $(BUILD)/bench-node.json; NODE_ARGS=--quick for 20 pods and 10 s phases.
#> bench-node a node at full density (tests/bench/node.sh), BUILD/bench-node.json (root; NODE_ARGS=--quick)
bench-node: setup all
	$(Q)tests/bench/node.sh $(NODE_ARGS) $(BUILD)

# The test command: installs what is missing, builds without warnings, checks the library's and
# the layers' boundaries, the format and the docs, runs the fuzzers' short form (fuzz-short, tests/proof.mk:
# the committed inputs replayed, then a fixed-seed run), then every suite, two at a time (most of a
# suite's time is waiting; RW_JOBS=1 for one at a time).
#> check build, check-lib, check-layers, check-headers, format-check, fuzz-short, check-docs, then every suite (root)
check: setup all check-lib check-layers check-headers format-check fuzz-short
	$(Q)scripts/check-docs.sh $(BUILD)
	$(Q)tests/run.sh $(BUILD) --jobs $${RW_JOBS:-2}

# The docs against the tree and the binary: every relative link and #anchor of README.md,
# docs/ and tests/README.md resolves, and each docs/cli page's usage block is `runwall help`'s.
#> check-docs the docs against the tree and the binary (scripts/check-docs.sh)
check-docs: $(RUNWALL)
	$(Q)scripts/check-docs.sh $(BUILD)

#> test the same as check
test: check

#> VMTEST_KERNEL vmtest: the kernel image to boot instead of Debian's 6.1
# The kernel-facing suites in a VM: Debian's 6.1 kernel (no tcx: the clsact fallback) by default,
# any other with VMTEST_KERNEL=/path/to/bzImage.
#> vmtest the kernel suites in a VM: Debian 6.1, or VMTEST_KERNEL (root)
vmtest: setup all
	$(Q)scripts/vmtest.sh $(BUILD) $(if $(VMTEST_KERNEL),--kernel $(VMTEST_KERNEL))

# The container image, as an OCI archive under build/image with no registry and no daemon, and
# build/image/kustomization.yaml: manifests/ set to that image (docs/operations.md).
#> IMAGE_REPO image: the name the image is tagged with
IMAGE_REPO ?= localhost/runwall
#> image the OCI image archive and its kustomization under BUILD/image (root)
image: setup all
	$(Q)scripts/image.sh $(BUILD) $(IMAGE_REPO)

# The built image, mounted: binaries, libraries, setuid bits, entrypoint against the DaemonSet.
#> check-image build the image, then test it (root)
check-image: image
	$(Q)tests/image/test_image.sh $(BUILD)

# The run command: a demo node in network namespaces with the seed's default policy, left up for
# exploring with the CLI until `make demo-clean`.
#> demo a demo node in network namespaces, left up (root)
demo: setup all
	$(Q)scripts/demo.sh up $(BUILD)

#> demo-clean remove the demo
demo-clean:
	$(Q)scripts/demo.sh down

#> clean remove BUILD
clean:
	$(Q)rm -rf $(BUILD)

# What `make` installs: the binary and the CNI plugin, under DESTDIR (a staging root, as
# packagers use it) and PREFIX.
#> PREFIX install: the prefix (binaries in PREFIX/sbin)
PREFIX ?= /usr/local
#> DESTDIR install: a staging root prepended to every path
DESTDIR ?=
#> install install runwall and runwall-cni into DESTDIR/PREFIX/sbin
install: $(RUNWALL) $(CNI_BIN)
	$(Q)install -d $(DESTDIR)$(PREFIX)/sbin
	$(Q)install -m 0755 $(RUNWALL) $(CNI_BIN) $(DESTDIR)$(PREFIX)/sbin/

-include $(wildcard $(BUILD)/*/*.d $(BUILD)/tests/*/*.d $(BUILD)/tests/kernel/datapath/*.d)

# `make help` is made from the `#> NAME text` lines above each target and variable, in this
# file and tests/proof.mk, so that a new one is listed where it is defined. Names in capitals
# are variables, shown with the value in force.
#> help this list
help:
	@echo 'Targets (those marked root install packages, load programs or make namespaces):'
	@sed -n 's/^#> \([a-z][a-z-]*\) \(.*\)/\1\t\2/p' $(MAKEFILE_LIST) | \
		awk -F'\t' '{ printf "  %-15s %s\n", $$1, $$2 }'
	@echo
	@echo 'Variables (make VAR=value; now: the value in force):'
	@$(foreach v,$(shell sed -n 's/^#> \([A-Z][A-Z_]*\) .*/\1/p' $(MAKEFILE_LIST)),\
		printf '  %-19s %s (now: %s)\n' '$(v)' \
		"$$(sed -n 's/^#> $(v) //p' $(MAKEFILE_LIST) | head -n 1)" '$($(v))';)
	@echo
	@echo 'Environment of the suites and scripts: RW_WAIT_SCALE (every wait; 10 in the VM),'
	@echo 'RW_DIFF_SEED (the differential run: 1 in check), RW_SEED, RW_CHURN_SECONDS and'
	@echo 'RW_CHURN_RATE (netns/test_churn), RW_KEEP=1 (a netns suite keeps its files),'
	@echo 'RW_DEMO_PORT (make demo). See tests/README.md.'
