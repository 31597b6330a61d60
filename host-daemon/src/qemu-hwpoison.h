/*
 * QEMU's own list of poisoned pages, for a QEMU with qemu-patches' 0009
 * (x-hwpoison-page-add): the pages vmced took the errors of, told to QEMU
 * so that its migration skips and carries them itself (0008).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "vm.h"

typedef struct {
  guint64 gpa;
  guint64 size;
  gboolean reported;
} VmceQemuHwpoisonRun;

/* @pages (of VmcePoisonedPage) as runs of pages consecutive in guest
 * physical memory, told or not alike: one command each (pure) */
GArray *vmce_qemu_hwpoison_runs (GPtrArray *pages);
/* Tells QEMU of @pages (not waited for: a refusal is a warning, and the
 * lend (migration-lend.c) still serves a page QEMU reads); how many
 * commands went, 0 for a QEMU without the command */
guint vmce_qemu_hwpoison_add (VmceVm *vm, GPtrArray *pages);
