/*
 * A poisoned page lent to a migration's thread as a zeroed one, while the
 * guest cannot see it.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "vm.h"

/* @stop is a thread of @vm's QEMU, not a vCPU, reading the poisoned page
 * @p while a migration carries its poisoned pages: takes the stop. */
void vmce_migration_lend (VmceVm *vm, const VmceStop *stop, VmcePoisonedPage *p);
/* The migration ended: the counts start again (a page still being lent
 * is lent to its end) */
void vmce_migration_lend_reset (VmceVm *vm);
/* Pages lent in this migration */
guint vmce_migration_lend_count (VmceVm *vm);
/* How long the vCPUs were held for it, in this migration */
gint64 vmce_migration_lend_held_us (VmceVm *vm);
