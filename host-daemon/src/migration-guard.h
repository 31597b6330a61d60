/*
 * A migration of a VM with poisoned memory: neither a dead QEMU nor bad
 * data carried silently to the destination.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <signal.h>

#include "vm.h"


typedef enum {
  VMCE_MIGRATION_ACT_NONE,
  VMCE_MIGRATION_ACT_REFUSE,    /* it starts with poisoned pages: cancel it */
  VMCE_MIGRATION_ACT_ALLOW,     /* ... and goes on (allow-zero) */
  VMCE_MIGRATION_ACT_HAND_OVER, /* it completed: the destination gets the zeroed pages marked */
  VMCE_MIGRATION_ACT_TAKE_BACK, /* it failed or was cancelled: the zeroed pages go away again */
  VMCE_MIGRATION_ACT_LOADED,    /* a destination has loaded its state */
} VmceMigrationAction;

/* What a MIGRATION event from @was to @status means, from the facts alone:
 * whether this QEMU is a loading destination, the policy, its poisoned
 * host pages, and those the migration thread was given zeroed */
VmceMigrationAction vmce_migration_decide (const gchar *was,
                                           const gchar *status,
                                           gboolean incoming,
                                           VmceMigrationPolicy policy,
                                           guint n_poisoned,
                                           guint n_zeroed);
/* Whether a thread's read of a page is the migration's to be given a
 * zeroed page: while one runs on this (source) QEMU, not a vCPU, a page
 * poisoned on the host */
gboolean vmce_migration_takes_read (const gchar *status,
                                    gboolean incoming,
                                    gboolean vcpu,
                                    gboolean poisoned);

/* QEMU's MIGRATION event */
/* What the operator chose for @vm's migrations (config, vmcectl set) */
VmceMigrationPolicy vmce_migration_guard_get_policy (VmceVm *vm);
void vmce_migration_guard_set_policy (VmceVm *vm, VmceMigrationPolicy policy);
void vmce_migration_guard_on_event (VmceVm *vm, JsonObject *data);
/* QEMU's RESUME event: a destination that runs now is told of its pages */
void vmce_migration_guard_on_resume (VmceVm *vm);

/* A memory-error stop of a thread that is not a vCPU: while a migration
 * runs, its thread reading a poisoned page. Takes the stop and returns
 * TRUE if so: the thread is given a zeroed page to read. */
gboolean vmce_migration_guard_signal (VmceVm *vm, const VmceStop *stop);

/* What migrating this VM would do now, for vmcectl vm */
void vmce_migration_guard_to_json (VmceVm *vm, JsonBuilder *b);
