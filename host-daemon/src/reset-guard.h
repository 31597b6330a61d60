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

/* What is known when a thread stops on a memory error */
typedef struct {
  gboolean poisoned;        /* the page is one vmced knows is poisoned on the host */
  gboolean main_thread;     /* QEMU's main thread touched it */
  gboolean in_rom;          /* in a ROM blob QEMU rewrites at reset */
  gboolean pass_running;    /* a replacement pass holds the vCPUs */
  gboolean monitor_pending; /* QEMU sent something not read yet (RESET?) */
  gboolean again;           /* the stop waited once already */
  gboolean found_only;      /* an AO: found, not consumed (no touch of the page) */
} VmceResetFacts;

typedef enum {
  VMCE_RESET_PASS_ON,     /* not a reset's business: forward as usual */
  VMCE_RESET_REPLACE_NOW, /* QEMU rewrites the page for the new boot: replace it first */
  VMCE_RESET_WAIT,        /* hold the thread until the pass, or the monitor, is done */
} VmceResetAction;

/* The decision, from the facts alone */
VmceResetAction vmce_reset_guard_decide (const VmceResetFacts *facts);

/* A memory-error stop (already rewritten if simulated). Takes the stop
 * and returns TRUE when the decision is not VMCE_RESET_PASS_ON: the page is
 * replaced at once, or the thread waits and the stop is looked at again
 * once the pass or the monitor's input is done. */
gboolean vmce_reset_guard_signal (VmceVm *vm, const VmceStop *stop, gboolean again);

/* A fault (SIGSEGV, or SIGBUS for a memory error) on a page vmced has just
 * replaced, taken before it was: the access is retried, the signal
 * dropped. Returns TRUE if it took the stop. */
gboolean vmce_reset_guard_stale_fault (VmceVm *vm, pid_t tid, const siginfo_t *info);

/* At detach: lets every thread it holds go */
void vmce_reset_guard_cancel_all (VmceVm *vm);
