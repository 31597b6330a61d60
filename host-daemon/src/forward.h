/*
 * From a memory-error SIGBUS in QEMU to a machine check in the guest.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <signal.h>

#include "vm.h"

/* A thread of @vm is in signal-delivery-stop with SIGBUS BUS_MCEERR_AO/AR.
 * Takes the stop: the thread is resumed from here. */
void vmce_forward_signal (VmceVm *vm, const VmceStop *stop);

/* A machine check at @gpa with no host side (vmcectl inject); @cpu < 0
 * picks what a forwarded error would. Completes with the event as JSON. */
void vmce_forward_inject_async (VmceVm *vm,
                                guint64 gpa,
                                VmceMceKind kind,
                                gint cpu,
                                GAsyncReadyCallback callback,
                                gpointer user_data);
JsonNode *vmce_forward_inject_finish (VmceVm *vm, GAsyncResult *res, GError **error);

/* A page of a lost huge page, told to the guest as a found error (SRAO),
 * in the queue behind what is there; @about_seq: the error that showed
 * the loss (hugepage-loss.c) */
void vmce_forward_tell (VmceVm *vm, guint64 gpa, guint64 about_seq);
/* A page a migration brought whose found error (AO) its source took but
 * whose machine check did not reach the guest there before it stopped:
 * told here, as the source would have (migration-incoming.c) */
void vmce_forward_tell_migrated (VmceVm *vm, guint64 gpa);

/* QEMU's MEMORY_FAILURE event, to be kept with the injection it belongs to */
void vmce_forward_qemu_event (VmceVm *vm, JsonObject *data);

/* Whether vmced holds @vm's vCPUs itself, and why, for vmcectl vm
 * ("paused_by_vmced": null, or since, why, the stuck vCPUs) */
void vmce_forward_to_json (VmceVm *vm, JsonBuilder *b);

/* At detach: lets held threads go and fails what was not sent */
/* The found errors (AO) still waiting in @vm's queue when its migration
 * completed: not injected into a guest that is gone from here, recorded
 * "migrated" with @to in their detail (the destination tells them: they
 * went over untold); how many */
guint vmce_forward_hand_queued_to_migration (VmceVm *vm, const gchar *to);
void vmce_forward_cancel_all (VmceVm *vm, const gchar *why);
/* The gap between two injections into @vm through HMP (vmced --inject-gap-ms) */
void vmce_forward_set_gap (VmceVm *vm, guint gap_ms);
/* How long one injection may be refused as busy or dropped as too early
 * before it is journaled as not injected (VMCE_RETRY_BOUND_MS; tests
 * shorten it) */
void vmce_forward_set_retry_bound (VmceVm *vm, guint bound_ms);
