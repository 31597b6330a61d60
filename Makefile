# vmce: `make demo` shows the whole path once; `make check` runs every test.
# Both install the Debian packages they need and fetch the guest kernel.

BUILD      ?= build
MESON_DIR  := $(BUILD)/meson
KERNEL_DIR := $(BUILD)/guest-kernel
IMAGE      := $(BUILD)/images/guest.cpio.gz
PREFIX     ?= /usr/local
DESTDIR    ?=

export VMCE_BUILD_DIR := $(abspath $(BUILD))

.PHONY: all deps kernel build image demo check unit e2e hostlab bench bench-hostlab install clean help

all: build image

help:
	@echo "make demo     boot a guest, poison a page under a guest process, show the recovery"
	@echo "make check    every test (unit, fuzz corpus replay, end to end)"
	@echo "make hostlab  real host memory errors in a host inside a VM: the comparison table"
	@echo "make bench    boot time, forwarding latency and vmced memory figures (and the host lab's)"
	@echo "make install  vmced and vmcectl into \$$DESTDIR\$$PREFIX"

deps:
	@run/install-deps

kernel: deps
	@guest-kernel/fetch --out $(KERNEL_DIR)

$(MESON_DIR)/build.ninja:
	meson setup $(MESON_DIR) --prefix $(PREFIX)

build: deps $(MESON_DIR)/build.ninja
	meson compile -C $(MESON_DIR)

image: build kernel
	@mkdir -p $(dir $(IMAGE))
	@images/mkinitramfs --kernel-dir $(KERNEL_DIR) --tools $(MESON_DIR)/images/guest-tools --out $(IMAGE)

demo: image
	@run/demo

check: image
	meson test -C $(MESON_DIR) --print-errorlogs $(TESTFLAGS)

unit: build
	meson test -C $(MESON_DIR) --print-errorlogs --suite unit --suite fuzz

e2e: image
	meson test -C $(MESON_DIR) --print-errorlogs --suite e2e

hostlab: image
	@run/hostlab --matrix

bench: image
	@run/bench
	@run/hostlab --bench 10

bench-hostlab: image
	@run/hostlab --bench 10

install: build
	DESTDIR=$(DESTDIR) meson install -C $(MESON_DIR) --no-rebuild

clean:
	rm -rf $(BUILD)
