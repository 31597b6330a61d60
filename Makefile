# vmce: `make demo` shows the whole path once; `make check` runs every test.
# Both install the Debian packages they need and fetch the guest kernel.

BUILD      ?= build
MESON_DIR  := $(BUILD)/meson
KERNEL_DIR := $(BUILD)/guest-kernel
IMAGE      := $(BUILD)/images/guest.cpio.gz
PREFIX     ?= /usr/local
DESTDIR    ?=

export VMCE_BUILD_DIR := $(abspath $(BUILD))

KERNELS_DIR := $(BUILD)/kernels

.PHONY: all deps deb host-root rasdaemon-13 fuzz kernel image-arm64 kernel-src kernel-src-6.12 kernel-src-7.3 kernel-6.12 kernel-7.3 kernels kernels-all guest-image build image qemu qemu-10.0 qemu-10.2 qemu-10.2-arm64 qemus-check qemu-debian-10.0 qemu-debian-11.1 armlab-qemus armlab qemus demo check check-all unit e2e hostlab hostlab-matrix hostlab-migrate hostlab-salvage hostlab-image hostlab-full bench bench-campaign bench-kernels bench-storm bench-libvirt bench-libvirt-restarts bench-hostlab bench-table campaign install clean help

all: build image

help:
	@echo "make demo     boot a guest, poison a page under a guest process, show the recovery;"
	@echo "              then the quick campaign and its report"
	@echo "make check    every test (unit, fuzz corpus replay, end to end; unit and forwarding"
	@echo "              again under ASan and UBSan; the Arm64 guest on vmce-10.2-arm64), but suite"
	@echo "              check-all (what needs vmce-10.2)"
	@echo "make check-all  make check and suite check-all (the QEMU series' checks and end-to-end"
	@echo "              runs on vmce-10.2, the Arm64 lab), with every QEMU and kernel built (make qemus,"
	@echo "              make kernels-all, make armlab-qemus)"
	@echo "make build    vmced, vmcectl, the guest tools and the tests (meson, in $(MESON_DIR))"
	@echo "make image    Debian's guest kernel, the guest initramfs and the data disk (make with no"
	@echo "              goal: build and image)"
	@echo "make unit     the unit tests and the fuzz corpora replayed (no VM, no root)"
	@echo "make e2e      the end-to-end tests (real QEMU, the real guest kernel; root)"
	@echo "make fuzz     each libFuzzer target for 10^6 runs (clang; not in make check)"
	@echo "make hostlab  real host memory errors in a host inside a VM: the QEMU comparison table,"
	@echo "              in the Debian 12 L1 and in the Debian 13 L1 (debian-10.0)"
	@echo "              (hostlab-matrix); a live migration after a real error, TCG and KVM L2"
	@echo "              in both L1s (hostlab-migrate); a lost huge page salvaged (hostlab-salvage);"
	@echo "              an operator's image under KVM L2 (hostlab-image); and full.ini real vs"
	@echo "              simulated on every guest kernel, and under KVM L2 (hostlab-full); and the"
	@echo "              Arm64 lab: QEMU's own Arm64 behaviour under real KVM (armlab)"
	@echo "make armlab   QEMU's own answer to real host memory errors on Arm64 under KVM: an"
	@echo "              emulated Arm64 L1 host (TCG) whose KVM runs the Arm64 guest, under"
	@echo "              Debian 12's, Debian 13's and trixie-backports' arm64 QEMUs, AO and AR"
	@echo "make armlab-qemus  those arm64 QEMUs, each with its own libraries (cached per machine)"
	@echo "make hostlab-migrate  run/hostlab --migrate in both L1s, TCG and KVM L2: the poisoned page"
	@echo "              carried (UFFDIO_POISON on 6.12, PROT_NONE on 6.1) or refused (KVM on 6.1)"
	@echo "make hostlab-salvage  run/hostlab --backing hugetlb-2M|hugetlb-1G --hugepage salvage, TCG and"
	@echo "              KVM L2 in the Debian 13 L1: the raw page alone lost; Debian 12's 6.1: all"
	@echo "make hostlab-image  the debian-12 image (make guest-image) as a KVM L2 guest in L1, a"
	@echo "              read-only disk of L1's: an AO and an AR case with real host errors, through qga"
	@echo "make hostlab-full  full.ini with real host errors in the lab on every guest kernel, beside"
	@echo "              the same cases simulated here, then under KVM L2"
	@echo "make campaign the quick campaign: every guest page type, judged, an HTML report"
	@echo "make bench    every figure (boot, the injection tail, the demo's latency per QEMU, vmced"
	@echo "              attached vs not, storms of 10^4 errors into 1 and 16 guests, 256 QEMUs"
	@echo "              direct and 256 libvirt domains, libvirtd restarts under load, live migration"
	@echo "              with 0 to 10^4 poisoned pages per QEMU and a libvirt host's drain, the host"
	@echo "              lab's KVM overhead and P1, the Arm64 guest's boot, restore and judged matrix"
	@echo "              (run/campaigns/arm64.ini)), then one table"
	@echo "              (bench-all.json)"
	@echo "make bench-storm  10^5 errors into one guest through inject-mce: errors/s with nothing"
	@echo "              lost, vmced's RSS as it goes, the guest's verdict"
	@echo "make deb      the Debian packages in build/deb, and lintian on them (cached per machine)"
	@echo "make qemu     vmce-10.0: Debian 13's QEMU 10.0 source with qemu-patches/10.0/ (cached per machine)"
	@echo "make qemus    every QEMU vmce knows by name: debian-7.2 (installed), debian-10.0"
	@echo "              (bookworm-backports' package, unpacked), vmce-10.0 (Debian 13's source"
	@echo "              with qemu-patches/10.0/), vmce-10.2 (sid's 10.2 source with qemu-patches/10.2/),"
	@echo "              debian-11.1 (trixie-backports' package with its own libraries; cached per machine)"
	@echo "make qemu-10.2-arm64  vmce-10.2-arm64: the 10.2 series built for aarch64 (qemu-system-aarch64,"
	@echo "              x-vmce-inject-sea, virt the only Arm board; cached per machine; make check uses it)"
	@echo "make kernel-src  the vmce-6.1 guest kernel: Debian 12's source with guest-kernel/patches/6.1/"
	@echo "              (cached per machine), and its initramfs"
	@echo "make kernel-src-6.12  vmce-6.12: Debian 13's 6.12 source with guest-kernel/patches/6.12/ (cached"
	@echo "              per machine; 570 s cold here: not part of make kernels)"
	@echo "make kernel-src-7.3  vmce-7.3: trixie-backports' 7.3 source with guest-kernel/patches/7.3/ (cached"
	@echo "              per machine; a long cold build, 69 min here under load: not part of make kernels)"
	@echo "make kernel-6.12 Debian 13's kernel (debian-6.12), and its initramfs"
	@echo "make kernel-7.3  trixie-backports' Linux 7.3 kernel (debian-7.3), and its initramfs"
	@echo "make image-arm64  the Arm64 guest (run/vm start --arch arm64, arch = arm64 in a campaign):"
	@echo "              Debian 12's arm64 kernel, the guest tools cross-compiled, busybox, its initramfs"
	@echo "make kernels  the guest kernels make check uses: debian-6.1, vmce-6.1, debian-6.12, debian-7.3"
	@echo "make kernels-all  every guest kernel by name: make kernels, vmce-6.12 and vmce-7.3"
	@echo "make bench-kernels  per guest kernel: boot, the full matrix; and vmce-6.1's, vmce-6.12's and"
	@echo "              vmce-7.3's builds from cold (10 minutes and more each)"
	@echo "make guest-image  guest images like an operator's: debian-12 and debian-12-cloud"
	@echo "              (debootstrap, systemd, qemu-guest-agent; cached per machine)"
	@echo "make host-root  clean Debian 12 and 13 roots with systemd for the package test, and"
	@echo "              Debian 12's for run/fleet's hosts (cached per machine)"
	@echo "make rasdaemon-13  Debian 13's rasdaemon (0.8.3, which records memory failures) with its"
	@echo "              own libraries, for the host lab's Debian 13 L1 (cached per machine)"
	@echo "make install  vmced, vmcectl, their man pages, vmced.service and vmced.conf"
	@echo "              into \$$DESTDIR\$$PREFIX (default /usr/local); the unit where systemd looks"
	@echo "make clean    remove $(BUILD) (the caches in /var/cache/vmce stay)"

deps:
	@run/install-deps

# vmce_VERSION_ARCH.deb in build/deb, built from the tracked files of this
# tree with Debian's own tooling, then lintian on it (debian/)
deb:
	@run/install-deps deb
	@run/mkdeb $(BUILD)/deb

kernel: deps
	@guest-kernel/fetch --out $(KERNEL_DIR)

# the Arm64 guest (run/vm start --arch arm64; run/lib/vmcelab/arm64.py):
# Debian 12's arm64 kernel fetched from a private apt state of arm64, the
# guest tools cross-compiled static (Debian's gcc-aarch64-linux-gnu) in a
# meson build dir of their own, Debian's busybox-static for arm64 (cached
# per machine) and the same init
ARM64_MESON_DIR := $(BUILD)/meson-arm64
image-arm64: deps
	@run/install-deps arm64
	@guest-kernel/fetch --arch arm64 --out $(KERNELS_DIR)/debian-6.1-arm64
	@[ -f $(ARM64_MESON_DIR)/build.ninja ] || meson setup $(ARM64_MESON_DIR) \
		--cross-file images/guest-tools/aarch64.cross -Dguest_tools_only=true >/dev/null
	@meson compile -C $(ARM64_MESON_DIR) >/dev/null
	@mkdir -p $(dir $(IMAGE))
	@images/mkinitramfs --arch arm64 --kernel-dir $(KERNELS_DIR)/debian-6.1-arm64 \
		--tools $(ARM64_MESON_DIR)/images/guest-tools --out $(BUILD)/images/guest-arm64.cpio.gz

# the other guest kernels a campaign can name, each with its own initramfs
# make check builds the series on one base, 6.1, as it builds the QEMU
# series on one (10.0): the base e2e-campaign, e2e-hotplug and e2e-kernels
# test it on. Its newer bases are make check-all's (kernels-all), with
# bench-kernels and hostlab-full: a cold make check had no room for
# vmce-6.12 (570 s here) and has none for vmce-7.3 (69 min beside other
# sessions' load)
kernel-src kernel-src-6.12 kernel-src-7.3: build
	@mkdir -p $(dir $(IMAGE))
	@base=$(or $(subst kernel-src-,,$(filter kernel-src-%,$@)),6.1); \
		guest-kernel/build --base $$base --out $(KERNELS_DIR)/vmce-$$base && \
		images/mkinitramfs --kernel-dir $(KERNELS_DIR)/vmce-$$base --tools $(MESON_DIR)/images/guest-tools \
			--out $(BUILD)/images/guest-vmce-$$base.cpio.gz

kernel-6.12: build
	@guest-kernel/fetch --suite trixie --out $(KERNELS_DIR)/debian-6.12
	@mkdir -p $(dir $(IMAGE))
	@images/mkinitramfs --kernel-dir $(KERNELS_DIR)/debian-6.12 --tools $(MESON_DIR)/images/guest-tools \
		--out $(BUILD)/images/guest-debian-6.12.cpio.gz

# Linux 7.x comes split: linux-image-RELEASE depends on linux-binary-,
# linux-modules- and linux-base-RELEASE, which fetch follows and unpacks
kernel-7.3: build
	@guest-kernel/fetch --suite trixie-backports --out $(KERNELS_DIR)/debian-7.3
	@mkdir -p $(dir $(IMAGE))
	@images/mkinitramfs --kernel-dir $(KERNELS_DIR)/debian-7.3 --tools $(MESON_DIR)/images/guest-tools \
		--out $(BUILD)/images/guest-debian-7.3.cpio.gz

kernels: image kernel-src kernel-6.12 kernel-7.3

kernels-all: kernels kernel-src-6.12 kernel-src-7.3

# guest images like an operator's (images/mkimage): Debian 12 with systemd and
# qemu-guest-agent, with Debian's kernel and with its cloud kernel; each built
# once per machine (a new images/mkimage builds anew) and linked into the
# build directory
GUEST_IMAGES := debian-12 debian-12-cloud
guest-image: deps
	@key=$$(sha256sum images/mkimage | cut -c1-12); \
	cache=$${VMCE_CACHE:-/var/cache/vmce}/images; \
	mkdir -p $(BUILD)/images; \
	for i in $(GUEST_IMAGES); do \
		[ -f $$cache/$$i-$$key/image.json ] || images/mkimage --flavour $$i --out $$cache/$$i-$$key || exit 1; \
		ln -sfn $$cache/$$i-$$key $(BUILD)/images/$$i; \
	done

# clean Debian roots with systemd (images/mkroot), booted with systemd-nspawn
# to install build/deb's package into: debian-12-host and debian-13-host for
# the package test, debian-12-hypervisor (libvirtd, QEMU, sshd) for
# run/fleet's hosts (run/fleet up --suite trixie builds Debian 13's itself);
# built once per machine and linked into the build directory
host-root: deps
	@for r in bookworm:host bookworm:hypervisor trixie:host; do \
		images/mkroot --cached $(BUILD)/images --suite $${r%%:*} --flavour $${r#*:} || exit 1; \
	done

# Debian 13's rasdaemon, unpacked with its own libraries (Debian 12's is
# built without memory-failure support), which the host lab's Debian 13 L1
# runs: build/rasdaemon/debian-13 (images/host/fetch-rasdaemon; cached per
# machine in $VMCE_CACHE/rasdaemon)
rasdaemon-13: deps
	@images/host/fetch-rasdaemon --out $(BUILD)/rasdaemon/debian-13 >/dev/null

$(MESON_DIR)/build.ninja:
	meson setup $(MESON_DIR) --prefix $(PREFIX)

build: deps $(MESON_DIR)/build.ninja
	meson compile -C $(MESON_DIR)

image: build kernel $(BUILD)/images/disk.img
	@mkdir -p $(dir $(IMAGE))
	@images/mkinitramfs --kernel-dir $(KERNEL_DIR) --tools $(MESON_DIR)/images/guest-tools --out $(IMAGE)

$(BUILD)/images/disk.img: images/mkdisk
	@mkdir -p $(dir $@)
	@images/mkdisk --out $@

# QEMU by name (run/lib/vmcelab/qemus.py): vmce-10.0 and vmce-10.2 are
# Debian's source with qemu-patches/BASE/, debian-10.0 is bookworm-backports'
# binary package unpacked, debian-11.1 trixie-backports' with the libraries it
# needs (newer than Debian 12's); each kept once per machine in
# /var/cache/vmce/qemu. make qemu is vmce-10.0, the series' base in make
# check (vmce-7.2 was retired in part 20: qemu-patches/README.md)
qemu: qemu-10.0

qemu-10.0: deps
	@qemu-patches/build --base 10.0 --out $(BUILD)/qemus/vmce-10.0 >/dev/null

qemu-10.2: deps
	@qemu-patches/build --base 10.2 --out $(BUILD)/qemus/vmce-10.2 >/dev/null

# the same series built for the Arm64 guest (qemu-system-aarch64, its 0010's
# x-vmce-inject-sea): a tree of its own, for check-all's e2e-arm64 and the
# Arm64 bench only
qemu-10.2-arm64: deps
	@qemu-patches/build --base 10.2 --target aarch64 --out $(BUILD)/qemus/vmce-10.2-arm64 >/dev/null

qemu-debian-10.0: deps
	@qemu-patches/fetch --out $(BUILD)/qemus/debian-10.0 >/dev/null

qemu-debian-11.1: deps
	@qemu-patches/fetch --suite trixie-backports --own-libs --out $(BUILD)/qemus/debian-11.1 >/dev/null

# make check's QEMUs: all but vmce-10.2, whose cold build make check's time
# has no room for (its tests do not ask for it)
qemus-check: qemu-debian-10.0 qemu-10.0 qemu-debian-11.1

# Debian's arm64 QEMUs, each with its own libraries, for the Arm64 host
# lab's L1 (run/armlab): Debian 12's 7.2, Debian 13's 10.0,
# trixie-backports' 11.1 (arm64 binaries: nothing here runs them but L1)
armlab-qemus: deps
	@run/install-deps arm64
	@qemu-patches/fetch --arch arm64 --suite bookworm --out $(BUILD)/qemus/debian-7.2-arm64 >/dev/null
	@qemu-patches/fetch --arch arm64 --suite trixie --out $(BUILD)/qemus/debian-10.0-arm64 >/dev/null
	@qemu-patches/fetch --arch arm64 --suite trixie-backports --out $(BUILD)/qemus/debian-11.1-arm64 >/dev/null

# QEMU's own answer to real host errors on Arm64 under KVM: an emulated
# Arm64 L1 whose KVM runs the Arm64 guest, each Debian QEMU, AO and AR
armlab: image-arm64 armlab-qemus
	@run/armlab

qemus: qemus-check qemu-10.2

demo: image
	@run/demo
	@echo
	@echo "vmce demo: and now the quick campaign: every page type, judged (run/campaign --quick)"
	@run/campaign --quick --fresh

# (the guest images build after the kernels and QEMUs, not beside them:
# beside vmce-6.1's make -j2 they slowed it by more than they take alone)
# suite check-all is what needs a build make check has no room for
# (vmce-10.2's series checks and end-to-end runs: tests/meson.build)
check: kernels qemus-check qemu-10.2-arm64 guest-image image-arm64 host-root rasdaemon-13 deb
	meson test -C $(MESON_DIR) --print-errorlogs --no-suite check-all $(TESTFLAGS)

check-all: kernels-all qemus qemu-10.2-arm64 guest-image image-arm64 host-root rasdaemon-13 deb armlab-qemus
	meson test -C $(MESON_DIR) --print-errorlogs $(TESTFLAGS)

# FUZZ_RUNS=N for more or fewer
fuzz:
	@run/install-deps fuzz
	@host-daemon/fuzz/run $(BUILD) $(or $(FUZZ_RUNS),1000000)

unit: build
	meson test -C $(MESON_DIR) --print-errorlogs --suite unit --suite fuzz

e2e: image
	meson test -C $(MESON_DIR) --print-errorlogs --suite e2e

hostlab: hostlab-matrix hostlab-migrate hostlab-salvage hostlab-image hostlab-full armlab

# and the rows of Debian 13's L1 (6.12, its own QEMU 10.0) beside them
hostlab-matrix: image qemus kernel-6.12 host-root rasdaemon-13
	@run/hostlab --matrix --qemus all
	@run/hostlab --matrix --l1 debian-13 --qemus debian-10.0

# a live migration after a real host error, in both L1s under TCG and KVM
# L2 (tests/e2e/test_hostlab_migrate.py: four L1 boots, about 12 min here)
hostlab-migrate: image qemu-debian-10.0 kernel-6.12 host-root rasdaemon-13
	meson test -C $(MESON_DIR) --print-errorlogs --no-rebuild e2e-hostlab-migrate

# a lost huge page salvaged with the host kernel's own error: 2 MiB and
# 1 GiB under TCG and KVM L2 in Debian 13's L1, and Debian 12's 6.1, which
# cannot read one back (tests/e2e/test_hostlab_salvage.py: five L1 boots)
hostlab-salvage: image qemu-debian-10.0 kernel-6.12 host-root rasdaemon-13
	meson test -C $(MESON_DIR) --print-errorlogs --no-rebuild e2e-hostlab-salvage

# an operator's guest image (debian-12, make guest-image) under L1's real
# KVM, handed to L1 as a read-only disk: run/hostlab --campaign
# run/campaigns/hostlab-image.ini (tests/e2e/test_hostlab_image.py: one L1
# boot, one image boot)
hostlab-image: image qemu-debian-10.0 guest-image
	meson test -C $(MESON_DIR) --print-errorlogs --no-rebuild e2e-hostlab-image

# full.ini with real host errors in the lab, on each guest kernel side by
# side with the same cases simulated here (run/campaign --errors; one L1
# per kernel), then under KVM L2 on each kernel (one L1: KVM guests boot in
# seconds) with a QEMU that gives an AMD guest SUCCOR
comma := ,
HOSTLAB_KERNELS := debian-6.1 vmce-6.1 debian-6.12 vmce-6.12 debian-7.3 vmce-7.3
hostlab-full: image kernels-all qemus
	-@for k in $(HOSTLAB_KERNELS); do \
		run/campaign --errors simulated,real --kernels $$k --out $(BUILD)/campaigns/full-errors-$$k run/campaigns/full.ini; \
	done
	-@run/hostlab --campaign run/campaigns/full.ini --errors real --accel kvm --qemu debian-10.0 \
		--kernels $(subst $(eval) ,$(comma),$(HOSTLAB_KERNELS)) --out $(BUILD)/campaigns/full-hostlab-kvm

campaign: image
	@run/campaign --quick

# every figure, then one table of them (build/bench/bench-all.json, with
# this machine's description); the 10^5-error storm is `make bench-storm`
# (the 10^4 one is here).
# A part that fails leaves its rows "not measured" (its own figures from an
# earlier run are removed first, never shown as this run's) and the others
# go on.
BENCH_PARTS := main tail qemus overhead overhead-kvm p1 scale libvirt-restarts remote fleet images hugepage storm storm-16vm scale-qmp migration-debian-7.2 migration-vmce-10.0 drain metrics arm64
bench: kernels qemus qemu-10.2-arm64 guest-image image-arm64
	@mkdir -p $(BUILD)/bench
	@rm -f $(foreach p,$(BENCH_PARTS),$(BUILD)/bench/bench-$(p).json)
	-@run/bench
	-@run/bench --only tail
	-@run/bench --only qemus
	-@run/bench --overhead
	-@run/bench --only remote
	-@run/bench --only kernels
	-@run/bench --only images
	-@run/bench --only hugepage
	-@run/bench --only storm
	-@run/bench --only storm --storm-vms 16
	-@run/bench --only scale --no-libvirt
	-@run/bench --only migration
	-@run/bench --only migration --migration-qemu vmce-10.0
	-@run/bench --only drain
	-@run/bench --only metrics
	-@run/bench --only arm64
	-@run/campaign --bench
	-@run/libvirt/bench --domains 64 --mem 128M --paused 192
	-@run/libvirt/restarts
	-@run/fleet bench
	-@run/hostlab --overhead
	-@run/hostlab --bench 10 --qemus all
	@run/bench --table

bench-kernels: kernels-all
	@run/bench --only kernels --cold-build

bench-storm: image qemus
	@run/bench --only storm --errors 100000

bench-libvirt: image
	@run/libvirt/bench

# libvirtd restarted 20 times under a CPU hog per core, without and with vmced
bench-libvirt-restarts: image
	@run/libvirt/restarts

bench-campaign: image
	@run/campaign --bench

bench-hostlab: image qemus
	@run/hostlab --bench 10 --qemus all

bench-table:
	@run/bench --table

install: build
	meson configure $(MESON_DIR) -Dprefix=$(PREFIX) >/dev/null
	meson compile -C $(MESON_DIR)
	DESTDIR=$(DESTDIR) meson install -C $(MESON_DIR) --no-rebuild

clean:
	rm -rf $(BUILD)
