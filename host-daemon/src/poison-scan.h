/*
 * Finding the poisoned pages of a QEMU in its own page table.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "proc-maps.h"

typedef struct {
  guint64 hva;         /* the page */
  gboolean taken_away; /* PROT_NONE: vmced's simulation; else a hwpoison entry */
} VmcePoisonFound;

/* The pages of [@hva, @hva + @size) of @pid that it cannot read: those the
 * kernel replaced by a hwpoison entry in its page table, and those vmced
 * took away (PROT_NONE). An array of VmcePoisonFound. */
GArray *vmce_poison_scan (pid_t pid,
                          VmceVmaTable *vmas,
                          guint64 hva,
                          guint64 size,
                          GError **error);
