/*
 * A migration's destination, as vmced watches it: the source's poisoned
 * pages received, the vCPUs held until they are poisoned here too.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "vm.h"

/* @dst, a QEMU loading a migration, is to hold @pages (of
 * VmcePoisonedPage, the source's) poisoned once it has loaded; called
 * again for a page poisoned on the source during the migration */
void vmce_migration_incoming_receive (VmceVm *dst, const gchar *source, GPtrArray *pages);
/* Whether @dst is receiving a source's pages now */
/* The pages a vmced before this one was receiving for @dst (its journal's
 * `receiving` records), their marks not yet in when it went: put in now,
 * before the guest runs if it has not yet; and if that vmced had turned
 * the QEMU's autostart off (@autostart_off), the guest let run after. */
void vmce_migration_incoming_resume (VmceVm *dst, const gchar *source, GPtrArray *pages, gboolean autostart_off);
gboolean vmce_migration_incoming_is_receiving (VmceVm *dst);
/* @dst's own MIGRATION status: "completed" puts the marks in */
void vmce_migration_incoming_on_status (VmceVm *dst, const gchar *status);
/* The source's migration failed or was cancelled, or its vmced lost it:
 * the pages are dropped and the vCPUs let go */
void vmce_migration_incoming_abandon (VmceVm *dst, const gchar *why);

/* For vmcectl vm: what it is receiving */
void vmce_migration_incoming_to_json (VmceVm *dst, JsonBuilder *b);
