# moe-conform build. Plain GNU make: `make`, `make check`, `make check-asan`,
# `make check-exhaustive`, `make deps`, `make clean`. CUDA sources are
# compiled for sm_90a when nvcc is on PATH and skipped (with a note) when not.

CC      ?= gcc
NVCC    ?= nvcc
BUILD   ?= build
# Reference numerics (DESIGN section 5): no contraction, no fast-math, SSE
# arithmetic on x86-64, so results do not depend on compiler or -O level.
OPT     ?= -O2
REFFLAGS := -std=c11 $(OPT) -ffp-contract=off -fno-fast-math -Wall -Wextra -Werror
ifeq ($(shell uname -m),x86_64)
REFFLAGS += -mfpmath=sse
endif
SANFLAGS ?=
# OpenMP runs independent output rows in parallel; no result depends on
# the thread count (tests check 1 vs 2 threads).
OMPFLAGS := -fopenmp
CFLAGS  := $(REFFLAGS) $(SANFLAGS) $(OMPFLAGS) -D_POSIX_C_SOURCE=200809L -Iinclude -iquote reference
LDFLAGS := $(SANFLAGS) $(OMPFLAGS)
# Golden cases read case.json with cJSON and hash with OpenSSL's libcrypto.
LDLIBS  := -lcjson -lcrypto -lm
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)
# GPU test binaries link Check and subunit statically, so they run on a GPU
# machine that has only the CUDA driver and libc (cudart is static too).
CHECK_LIBDIR := $(shell pkg-config --variable=libdir check 2>/dev/null)
GPU_CHECK_LIBS := $(CHECK_LIBDIR)/libcheck_pic.a $(CHECK_LIBDIR)/libsubunit.a -lrt -lm
NVCCFLAGS := -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a --fmad=false --prec-div=true --prec-sqrt=true --ftz=false --default-stream per-thread -Xcompiler -Wall -Iinclude -I.

# The CPU backend (optimized/cpu/) links OpenBLAS built with OpenMP.
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null)

REF_SRC    := $(wildcard reference/*.c reference/formats/*.c)
CPU_SRC    := $(wildcard optimized/cpu/*.c)
COMBOS_SRC := $(filter-out combos/main_%.c,$(wildcard combos/*.c))
ORACLE_SRC := tests/oracle/oracle.c
TEST_SRC   := $(wildcard tests/check_*.c)
TOOLS      := $(patsubst combos/main_%.c,$(BUILD)/moe-%,$(wildcard combos/main_*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
REF_OBJ    := $(call obj,$(REF_SRC))
COMBOS_OBJ := $(call obj,$(COMBOS_SRC))
CPU_OBJ    := $(call obj,$(CPU_SRC))
ORACLE_OBJ := $(call obj,$(ORACLE_SRC))
TESTS      := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))

empty :=
space := $(empty) $(empty)
HAVE_NVCC := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo yes)
CUDA_SRC  := $(wildcard optimized/cuda/*.cu)
CUDA_CSRC := $(wildcard optimized/cuda/*.c)
GPU_TEST_SRC := $(wildcard tests/gpu/check_*.cu)
ifeq ($(HAVE_NVCC),yes)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC)))
CUDA_OBJ  := $(patsubst %.cu,$(BUILD)/obj/%.o,$(CUDA_SRC)) $(call obj,$(CUDA_CSRC))
GPU_TESTS := $(patsubst tests/gpu/%.cu,$(BUILD)/tests/gpu/%,$(GPU_TEST_SRC))
# The CUDA backends (optimized/cuda/) with the CUDA runtime linked
# statically: the tools then run on a machine with only the driver, and
# report the backends as "no CUDA device" where there is none.
CUDA_LIB  := $(BUILD)/libmoe_cuda.a
CUDA_LINK := -Wl,--whole-archive $(CUDA_LIB) -Wl,--no-whole-archive -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++
endif

.PHONY: FORCE all run report nightly bench bench-ref check check-asan check-exhaustive check-determinism deps clean cuda run-tests run-tests-asan gpu-check gpu-check-run gpu-bundle gpu-sanitize
all: $(BUILD)/libmoe_ref.a $(BUILD)/libmoe_cpu.a $(BUILD)/libmoe_combos.a $(TOOLS) cuda

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Itests -Itests/oracle -MMD -MP -c $< -o $@

# the sweep's run metadata names the flags the reference was built with and
# the revision it was built from (with -dirty for uncommitted changes), not
# the revision of whatever checkout it later runs in: the header is rewritten
# only when that changes, so only the objects that print it (the sweep's and
# moe-bench's JSON meta) and their tests are rebuilt; characters outside
# [A-Za-z0-9._+-] (a tag may hold a quote) are dropped, so the value needs
# no escaping in the C string or the JSON that print it
$(BUILD)/obj/combos/cli_sweep.o: CFLAGS += -DMOE_BUILD_CFLAGS='"$(strip $(REFFLAGS) $(SANFLAGS) $(OMPFLAGS))"' -I$(BUILD)/gen
$(BUILD)/obj/combos/cli_sweep.o $(BUILD)/obj/tests/check_sweep.o: $(BUILD)/gen/moe_git_rev.h
$(BUILD)/obj/combos/cli_bench.o $(BUILD)/obj/tests/check_bench.o: $(BUILD)/gen/moe_git_rev.h
$(BUILD)/obj/tests/check_sweep.o $(BUILD)/obj/combos/cli_bench.o $(BUILD)/obj/tests/check_bench.o: CFLAGS += -I$(BUILD)/gen
# moe-bench's device grid names it too (its JSON's meta)
$(BUILD)/obj/optimized/cuda/bench_gpu_report.o: $(BUILD)/gen/moe_git_rev.h
$(BUILD)/obj/optimized/cuda/bench_gpu_report.o: NVCCFLAGS += -I$(BUILD)/gen
$(BUILD)/gen/moe_git_rev.h: FORCE
	@mkdir -p $(dir $@)
	@r=$$(git describe --always --dirty --abbrev=7 2>/dev/null | tr -cd 'A-Za-z0-9._+-'); \
	  printf '#define MOE_GIT_REV "%s"\n' "$${r:-unknown}" > $@.tmp; \
	  if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
FORCE:

$(BUILD)/libmoe_ref.a: $(REF_OBJ)
	@mkdir -p $(dir $@)
	ar crs $@ $^

$(BUILD)/libmoe_combos.a: $(COMBOS_OBJ)
	ar crs $@ $^

$(BUILD)/obj/optimized/cpu/%.o $(BUILD)/obj/combos/cli_bench.o: CFLAGS += $(BLAS_CFLAGS)
$(BUILD)/libmoe_cpu.a: $(CPU_OBJ)
	@mkdir -p $(dir $@)
	ar crs $@ $^

# Backends are found through weak references (combos/backends.c), which do
# not pull archive members in: the CPU library is linked whole. The CUDA
# library uses the combos' fused trace store (fast_trace.cu): combos again
# after it.
BACKEND_LIBS = -Wl,--whole-archive $(BUILD)/libmoe_cpu.a -Wl,--no-whole-archive

$(BUILD)/moe-%: $(BUILD)/obj/combos/main_%.o $(BUILD)/libmoe_combos.a $(BUILD)/libmoe_cpu.a $(BUILD)/libmoe_ref.a $(CUDA_LIB)
	$(CC) $(LDFLAGS) $< $(BUILD)/libmoe_combos.a $(BACKEND_LIBS) $(CUDA_LINK) $(BUILD)/libmoe_combos.a $(BUILD)/libmoe_ref.a \
	  $(LDLIBS) $(BLAS_LIBS) -o $@

# The fast path's plan rule is plain C (optimized/cuda/fast_plan.c): its
# suite links the object alone, so it builds and runs without nvcc.
$(BUILD)/tests/check_fx_plan: $(BUILD)/obj/optimized/cuda/fast_plan.o
$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(ORACLE_OBJ) $(BUILD)/libmoe_combos.a $(BUILD)/libmoe_cpu.a $(BUILD)/libmoe_ref.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $< $(filter-out $< $(ORACLE_OBJ),$(filter %.o,$^)) $(ORACLE_OBJ) $(BUILD)/libmoe_combos.a $(BACKEND_LIBS) $(BUILD)/libmoe_ref.a \
	  $(CHECK_LIBS) $(LDLIBS) $(BLAS_LIBS) -o $@

ifeq ($(HAVE_NVCC),yes)
cuda: $(CUDA_LIB) $(GPU_TESTS)
$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@
$(CUDA_LIB): $(CUDA_OBJ)
	@mkdir -p $(dir $@)
	ar crs $@ $^
# GPU suites: the CUDA library, the reference and the harness libraries;
# Check statically (GPU machines have no libcheck).
$(BUILD)/tests/gpu/%: tests/gpu/%.cu $(CUDA_LIB) $(ORACLE_OBJ) $(BUILD)/libmoe_combos.a $(BUILD)/libmoe_ref.a
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -pthread,-fopenmp -Itests -Itests/oracle $< $(ORACLE_OBJ) \
	  -Xlinker --whole-archive $(CUDA_LIB) -Xlinker --no-whole-archive $(BUILD)/libmoe_combos.a $(BUILD)/libmoe_ref.a \
	  $(GPU_CHECK_LIBS) $(LDLIBS) -o $@
else
cuda:
	@echo "note: $(NVCC) not found; skipped the CUDA tree ($(words $(CUDA_SRC)) .cu files) and $(words $(GPU_TEST_SRC)) GPU test binaries"
endif

# make run: the main job. Golden verify, the standard tier of the sweep on
# every backend (those not built or without a device are reported as
# skipped), the compatibility matrix and one HTML report, in $(BUILD)/run
# (reports/job.sh). make report re-renders it; make nightly runs the full
# tier into results/<date>-<rev>/ and compares with the previous nightly.
run: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) sh reports/job.sh run

report:
	@BUILD=$(BUILD) sh reports/job.sh report

nightly: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) sh reports/job.sh nightly

# make check: install what is missing, build, run every suite. A suite that
# exits 77 is a skip (no GPU); any other non-zero status fails the target.
check: deps
	@$(MAKE) --no-print-directory all $(TESTS)
	@$(MAKE) --no-print-directory run-tests

run-tests: $(TESTS) $(GPU_TESTS)
	@fail=0; pass=0; skip=0; \
	for t in $(TESTS) $(GPU_TESTS); do \
	  echo "== $$t"; \
	  MOE_BUILD=$(BUILD) $$t; rc=$$?; \
	  if [ $$rc -eq 0 ]; then pass=$$((pass+1)); \
	  elif [ $$rc -eq 77 ]; then skip=$$((skip+1)); echo "   (skipped: exit 77)"; \
	  else fail=$$((fail+1)); echo "   FAILED: exit $$rc"; fi; \
	done; \
	echo "suites: $$pass passed, $$fail failed, $$skip skipped"; \
	[ $$fail -eq 0 ]

# Same suites under AddressSanitizer + UBSan, in a separate build tree.
# Check's per-test timeouts are scaled for the slower instrumented code.
check-asan: deps
	@$(MAKE) --no-print-directory $(ASAN_VARS) all run-tests-asan

ASAN_VARS := BUILD=build/asan NVCC=no-nvcc-under-asan \
  SANFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=float-cast-overflow -fno-omit-frame-pointer -g"

run-tests-asan: $(TESTS)
	@CK_TIMEOUT_MULTIPLIER=10 ASAN_OPTIONS=detect_leaks=1 $(MAKE) --no-print-directory $(ASAN_VARS) run-tests

# Slow tier: every one of the 2^32 f32 inputs through every format of 8 bits
# or fewer and both 16-bit formats, against the oracle.
check-exhaustive: deps $(BUILD)/exhaustive_formats
	@time $(BUILD)/exhaustive_formats

$(BUILD)/exhaustive_formats: tests/exhaustive/exhaustive_formats.c $(ORACLE_OBJ) $(BUILD)/libmoe_ref.a
	$(CC) $(CFLAGS) -O3 -Itests -Itests/oracle $^ -lm -o $@

# The reference promises bits that depend on nothing but the inputs:
# moe-digest (tests/determinism/) built with gcc -O2, gcc -O0 and clang -O2,
# each run with 1 and 2 OpenMP threads, must print identical digests.
DET_CONFIGS := gcc:-O2 gcc:-O0 clang:-O2
check-determinism: deps
	@set -e; mkdir -p build/det; rm -f build/det/*.txt; \
	for c in $(DET_CONFIGS); do cc=$${c%%:*}; opt=$${c#*:}; d=build/det/$$cc$$opt; \
	  $(MAKE) --no-print-directory -s BUILD=$$d CC=$$cc OPT=$$opt $$d/moe-digest; \
	  for th in 1 2; do OMP_NUM_THREADS=$$th $$d/moe-digest > build/det/$$cc$$opt.t$$th.txt; done; \
	done; \
	ref=build/det/gcc-O2.t1.txt; \
	for f in build/det/*.txt; do \
	  cmp -s $$ref $$f || { echo "determinism: $$f differs from $$ref:"; diff $$ref $$f | head -20; exit 1; }; \
	done; \
	echo "determinism: $$(wc -l < $$ref) cases, identical digests from $$(ls build/det/*.txt | wc -l) runs ($(DET_CONFIGS) x 1, 2 threads)"

# make bench: on a machine with an NVIDIA GPU and a CUDA build, the
# cuda-fast grid (every standard shape x M 1..16384 x the four bf16 / fp8
# schemes) against its peers, the torch peer when python3 has torch, merged
# with floors and goals and rendered, under OUT (default $(BUILD)/bench-gpu;
# reports/bench_gpu.sh, BENCH_GPU_ARGS overrides the selection); make
# bench-gpu-run does the same with binaries built elsewhere (no build step).
# Elsewhere: moe-bench on the CPU backend against the reference and the
# OpenBLAS sgemm ceiling at Qwen3-30B-A3B's shape, M = 256, bf16 and block
# fp8 (the README's performance figures), JSON in $(BUILD)/bench.json for
# the report. Not a test. BENCH_ARGS overrides the CPU selection.
BENCH_ARGS ?= --backend cpu,ref --shape qwen3-30b-a3b --m 256 --scheme bf16,fp8_wblock128_agroup128
BENCH_OUT = $(if $(OUT),$(OUT),$(BUILD)/bench-gpu)
bench: deps
	@$(MAKE) --no-print-directory all
	@if [ "$(HAVE_NVCC)" = yes ] && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then \
	  BUILD=$(BUILD) sh reports/bench_gpu.sh $(BENCH_OUT); \
	else \
	  echo "$(BUILD)/moe-bench $(BENCH_ARGS) --json $(BUILD)/bench.json"; \
	  $(BUILD)/moe-bench $(BENCH_ARGS) --json $(BUILD)/bench.json; \
	fi

.PHONY: bench-gpu-run
bench-gpu-run:
	@BUILD=$(BUILD) sh reports/bench_gpu.sh $(BENCH_OUT)

# Reference speed at the standard shapes (not a test; numbers for the README).
bench-ref: $(BUILD)/bench_ref_forward
	$(BUILD)/bench_ref_forward 64

$(BUILD)/bench_ref_forward: $(BUILD)/obj/tests/bench/bench_ref_forward.o $(BUILD)/libmoe_ref.a
	$(CC) $(LDFLAGS) $^ -lm -o $@

$(BUILD)/moe-digest: $(BUILD)/obj/tests/determinism/digest.o $(BUILD)/libmoe_ref.a
	$(CC) $(LDFLAGS) $^ -lm -o $@

# make gpu-check OUT=dir: on a machine with an NVIDIA GPU, build the CUDA
# tree and run the GPU suites, moe-golden verify and the quick and standard
# sweep tiers on cuda-conform, and the per-stage bench
# (tests/gpu/gpu_check.sh). A GPU machine without the build dependencies
# gets the binaries built here: make gpu-bundle, carry $(BUILD)/tests/gpu,
# the tools and $(BUILD)/gpu-lib there and run make gpu-check-run OUT=dir.
gpu-check: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory gpu-check-run

gpu-check-run:
	@BUILD=$(BUILD) OUT=$(OUT) sh tests/gpu/gpu_check.sh

# make gpu-sanitize OUT=dir: compute-sanitizer memcheck, racecheck,
# initcheck and synccheck (--error-exitcode) over the GPU suites in small
# mode, on a GPU machine (prebuilt binaries as for gpu-check-run).
gpu-sanitize:
	@BUILD=$(BUILD) OUT=$(OUT) STEPS=sanitize sh tests/gpu/gpu_check.sh

# The shared libraries the tools load that a GPU machine may lack, copied
# from this machine into $(BUILD)/gpu-lib (gpu_check.sh puts it on the
# library path). The H200 machines (Ubuntu 24.04, glibc 2.39) have
# libcrypto, OpenBLAS and libgomp but not cJSON; GPU_BUNDLE_LIBS adds more.
GPU_BUNDLE_LIBS ?= libcjson
gpu-bundle: all
	@mkdir -p $(BUILD)/gpu-lib
	@ldd $(TOOLS) | awk '/=> \// {print $$3}' | sort -u | grep -E '$(subst $(space),|,$(strip $(GPU_BUNDLE_LIBS)))' | \
	  xargs -r -I{} cp -L {} $(BUILD)/gpu-lib/
	@ls $(BUILD)/gpu-lib

# make check-mutants: the planted faults of tests/mutants/list.txt, each
# patched into a copy of the sources under $(BUILD)/mutants (the working
# tree is never touched) and required to fail its kill command; fails
# below a 95% kill rate, on an unexplained survivor or on a stale patch.
# tests/mutants/run.sh --gpu-build DIR builds the CUDA mutants' suites.
.PHONY: check-mutants
check-mutants: deps
	@BUILD=$(BUILD) bash tests/mutants/run.sh

deps:
	@sh .ci/deps

clean:
	rm -rf build

# Fault injection (tests/check_fault_inject.c, issue 9): the suite's
# __wrap_ allocator fails the N-th allocation the project's own code makes.
FAULT_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=posix_memalign,--wrap=strdup
$(BUILD)/tests/check_fault_inject: LDFLAGS += $(FAULT_WRAP)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- fuzzing (issue 9): libFuzzer targets tests/fuzz/fuzz_<t>.c ----------
# make fuzz: builds the libraries with clang + ASan/UBSan + coverage into
# $(BUILD)/fuzz/lib, each target into $(BUILD)/fuzz/fuzz_<t>, runs it for
# FUZZ_SECONDS on a scratch corpus seeded from tests/fuzz/<t>/ (one process,
# crashes under $(BUILD)/fuzz/artifacts/) and merges back into
# tests/fuzz/<t>/ only the inputs that reach new edges (-merge=1; hit
# counts ignored, -use_counters=0), which keeps the committed corpus small.
# make check replays every corpus through the standalone driver
# tests/fuzz/replay_main.c (suite check_fuzz), so the corpora are
# regression tests without libFuzzer, under ASan too.
FUZZ_TARGETS ?= npy golden cli formats
FUZZ_SECONDS ?= 600
FUZZ_CC      ?= clang
FUZZ_ARGS    ?=
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g
# clang warns where gcc does not (missing-field-initializers on designated
# initializers); gcc's -Werror build is the one that guards warnings.
FUZZ_WNO     := -Wno-error
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_LIBDIR  := $(FUZZ_DIR)/lib
FUZZ_REPLAY  := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/fuzz-replay/fuzz_%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_LINK     = $(1)/libmoe_combos.a -Wl,--whole-archive $(1)/libmoe_cpu.a -Wl,--no-whole-archive $(1)/libmoe_ref.a \
                $(LDLIBS) $(BLAS_LIBS)
.PHONY: fuzz fuzz-build

$(BUILD)/fuzz-replay/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c tests/fuzz/fuzz_util.h $(ORACLE_OBJ) \
  $(BUILD)/libmoe_combos.a $(BUILD)/libmoe_cpu.a $(BUILD)/libmoe_ref.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Itests/oracle -iquote combos $< tests/fuzz/replay_main.c $(ORACLE_OBJ) $(LDFLAGS) \
	  $(call FUZZ_LINK,$(BUILD)) -o $@
$(BUILD)/tests/check_fuzz: $(FUZZ_REPLAY)

fuzz-build: deps
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_LIBDIR) CC=$(FUZZ_CC) NVCC=none \
	  SANFLAGS="$(FUZZ_SAN) -fsanitize=fuzzer-no-link $(FUZZ_WNO)" $(FUZZ_LIBDIR)/libmoe_ref.a $(FUZZ_LIBDIR)/libmoe_combos.a \
	  $(FUZZ_LIBDIR)/libmoe_cpu.a $(FUZZ_LIBDIR)/obj/$(ORACLE_SRC:.c=.o)
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "fuzz: building $(FUZZ_DIR)/fuzz_$$t"; \
	  $(FUZZ_CC) $(REFFLAGS) $(FUZZ_SAN) $(FUZZ_WNO) -fsanitize=fuzzer $(OMPFLAGS) -D_POSIX_C_SOURCE=200809L -Iinclude \
	    -iquote reference -iquote combos -Itests -Itests/oracle tests/fuzz/fuzz_$$t.c \
	    $(FUZZ_LIBDIR)/obj/$(ORACLE_SRC:.c=.o) $(call FUZZ_LINK,$(FUZZ_LIBDIR)) -o $(FUZZ_DIR)/fuzz_$$t; \
	done

# Scratch files go to /dev/shm where it is writable: file-heavy targets
# (npy, golden) run an order of magnitude faster there than on disk.
fuzz: fuzz-build
	@set -e; [ -w /dev/shm ] && export TMPDIR=/dev/shm; \
	for t in $(FUZZ_TARGETS); do \
	  w=$(FUZZ_DIR)/work_$$t; mkdir -p $$w $(FUZZ_DIR)/artifacts tests/fuzz/$$t; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s (log $(FUZZ_DIR)/$$t.log)"; \
	  $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t- $(FUZZ_ARGS) $$w tests/fuzz/$$t > $(FUZZ_DIR)/$$t.log 2>&1 || \
	    { tail -40 $(FUZZ_DIR)/$$t.log; echo "fuzz: $$t found a problem (input under $(FUZZ_DIR)/artifacts/)"; exit 1; }; \
	  grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec|^stat::peak_rss_mb' $(FUZZ_DIR)/$$t.log; \
	  before=$$(ls tests/fuzz/$$t | wc -l); \
	  $(FUZZ_DIR)/fuzz_$$t -merge=1 -use_counters=0 tests/fuzz/$$t $$w > $(FUZZ_DIR)/$$t.merge.log 2>&1; \
	  echo "fuzz: $$t corpus $$before -> $$(ls tests/fuzz/$$t | wc -l) files, $$(cat tests/fuzz/$$t/* | wc -c) bytes"; \
	done
