/*
 * A migration of a VM with poisoned memory: neither a dead QEMU, nor a
 * page that reaches the destination as data, nor one the guest can read
 * as zeros.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <signal.h>

#include "vm.h"


typedef enum {
  VMCE_MIGRATION_ACT_NONE,
  VMCE_MIGRATION_ACT_REFUSE,        /* it starts with poisoned pages, policy refuse: cancel it */
  VMCE_MIGRATION_ACT_NO_DESTINATION, /* ... policy carry, and nobody to carry them to: cancel it */
  VMCE_MIGRATION_ACT_HAND_OVER,     /* ... a destination vmced watches: the pages go to it */
  VMCE_MIGRATION_ACT_HANDED_OVER,   /* it completed: the destination holds the pages */
  VMCE_MIGRATION_ACT_ENDED,         /* it failed or was cancelled: the source runs on as it was */
  VMCE_MIGRATION_ACT_INCOMING,      /* a destination's own status */
} VmceMigrationAction;

/* What a MIGRATION event from @was to @status means, from the facts alone:
 * whether this QEMU is a loading destination, the policy, its poisoned
 * host pages, whether a destination this vmced watches is there, and
 * whether a hand-over is under way */
VmceMigrationAction vmce_migration_decide (const gchar *was,
                                           const gchar *status,
                                           gboolean incoming,
                                           VmceMigrationPolicy policy,
                                           guint n_poisoned,
                                           gboolean has_destination,
                                           gboolean handing_over);
/* Whether a thread's read of a page is the migration's, to be lent the
 * page (migration-lend.c): while this (source) QEMU hands its pages over
 * (or a refused migration still runs), not a vCPU, a page poisoned on the
 * host */
gboolean vmce_migration_takes_read (gboolean carrying,
                                    gboolean incoming,
                                    gboolean vcpu,
                                    gboolean poisoned);

/* Whether the source's guest got an error's machine check: injected, and
 * written to QEMU (@written_us, monotonic) before the guest stopped for the
 * migration's last pass (@stopped_us, 0: it has not) */
gboolean vmce_migration_told_here (gboolean injected, gint64 written_us, gint64 stopped_us);

/* What the operator chose for @vm's migrations (config, vmcectl set) */
VmceMigrationPolicy vmce_migration_guard_get_policy (VmceVm *vm);
void vmce_migration_guard_set_policy (VmceVm *vm, VmceMigrationPolicy policy);
/* QEMU's STOP event (monotonic @time_us): a migration's last pass */
void vmce_migration_guard_on_stop (VmceVm *vm, gint64 time_us);
/* QEMU's MIGRATION event */
void vmce_migration_guard_on_event (VmceVm *vm, JsonObject *data);
/* A memory error vmced handled on @vm: during a hand-over, its page goes
 * to the destination too */
void vmce_migration_guard_on_error (VmceVm *vm, const VmceMceEvent *ev);
/* What the journal calls a destination that is a libvirt domain's metadata */
#define VMCE_MIGRATION_BY_DOMAIN "its libvirt domain (metadata)"
/* @vm's libvirt domain's metadata holds @n_pages of its poisoned pages
 * now (libvirt-carry.c): with all of them, a migration of it may go to
 * another host */
void vmce_migration_guard_set_domain_holds (VmceVm *vm, guint n_pages);
/* A client handed @vm's @n_pages poisoned pages to @to, a destination
 * another vmced watches (vmcectl migrate): the migration it starts next
 * may go, if the pages are still those; NULL @to takes that back */
void vmce_migration_guard_expect_external (VmceVm *vm, const gchar *to, guint n_pages);
/* @vm's session ends (QEMU exited, vmced detaches) */
void vmce_migration_guard_on_detach (VmceVm *vm);

/* A memory-error stop of a thread that is not a vCPU: while a hand-over
 * runs, the migration reading a poisoned page. Takes the stop and returns
 * TRUE if so. */
gboolean vmce_migration_guard_signal (VmceVm *vm, const VmceStop *stop);

/* What migrating this VM would do now, for vmcectl vm */
void vmce_migration_guard_to_json (VmceVm *vm, JsonBuilder *b);
