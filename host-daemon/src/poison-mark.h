/*
 * A page of QEMU's memory made poisoned by the kernel itself (userfaultfd's
 * UFFDIO_POISON), where a migration brings a guest page that was poisoned on
 * the source: every thread and KVM then fault on it as on a real one.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

/* Whether this host's kernel has UFFDIO_POISON (Linux 6.6): asked once, of
 * vmced's own process. NULL if it has; else why not, for a log line. */
const gchar *vmce_poison_mark_unsupported (void);

/* Poisons the page at @hva of @pid: what was in it is dropped, and a touch
 * by any thread is SIGBUS at its address (BUS_MCEERR_AR where the kernel
 * has CONFIG_MEMORY_FAILURE, BUS_ADRERR where it has not). @tid, a thread
 * of @pid, must be in a ptrace stop: it makes the system calls. A page of a
 * hugetlbfs mapping cannot be marked alone (the kernel marks whole huge
 * pages): that fails, saying so. */
gboolean vmce_poison_mark (pid_t pid, pid_t tid, guint64 hva, GError **error);
/* The same for the pages of [@start, @start + @len), in one mapping: a
 * few system calls for the lot */
gboolean vmce_poison_mark_range (pid_t pid, pid_t tid, guint64 start, guint64 len, GError **error);

/* Takes a mark away again: a fresh zeroed page stands there (what QEMU
 * puts in place of a poisoned page at reset) */
gboolean vmce_poison_unmark (pid_t pid, pid_t tid, guint64 hva, GError **error);

/* mark_range(), or where it cannot be (no UFFDIO_POISON in the kernel, or
 * for the mapping: a file on disk) and @may_protect (TCG: PROT_NONE is
 * a memory error for vmced, not for KVM), the pages taken away instead;
 * @how says which */
gboolean vmce_poison_mark_or_protect (pid_t pid,
                                      pid_t tid,
                                      guint64 start,
                                      guint64 len,
                                      gboolean may_protect,
                                      const gchar **how,
                                      GError **error);
