/*
 * Making a traced, stopped thread run one system call for us.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

/* @tid must be in a ptrace signal-delivery-stop or event-stop (not a
 * group-stop). Afterwards it is in a signal-delivery-stop for SIGTRAP with
 * its registers as before: resume it as you would have, with the signal
 * you meant to deliver (or 0). Returns the syscall's return value in @ret
 * (a negative errno on failure of the call itself). */
gboolean vmce_remote_syscall (pid_t pid,
                              pid_t tid,
                              long nr,
                              const long args[6],
                              long *ret,
                              GError **error);

gboolean vmce_remote_mprotect (pid_t pid,
                               pid_t tid,
                               guint64 addr,
                               guint64 len,
                               int prot,
                               GError **error);

/* madvise(2) in the process; @advice as for madvise */
gboolean vmce_remote_madvise (pid_t pid,
                              pid_t tid,
                              guint64 addr,
                              guint64 len,
                              int advice,
                              GError **error);

/* rt_sigaction(@signo, SIG_DFL) in the process: the default action for
 * every thread, as the kernel's force_sig_info_to_task() sets it */
gboolean vmce_remote_sigaction_default (pid_t pid, pid_t tid, int signo, GError **error);

/* Puts a fresh zeroed private page where @addr was: what stands in for a
 * host page the kernel has taken away for good */
gboolean vmce_remote_map_anon_fixed (pid_t pid,
                                     pid_t tid,
                                     guint64 addr,
                                     guint64 len,
                                     GError **error);

/* Fresh zeroed anonymous memory somewhere in the process (shared: shmem,
 * as a MAP_SHARED mapping of a file would be), its address in @addr */
gboolean vmce_remote_map_anon (pid_t pid, pid_t tid, guint64 len, gboolean shared, guint64 *addr,
                               GError **error);
/* Moves the mapping at @from to @to, over whatever was there, in one step:
 * no thread sees @to unmapped or half-done */
gboolean vmce_remote_mremap_fixed (pid_t pid, pid_t tid, guint64 from, guint64 len, guint64 to,
                                   GError **error);
gboolean vmce_remote_munmap (pid_t pid, pid_t tid, guint64 addr, guint64 len, GError **error);
