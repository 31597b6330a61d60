/*
 * Simulated host memory errors, for hosts whose kernel cannot make real
 * ones (no CONFIG_MEMORY_FAILURE, as on the machine vmce is developed on).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "vm.h"

typedef enum {
  VMCE_SIM_TRIGGER_AUTO,   /* AO: now; AR: on access (TCG) or now (KVM) */
  VMCE_SIM_TRIGGER_ACCESS, /* when a thread next touches the page */
  VMCE_SIM_TRIGGER_NOW,    /* signal the thread at once */
} VmceSimTrigger;

gboolean vmce_sim_trigger_from_string (const gchar *str, VmceSimTrigger *trigger);

/* Completes with the memory-error event (JSON) once vmced has handled it,
 * or with an error after @timeout_ms (the page stays poisoned). @addr is a
 * GPA, or with @is_hva an HVA: one outside guest RAM (QEMU's own memory)
 * is signalled too, as the kernel would, and QEMU gets to handle it. */
void vmce_sim_poison_async (VmceVm *vm,
                            guint64 addr,
                            gboolean is_hva,
                            VmceMceKind kind,
                            VmceSimTrigger trigger,
                            gint cpu,
                            guint lsb,
                            guint timeout_ms,
                            GAsyncReadyCallback callback,
                            gpointer user_data);
JsonNode *vmce_sim_poison_finish (VmceVm *vm, GAsyncResult *res, GError **error);

/* At a signal-delivery-stop: turns vmced's stand-in signals into the
 * siginfo the host kernel would have sent. Returns TRUE if it did; then
 * @request_id names the vmcectl request (0 if none). */
gboolean vmce_sim_rewrite (VmceVm *vm, pid_t tid, siginfo_t *info, guint64 *request_id);

gboolean vmce_sim_is_protected (VmceVm *vm, guint64 host_page);
/* The lsb of the huge page @host_page was taken away with (21, 30), or 0:
 * not taken away, or alone */
guint vmce_sim_lost_lsb (VmceVm *vm, guint64 host_page);
/* Whether @host_page is the page a simulated huge-page loss named (its
 * raw bad page, lost whatever is salvaged around it) */
gboolean vmce_sim_is_raw (VmceVm *vm, guint64 host_page);
/* How many host pages the simulator has taken away now */
guint vmce_sim_count_protected (VmceVm *vm);
/* Gives access to a simulated-poisoned page back; @tid must be stopped */
gboolean vmce_sim_unprotect (VmceVm *vm, pid_t tid, guint64 host_page, GError **error);
/* Gives back, through @tid, every page taken away of the huge page that
 * holds @host_page (of @host_page alone if it is none): the way a
 * hugetlbfs mapping takes them, whole */
gboolean vmce_sim_unprotect_huge (VmceVm *vm, pid_t tid, guint64 host_page, GError **error);

/* The host pages vmced has taken away (of guint64), or NULL */
GArray *vmce_sim_get_protected (VmceVm *vm);
/* @host_page was replaced by a fresh one (a reset): it is no longer taken
 * away, and a request waiting for a thread to touch it ends with @why */
void vmce_sim_forget_page (VmceVm *vm, guint64 host_page, const gchar *why);
/* At attach: @host_page was taken away by an earlier vmced (killed before
 * it could give it back); a thread touching it is told as of a poisoned
 * page again */
void vmce_sim_adopt_page (VmceVm *vm, guint64 host_page, guint64 gpa);
/* The same for a page the kernel's poison marker stands in (poison-mark.c,
 * where a migration brought it): what gives the page back drops the marker */
void vmce_sim_adopt_marked_page (VmceVm *vm, guint64 host_page, guint64 gpa);

/* An event was handled: answers the request waiting for it */
void vmce_sim_event_done (VmceVm *vm, const VmceMceEvent *ev, JsonNode *json);
/* Before detaching: give every page back (at the main thread's next stop) */
void vmce_sim_release_all (VmceVm *vm);
void vmce_sim_cancel_all (VmceVm *vm, const gchar *why);
