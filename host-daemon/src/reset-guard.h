/*
 * A poisoned page across a guest reset: QEMU's own promise, kept by vmced.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <signal.h>

#include "vm.h"

/* QEMU's RESET event: replaces every page of the VM that is still
 * poisoned, with its vCPUs held, and journals a reset record */
void vmce_reset_guard_on_reset (VmceVm *vm, JsonObject *data, gint64 qemu_time_us);

/* A memory-error stop (already rewritten if simulated) on @tid. Takes the
 * stop and returns TRUE when it is about a page vmced already knows is
 * poisoned and a reset may be behind it:
 *  - QEMU's main thread writing a ROM blob into it (rom_reset(), before
 *    QEMU announces the reset): the page is replaced at once;
 *  - a replacement pass is running, or QEMU has sent something vmced has
 *    not read (its RESET, maybe): the thread waits, and the stop is looked
 *    at again once that is done.
 * @again: the stop was deferred once already. */
gboolean vmce_reset_guard_signal (VmceVm *vm,
                                  pid_t tid,
                                  const siginfo_t *info,
                                  gint64 stop_time_us,
                                  const gchar *source,
                                  guint64 request_id,
                                  gboolean again);

/* A fault (SIGSEGV, or SIGBUS for a memory error) on a page vmced has just
 * replaced, taken before it was: the access is retried, the signal
 * dropped. Returns TRUE if it took the stop. */
gboolean vmce_reset_guard_stale_fault (VmceVm *vm, pid_t tid, const siginfo_t *info);

/* At detach: lets every thread it holds go */
void vmce_reset_guard_cancel_all (VmceVm *vm);
