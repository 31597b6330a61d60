/*
 * Replacing a poisoned host page of QEMU's guest RAM by a fresh one.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "proc-maps.h"

typedef struct {
  guint64 start; /* the host range replaced: the page, or its whole huge page */
  guint64 len;
  gchar *backing; /* vmce_vma_describe() */
  gchar *how;     /* what was done, for the journal */
} VmcePageReplace;

void vmce_page_replace_clear (VmcePageReplace *r);

/* How a page of a mapping is replaced */
typedef struct {
  guint64 unit;            /* what goes: the page, or its whole huge page */
  gboolean restore_access; /* taken away (PROT_NONE): read-write first */
  gboolean punch;          /* shared memory: out of its file first (MADV_REMOVE) */
  gboolean may_remap;      /* private anonymous: a fresh mapping if MADV_DONTNEED is refused */
  gboolean file_data;      /* a private file mapping: the next touch reads the file's data */
} VmceReplacePlan;

/* The plan for a page of @vma, from the mapping alone */
void vmce_page_replace_plan (const VmceVma *vma, VmceReplacePlan *plan);

/* Whether @pid can read the page at @hva now: a hwpoisoned page, or one
 * vmced took away (PROT_NONE), cannot. Nothing in @pid runs for it. */
gboolean vmce_page_is_readable (pid_t pid, guint64 hva);

/* Gives @pid a fresh page (zeroed, or the file's data for a private file
 * mapping) at @hva, as QEMU does on reset for a page it knows is poisoned;
 * @tid, a thread of @pid, must be in a ptrace stop (it makes the system
 * calls). @vmas is @pid's mappings, read before. Fails, saying why, when
 * the page is still unreadable afterwards. */
gboolean vmce_page_replace (pid_t pid,
                            pid_t tid,
                            VmceVmaTable *vmas,
                            guint64 hva,
                            VmcePageReplace *out,
                            GError **error);
/* The same for @n_units pages (or huge pages) from @hva's, as far as its
 * mapping goes: a few system calls for the lot */
gboolean vmce_page_replace_range (pid_t pid,
                                  pid_t tid,
                                  VmceVmaTable *vmas,
                                  guint64 hva,
                                  guint n_units,
                                  VmcePageReplace *out,
                                  GError **error);
