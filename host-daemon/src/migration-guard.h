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

const gchar *vmce_migration_policy_to_string (VmceMigrationPolicy policy);
gboolean vmce_migration_policy_from_string (const gchar *str, VmceMigrationPolicy *policy);

/* QEMU's MIGRATION event */
void vmce_migration_guard_on_event (VmceVm *vm, JsonObject *data);
/* QEMU's RESUME event: a destination that runs now is told of its pages */
void vmce_migration_guard_on_resume (VmceVm *vm);

/* A memory-error stop of a thread that is not a vCPU: while a migration
 * runs, its thread reading a poisoned page. Takes the stop and returns
 * TRUE if so: the thread is given a zeroed page to read. */
gboolean vmce_migration_guard_signal (VmceVm *vm, pid_t tid, const siginfo_t *info);

/* What migrating this VM would do now, for vmcectl vm */
void vmce_migration_guard_to_json (VmceVm *vm, JsonBuilder *b);
