# tests/proof.mk: issue 13's checks (the reference model and its differential test, libFuzzer
# targets, the ASan/UBSan build), included by the Makefile. Kept apart so that the Makefile's
# own layout can change without touching this.

MODEL_SRC := tests/model/model.c
# Built beside the other kernel suites, so tests/run.sh runs it with them.
DIFF_BIN  := $(BUILD)/tests/kernel/test_differential
# `make check MODEL_PLANNED=1`: the model with the planned verdict order (see tests/model/model.h).
MODEL_PLANNED ?= 0
# `make check RW_DIFF_SEED=N` (an environment variable) replays one seed of the short run.
export RW_DIFF_SEED

all: $(DIFF_BIN)

$(DIFF_BIN): tests/model/test_differential.c $(MODEL_SRC) tests/model/model.h $(TEST_LIBS) $(TEST_HDRS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(TEST_INC) -Itests/model -DRW_MODEL_PLANNED=$(MODEL_PLANNED) \
		tests/model/test_differential.c $(MODEL_SRC) $(TEST_LIBS) $(LDLIBS) -o $@
