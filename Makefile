# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# NTRDMA top-level build.
#   make            install missing Debian packages, build every kernel and
#                   userspace part
#   make check      what CI runs: lint, unit tests, one test-bed run of each
#                   behaviour that must never regress (doc/testbed.md)
#   make check-full every test-bed run: both topologies, windowed mode, the
#                   Debian packages, Debian 13's 6.12 kernel, the soak
#   make check-6.12 make check-full with every run on Debian 13's 6.12 kernel
#   make check-fresh make demo in a fresh Debian 12 root (mmdebstrap): what a
#                   new user's first command meets
#   make demo       the main job on the emulated default (two hosts)
#   make lint       checkpatch --strict and sparse on the kernel code
#   make bench      measurements beside the alternatives, both topologies
#                   (scripts/bench.sh; results in build/bench/)
#   make deb        Debian packages into build/deb/: ntrdma-dkms (the modules,
#                   built by DKMS on install) and libntrdma1 (the provider)
#   make install    on a real host: the rdma-core provider (libntrdma-rdmav34.so
#                   into libibverbs' provider directory, ntrdma.driver into
#                   /etc/libibverbs.d) and the kernel modules, with the NTB
#                   core and hardware drivers where the kernel has no
#                   CONFIG_NTB; DESTDIR honoured

ROOT      := $(CURDIR)

ifndef NTRDMA_DEPS_DONE
# Stage 1. Nothing here reads what a package installs: every target that
# needs packages installs them first (deps), then runs in a sub-make, which
# reads the kernel, its configuration and the tools afresh.
NEEDS_DEPS := all kernel-ext modules user check check-full check-6.12 unit \
	      demo lint sparse checkpatch bench install fuzz soak deb
NO_DEPS    := clean dkms-modules check-fresh
.PHONY: deps $(NEEDS_DEPS) $(NO_DEPS)
$(NEEDS_DEPS): deps
$(NEEDS_DEPS) $(NO_DEPS):
	+@$(MAKE) --no-print-directory NTRDMA_DEPS_DONE=1 $@
deps:
	@$(ROOT)/scripts/install-deps.sh
else
# Stage 2: the packages are installed.
KVER      ?= $(shell $(ROOT)/scripts/kver.sh)
KDIR      ?= /lib/modules/$(KVER)/build
BUILD     := $(ROOT)/build
KEXT      := $(BUILD)/kernel
USERBUILD := $(BUILD)/user
export KVER KDIR

# Out of tree the CONFIG_ symbols come from here.
# The verbs face needs the kernel's user-space RDMA support (ib_uverbs).
# The kernel verbs test module goes with the verbs face.
VERBS    := $(if $(shell grep -s '^CONFIG_INFINIBAND_USER_ACCESS=' $(KDIR)/.config),y,n)
# The build tree is the test bed's: it carries the selftests' fault
# injection (TEST_HOOKS=n leaves it out; make install always does).
TEST_HOOKS ?= y
KCONFIG := CONFIG_NTB_HW_IVSHMEM=m CONFIG_NTRDMA=m CONFIG_NTRDMA_VERBS=$(VERBS) \
	   CONFIG_NTRDMA_KVERBS_TEST=$(if $(filter y,$(VERBS)),m,n) \
	   CONFIG_NTRDMA_TEST_HOOKS=$(TEST_HOOKS)
KMAKE    = $(MAKE) -C $(KDIR) M=$(ROOT) $(KCONFIG) \
	   KBUILD_EXTRA_SYMBOLS=$(KEXT)/Module.symvers

.PHONY: all kernel-ext modules user check check-full check-6.12 check-fresh unit \
	demo lint sparse checkpatch clean bench install fuzz soak deb dkms-modules

all: modules user

kernel-ext:
	@test -f $(KDIR)/.config || { echo "make: no kernel build tree at $(KDIR)" \
		"(scripts/install-deps.sh installs linux-headers-amd64; KVER='$(KVER)')" >&2; exit 1; }
	+@$(ROOT)/scripts/build-kernel-ext.sh

modules: kernel-ext
	+$(KMAKE) modules
	@$(ROOT)/scripts/faces.sh $(ROOT)/ntrdma.ko $(KDIR)/.config

user:
	cmake -S $(ROOT) -B $(USERBUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(USERBUILD) -j$$(nproc)
	@$(ROOT)/scripts/pyverbs-suite.sh

check: all
	@$(ROOT)/scripts/check.sh

check-full: all
	@CHECK_TIER=full $(ROOT)/scripts/check.sh

# A fresh machine: a minimal Debian 12 root, a clean clone of HEAD, make demo.
check-fresh:
	@$(ROOT)/scripts/check-fresh.sh

# make check with every test-bed run on Debian 13's kernel (6.12, from
# bookworm-backports; scripts/kernel-6.12.sh installs and builds for it).
check-6.12: all
	@CHECK_TIER=full CHECK_K612=all $(ROOT)/scripts/check.sh

unit: user
	cd $(USERBUILD) && ctest --output-on-failure

# The full forms of the fuzzers (make check runs them short): the peer
# fuzzer and the user fuzzer, 15 minutes each, in the loopback test bed.
fuzz: all
	$(ROOT)/scripts/testbed.sh --topo loop --flat 1 --timeout 3000 --out $(BUILD)/fuzz -- \
		env FUZZ_SECS=900 NTRDMA_USER_FUZZ_SECS=900 VERBS_FILTER='UserFuzz.*' NTRDMA_TEST_TIMEOUT=2700 \
		selftests/run.sh ntrdma_fault_test.sh ntrdma_ib_test.sh

# The full form of the soak: 100 cycles of the peer going away under load,
# 30 of them peer-guest kills (pair), in both topologies.
soak: all
	for topo in loop pair; do \
		TESTBED_TCG_THREAD=single $(ROOT)/scripts/testbed.sh --topo $$topo --flat 1 --timeout 7200 --out $(BUILD)/soak-$$topo -- \
			env SOAK_CYCLES=100 SOAK_KILLS=30 NTRDMA_TEST_TIMEOUT=7000 selftests/run.sh ntrdma_soak_test.sh || exit 1; \
	done

demo: all
	@$(ROOT)/scripts/demo.sh

bench: all
	@$(ROOT)/scripts/bench.sh

sparse: kernel-ext
	+$(KMAKE) C=2 modules

checkpatch: kernel-ext
	@$(ROOT)/scripts/checkpatch.sh

lint: checkpatch sparse

deb: user
	@$(ROOT)/scripts/mkdeb.sh

# What DKMS runs in its copy of the sources (scripts/deb/dkms.conf.in): the
# NTB modules (core, hardware drivers, clients) from the packaged
# linux-source subset and our modules; no test hooks, no apt-get.
dkms-modules:
	+@KEXT_NTB_ONLY=1 $(ROOT)/scripts/build-kernel-ext.sh
	+$(KMAKE) CONFIG_NTRDMA_TEST_HOOKS=n CONFIG_NTRDMA_KVERBS_TEST=n modules

install: all
	DESTDIR=$(DESTDIR) cmake --install $(USERBUILD) --component provider
	+$(KMAKE) CONFIG_NTRDMA_TEST_HOOKS=n modules
	+$(KMAKE) CONFIG_NTRDMA_TEST_HOOKS=n INSTALL_MOD_PATH=$(DESTDIR) INSTALL_MOD_DIR=extra/ntrdma modules_install
	$(ROOT)/scripts/build-kernel-ext.sh --install $(DESTDIR)
	$(if $(DESTDIR),,depmod -a $(KVER))

clean:
	-$(KMAKE) clean
	rm -rf $(BUILD)
endif
