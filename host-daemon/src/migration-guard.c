/*
 * A migration of a VM with poisoned memory (see migration-guard.h).
 *
 * Without vmced, QEMU's migration thread reads every page of guest RAM;
 * a poisoned one sends it SIGBUS BUS_MCEERR_AR, which that thread (as every
 * thread QEMU makes but the vCPUs) has blocked, so the kernel delivers it at
 * its default action and QEMU dies without a word of its own. QEMU 9.0
 * refuses to start a migration of a VM with poisoned memory (06152b89db64,
 * "migration: prevent migration when VM has poisoned memory"), which it can
 * do because it knows the pages; with vmced taking the signals it does not.
 * Refusing is no answer for an operator who must empty a host whose DIMM is
 * failing, so by the policy `migration` of vmced.conf:
 *  - carry (the default): the poisoned pages go with the guest. When the
 *    migration starts (MIGRATION, status setup) they are handed to the
 *    destination, a QEMU loading a migration that this vmced watches
 *    (migration-incoming.c), which holds them poisoned before its vCPUs
 *    run; each one the migration thread reads is lent to it as a zeroed
 *    page with the vCPUs held (migration-lend.c), so the source's guest
 *    never reads the zeros either; an error during the migration is handed
 *    over as it comes. If the migration fails the source runs on with its
 *    pages as they were. With poisoned pages and no destination to carry
 *    them to, the migration is cancelled, saying why: nothing has moved.
 *    A QEMU with vmce's series (0008, 0009) is told the pages first
 *    (qemu-hwpoison.c): its migration then skips them and carries them
 *    itself, and reads none, vmced or not.
 *  - refuse: a migration of a VM with poisoned pages is cancelled, saying
 *    why, in one line and in the journal.
 * A migration is seen through MIGRATION events: vmced turns the `events`
 * capability on for the QEMUs it attaches to itself (libvirt does so for
 * its domains).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-migration"

#include "forward.h"
#include "json-util.h"
#include "log-writer.h"
#include "migration-guard.h"
#include "migration-incoming.h"
#include "migration-lend.h"
#include "page.h"
#include "poison-mark.h"
#include "qemu-hwpoison.h"

/* How long after QEMU has a machine check the vCPU surely took it: one
 * given to QEMU less than this before the guest stopped for a migration's
 * last pass is told again on the destination */
#define VMCE_MIGRATION_TAKE_US (50 * G_TIME_SPAN_MILLISECOND)

typedef struct {
  guint64 gpa;
  guint64 hva;
  gboolean simulated;
  gint64 written_us;
} VmceMigrationTold;

/* The guard's own, per VM (layer data of the session) */
typedef struct {
  VmceMigrationPolicy policy;
  gchar *status;        /* of the last MIGRATION event, or NULL */
  gboolean refused;
  gboolean carrying;    /* a hand-over is under way */
  VmceVm *destination;  /* ... to a QEMU this vmced watches; NULL: its libvirt domain carries them */
  gint64 started_us;
  gint domain_holds;    /* pages its libvirt domain's metadata holds now, -1: none written */
  gchar *external_to;   /* handed over by a client (vmcectl migrate) to this destination ... */
  guint external_pages; /* ... with this many pages */
  gchar *carrier;       /* where the pages of the hand-over under way go, for the journal */
  gint64 stopped_us;    /* the source's guest stopped for the migration's last pass */
  VmceVm *last_destination; /* of the last hand-over that completed */
  gint64 completed_us;
  GArray *told;         /* of VmceMigrationTold: machine checks during the hand-over under way */
} VmceMigrationGuard;

GQuark vmce_migration_guard_quark (void);
G_DEFINE_QUARK (vmce-migration-guard, vmce_migration_guard)

static void
vmce_migration_guard_free (VmceMigrationGuard *g)
{
  g_free (g->status);
  g_clear_pointer (&g->destination, vmce_vm_unref);
  g_clear_pointer (&g->last_destination, vmce_vm_unref);
  g_free (g->external_to);
  g_free (g->carrier);
  g_array_unref (g->told);
  g_free (g);
}

static VmceMigrationGuard *
vmce_migration_guard_new (void)
{
  VmceMigrationGuard *g = g_new0 (VmceMigrationGuard, 1);

  g->told = g_array_new (FALSE, FALSE, sizeof (VmceMigrationTold));
  g->domain_holds = -1;
  return g;
}

static VmceMigrationGuard *
vmce_migration_guard (VmceVm *vm)
{
  return vmce_vm_ensure_layer_data (vm, vmce_migration_guard_quark (), (VmceLayerNewFunc) vmce_migration_guard_new,
                                    (GDestroyNotify) vmce_migration_guard_free);
}

VmceMigrationPolicy
vmce_migration_guard_get_policy (VmceVm *vm)
{
  return vmce_migration_guard (vm)->policy;
}

void
vmce_migration_guard_set_policy (VmceVm *vm, VmceMigrationPolicy policy)
{
  vmce_migration_guard (vm)->policy = policy;
}

static gboolean
vmce_migration_is_running (const gchar *status)
{
  return status != NULL && g_strcmp0 (status, "none") != 0 &&
         g_strcmp0 (status, "completed") != 0 && g_strcmp0 (status, "failed") != 0 &&
         g_strcmp0 (status, "cancelled") != 0;
}

/* --- decisions ------------------------------------------------------------------- */

VmceMigrationAction
vmce_migration_decide (const gchar *was,
                       const gchar *status,
                       gboolean incoming,
                       VmceMigrationPolicy policy,
                       guint n_poisoned,
                       gboolean has_destination,
                       gboolean handing_over)
{
  gboolean was_running = vmce_migration_is_running (was);
  gboolean running = vmce_migration_is_running (status);

  if (incoming)
    return VMCE_MIGRATION_ACT_INCOMING;
  if (!was_running && running) {
    if (n_poisoned > 0 && policy == VMCE_MIGRATION_REFUSE)
      return VMCE_MIGRATION_ACT_REFUSE;
    /* with nothing poisoned yet the destination still holds its vCPUs
     * for an error that comes during the migration */
    if (has_destination)
      return VMCE_MIGRATION_ACT_HAND_OVER;
    return n_poisoned > 0 ? VMCE_MIGRATION_ACT_NO_DESTINATION : VMCE_MIGRATION_ACT_NONE;
  }
  if (!was_running || running || !handing_over)
    return VMCE_MIGRATION_ACT_NONE;
  return g_strcmp0 (status, "completed") == 0 ? VMCE_MIGRATION_ACT_HANDED_OVER : VMCE_MIGRATION_ACT_ENDED;
}

gboolean
vmce_migration_told_here (gboolean injected, gint64 written_us, gint64 stopped_us)
{
  /* a machine check written after the guest stopped for the last pass went
   * into a guest that no longer runs here, and one written just before it
   * may still have been pending in the vCPU: the destination tells it */
  return injected && (stopped_us == 0 || written_us + VMCE_MIGRATION_TAKE_US <= stopped_us);
}

gboolean
vmce_migration_takes_read (gboolean carrying, gboolean incoming, gboolean vcpu, gboolean poisoned)
{
  return carrying && !incoming && !vcpu && poisoned;
}

/* --- journal --------------------------------------------------------------------- */

static void
vmce_migration_journal (VmceVm *vm, const gchar *action, const gchar *status, GPtrArray *pages,
                        const gchar *destination, const gchar *detail)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;

  json_builder_begin_object (b);
  vmce_vm_begin_record (vm, b, "migration");
  json_builder_set_member_name (b, "action");
  json_builder_add_string_value (b, action);
  json_builder_set_member_name (b, "status");
  json_builder_add_string_value (b, status);
  json_builder_set_member_name (b, "policy");
  json_builder_add_string_value (b, vmce_migration_policy_to_string (vmce_migration_guard (vm)->policy));
  json_builder_set_member_name (b, "pages");
  json_builder_begin_array (b);
  for (guint i = 0; pages != NULL && i < pages->len; i++) {
    g_autofree gchar *gpa = vmce_hex (((VmcePoisonedPage *) g_ptr_array_index (pages, i))->gpa);
    json_builder_add_string_value (b, gpa);
  }
  json_builder_end_array (b);
  if (destination != NULL) {
    json_builder_set_member_name (b, "destination");
    json_builder_add_string_value (b, destination);
  }
  vmce_json_builder_add_int (b, "lent", vmce_migration_lend_count (vm));
  vmce_json_builder_add_int (b, "lent_held_us", vmce_migration_lend_held_us (vm));
  json_builder_set_member_name (b, "detail");
  json_builder_add_string_value (b, detail);
  json_builder_end_object (b);
  record = json_builder_get_root (b);
  vmce_vm_emit_record (vm, "MIGRATION", record);
}

/* --- the source ------------------------------------------------------------------ */

/* Cancelled before anything moved: one line, a record, and the cancel */
static void
vmce_migration_refuse (VmceVm *vm, const gchar *status, GPtrArray *pages, const gchar *why)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  g_autofree gchar *first = vmce_hex (((VmcePoisonedPage *) g_ptr_array_index (pages, 0))->gpa);
  g_autofree gchar *line = g_strdup_printf ("migration refused: %u poisoned page(s) (GPA %s%s): %s", pages->len,
                                            first, pages->len > 1 ? ", ..." : "", why);

  g->refused = TRUE;
  vmce_log_record (VMCE_LOG_MIGRATION_REFUSED, vmce_vm_get_name (vm),
                   &((VmcePoisonedPage *) g_ptr_array_index (pages, 0))->gpa, 0, "vm %s: %s", vmce_vm_get_name (vm),
                   line);
  vmce_migration_journal (vm, "refused", status, pages, NULL, line);
  vmce_vm_execute_or_warn (vm, "migrate_cancel", NULL, "cancel the migration");
}

static VmceVm *
vmce_migration_find_destination (VmceVm *source)
{
  GPtrArray *vms = vmce_vm_get_peers (source);
  VmceVm *found = NULL;

  for (guint i = 0; vms != NULL && i < vms->len; i++) {
    VmceVm *vm = g_ptr_array_index (vms, i);
    if (vm == source || !vmce_vm_is_incoming (vm) || vmce_vm_get_state (vm) != VMCE_VM_READY ||
        vmce_migration_incoming_is_receiving (vm))
      continue;
    if (found != NULL)
      return NULL; /* two could be it: neither is guessed */
    found = vm;
  }
  return found;
}

/* What can hold a page poisoned under this accelerator, or NULL */
static const gchar *
vmce_migration_cannot_hold (VmceVm *source, VmceVm *destination)
{
  if (vmce_poison_mark_unsupported () == NULL ||
      (!vmce_vm_is_kvm (source) && (destination == NULL || !vmce_vm_is_kvm (destination))))
    return NULL;
  return "under KVM a page is held poisoned only by UFFDIO_POISON, which this host's kernel lacks "
         "(Linux 6.6 added it)";
}

/* The destination's name for the journal */
static const gchar *
vmce_migration_destination_name (VmceMigrationGuard *g)
{
  return g->carrier != NULL ? g->carrier : "?";
}

/* @dst: a QEMU this vmced watches; NULL: the libvirt domain carries them */
static void
vmce_migration_hand_over (VmceVm *vm, const gchar *status, GPtrArray *pages, VmceVm *dst)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  g_autofree gchar *detail = NULL;
  g_autofree gchar *full = NULL;
  const gchar *cannot = vmce_migration_cannot_hold (vm, dst);
  guint told_qemu;

  if (cannot != NULL) {
    if (pages->len > 0)
      vmce_migration_refuse (vm, status, pages, cannot);
    return;
  }
  /* before its migration thread gets far: a page it reads before QEMU has
   * the list is lent all the same */
  told_qemu = vmce_qemu_hwpoison_add (vm, pages);
  g_clear_pointer (&g->destination, vmce_vm_unref);
  g->destination = dst != NULL ? vmce_vm_ref (dst) : NULL;
  g->carrying = TRUE;
  g->stopped_us = 0;
  g_array_set_size (g->told, 0);
  g_free (g->carrier);
  g->carrier = g_strdup (dst != NULL               ? vmce_vm_get_name (dst)
                         : g->external_to != NULL ? g->external_to
                                                  : VMCE_MIGRATION_BY_DOMAIN);
  g->started_us = g_get_monotonic_time ();
  vmce_migration_lend_reset (vm);
  if (dst != NULL)
    detail = g_strdup_printf ("%u poisoned page(s) handed to the destination, vm %s (watched by this vmced): "
                              "held poisoned there before its vCPUs run",
                              pages->len, vmce_vm_get_name (dst));
  else if (g->external_to != NULL)
    detail = g_strdup_printf ("%u poisoned page(s) handed over to %s by a client (vmcectl migrate): its vmced "
                              "holds them poisoned before its vCPUs run",
                              pages->len, g->external_to);
  else
    detail = g_strdup_printf ("%u poisoned page(s) go with the libvirt domain (its vmce metadata): the "
                              "destination host's vmced holds them poisoned before its vCPUs run",
                              pages->len);
  full = told_qemu > 0 ? g_strdup_printf ("%s; QEMU told of them (x-hwpoison-page-add, %u command(s)): its "
                                          "migration skips them and carries them itself", detail, told_qemu)
                       : g_strdup (detail);
  g_message ("vm %s: %s", vmce_vm_get_name (vm), full);
  vmce_migration_journal (vm, "handing-over", status, pages, vmce_migration_destination_name (g), full);
  if (dst != NULL)
    vmce_migration_incoming_receive (dst, vmce_vm_get_name (vm), pages);
}

static void
vmce_migration_end (VmceVm *vm, const gchar *status, GPtrArray *pages, gboolean completed)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  g_autofree gchar *to = g_strdup (vmce_migration_destination_name (g));
  g_autoptr(VmceVm) dst = g_steal_pointer (&g->destination);
  g_autofree gchar *detail = NULL;

  g->carrying = FALSE;
  g_clear_pointer (&g->external_to, g_free);
  if (completed) {
    detail = g_strdup_printf ("the migration to %s completed in %.1f s: it holds the %u poisoned page(s), "
                              "%u of them read by the migration as zeroed pages",
                              to, (g_get_monotonic_time () - g->started_us) / 1e6, pages->len,
                              vmce_migration_lend_count (vm));
    g_message ("vm %s: %s", vmce_vm_get_name (vm), detail);
    vmce_migration_journal (vm, "handed-over", status, pages, to, detail);
    g_clear_pointer (&g->last_destination, vmce_vm_unref);
    g->last_destination = dst != NULL ? vmce_vm_ref (dst) : NULL;
    g->completed_us = g_get_monotonic_time ();
    /* a found error still waiting out the gap goes into no guest here: it
     * went over untold, and the destination tells it */
    vmce_forward_hand_queued_to_migration (vm, "not injected here: the migration had completed (told on the "
                                               "destination, where it went untold)");
  } else {
    detail = g_strdup_printf ("the migration to %s ended %s: the source runs on, its %u poisoned page(s) "
                              "as they were",
                              to, status, pages->len);
    g_message ("vm %s: %s", vmce_vm_get_name (vm), detail);
    vmce_migration_journal (vm, "ended", status, pages, to, detail);
    /* (a destination QEMU killed mid-load is gone already) */
    if (dst != NULL && vmce_vm_get_state (dst) == VMCE_VM_READY)
      vmce_migration_incoming_abandon (dst, status);
  }
  vmce_migration_lend_reset (vm);
}

void
vmce_migration_guard_on_event (VmceVm *vm, JsonObject *data)
{
  const gchar *status = vmce_json_object_get_string_opt (data, "status");
  g_autoptr(GPtrArray) pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  g_autofree gchar *was = g_steal_pointer (&g->status);
  gboolean incoming = vmce_vm_is_incoming (vm) || vmce_migration_incoming_is_receiving (vm);
  VmceVm *dst = NULL;

  gboolean by_domain = FALSE;

  g->status = g_strdup (status);
  if (!incoming && !vmce_migration_is_running (was) && vmce_migration_is_running (status)) {
    dst = vmce_migration_find_destination (vm);
    /* a libvirt domain whose metadata holds every page carries them itself;
     * a client that handed them to another vmced (vmcectl migrate) did */
    by_domain = dst == NULL && ((vmce_vm_get_uuid (vm) != NULL && g->domain_holds == (gint) pages->len) ||
                                (g->external_to != NULL && g->external_pages == pages->len));
  }
  switch (vmce_migration_decide (was, status, incoming, g->policy, pages->len, dst != NULL || by_domain,
                                 g->carrying)) {
  case VMCE_MIGRATION_ACT_INCOMING:
    vmce_migration_incoming_on_status (vm, status);
    break;
  case VMCE_MIGRATION_ACT_REFUSE:
    vmce_migration_refuse (vm, status, pages, "reset the guest first (the pages are replaced), or set "
                                              "migration = carry");
    break;
  case VMCE_MIGRATION_ACT_NO_DESTINATION:
    vmce_migration_refuse (vm, status, pages,
                           vmce_vm_get_uuid (vm) != NULL
                             ? "its libvirt domain's metadata does not hold them all yet (written a moment "
                               "after each error): migrate again"
                             : "no destination QEMU this vmced watches is loading a migration (or more than "
                               "one is): nobody would hold them poisoned there");
    break;
  case VMCE_MIGRATION_ACT_HAND_OVER:
    vmce_migration_hand_over (vm, status, pages, dst);
    break;
  case VMCE_MIGRATION_ACT_HANDED_OVER:
  case VMCE_MIGRATION_ACT_ENDED:
    vmce_migration_end (vm, status, pages, g_strcmp0 (status, "completed") == 0);
    break;
  case VMCE_MIGRATION_ACT_NONE:
    if (g->refused && vmce_migration_is_running (was) && !vmce_migration_is_running (status)) {
      g_message ("vm %s: the refused migration ended (%s)", vmce_vm_get_name (vm), status);
      g->refused = FALSE;
    }
    break;
  }
}

void
vmce_migration_guard_on_error (VmceVm *vm, const VmceMceEvent *ev)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  g_autoptr(GPtrArray) one = NULL;
  VmceVm *dst = g->destination;
  VmcePoisonedPage page = { 0 };

  /* (one the migration took out of the queue went over untold already) */
  if (!ev->have_gpa || g_strcmp0 (ev->source, "inject") == 0 || ev->result == VMCE_RESULT_MIGRATED)
    return;
  if (dst == NULL && !g->refused && !vmce_vm_is_incoming (vm) && vmce_migration_is_running (g->status)) {
    /* a migration to another host (its domain's metadata went with it
     * already), or one nobody takes the pages over in: the destination
     * would not know the page */
    g_warning ("vm %s: a memory error at GPA 0x%" G_GINT64_MODIFIER "x during a migration whose destination "
               "would not know of it: the migration is cancelled (migrate again)",
               vmce_vm_get_name (vm), ev->gpa);
    vmce_vm_execute_or_warn (vm, "migrate_cancel", NULL, "cancel the migration");
    return;
  }

  /* an error that stopped QEMU before the migration completed, and was
   * done with after it, is the destination's too */
  if (dst == NULL && g->last_destination != NULL && ev->stop_us <= g->completed_us &&
      vmce_vm_get_state (g->last_destination) == VMCE_VM_READY)
    dst = g->last_destination;
  /* (the session records the page only once the event is journaled) */
  if (dst == NULL)
    return;
  page.gpa = ev->gpa & VMCE_PAGE_MASK;
  page.hva = ev->hva & VMCE_PAGE_MASK;
  page.kind = ev->kind;
  page.simulated = g_strcmp0 (ev->source, "simulated") == 0;
  page.host_poisoned = TRUE;
  page.result = ev->result;
  page.count = vmce_migration_told_here (ev->result == VMCE_RESULT_INJECTED, ev->stop_us + ev->to_monitor_us,
                                         g->stopped_us)
                 ? 1
                 : 0;
  page.time_us = g_get_real_time ();
  one = g_ptr_array_new ();
  g_ptr_array_add (one, &page);
  if (g->carrying && page.count > 0 && g->stopped_us == 0) {
    VmceMigrationTold t = { page.gpa, page.hva, page.simulated, ev->stop_us + ev->to_monitor_us };
    g_array_append_val (g->told, t);
  }
  if (g->carrying)
    vmce_qemu_hwpoison_add (vm, one);
  vmce_migration_journal (vm, "handing-over", g->status, one, vmce_vm_get_name (dst),
                          "poisoned during the migration: handed to the destination as well");
  vmce_migration_incoming_receive (dst, vmce_vm_get_name (vm), one);
}

void
vmce_migration_guard_on_stop (VmceVm *vm, gint64 qemu_time_us)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  g_autoptr(GPtrArray) again = NULL;
  gint64 time_us;

  if (!g->carrying || g->stopped_us != 0)
    return;
  /* QEMU's timestamp is the wall clock's; an event's times here are
   * monotonic (compared with them as they were, the guest seemed never to
   * have stopped, and a machine check written after it was taken for told) */
  time_us = g_get_monotonic_time () - MAX (0, g_get_real_time () - qemu_time_us);
  g->stopped_us = time_us;
  /* the machine checks given to QEMU just before: the vCPU may not have
   * taken them, and a pending one does not migrate */
  again = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < g->told->len; i++) {
    const VmceMigrationTold *t = &g_array_index (g->told, VmceMigrationTold, i);
    VmcePoisonedPage *p;

    if (vmce_migration_told_here (TRUE, t->written_us, time_us))
      continue;
    p = g_new0 (VmcePoisonedPage, 1);
    p->gpa = t->gpa;
    p->hva = t->hva;
    p->kind = VMCE_MCE_KIND_AO;
    p->simulated = t->simulated;
    p->host_poisoned = TRUE;
    p->result = VMCE_RESULT_PENDING;
    p->retell = TRUE;
    p->time_us = g_get_real_time ();
    g_ptr_array_add (again, p);
  }
  g_array_set_size (g->told, 0);
  if (again->len == 0 || g->destination == NULL)
    return;
  vmce_migration_journal (vm, "handing-over", g->status, again, vmce_vm_get_name (g->destination),
                          "told to QEMU just before the guest stopped for the last pass: the vCPU may not have "
                          "taken it, told again on the destination");
  vmce_migration_incoming_receive (g->destination, vmce_vm_get_name (vm), again);
}

void
vmce_migration_guard_expect_external (VmceVm *vm, const gchar *to, guint n_pages)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);

  g_free (g->external_to);
  g->external_to = g_strdup (to);
  g->external_pages = n_pages;
}

void
vmce_migration_guard_set_domain_holds (VmceVm *vm, guint n_pages)
{
  vmce_migration_guard (vm)->domain_holds = (gint) n_pages;
}

void
vmce_migration_guard_on_detach (VmceVm *vm)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  g_autoptr(VmceVm) dst = g_steal_pointer (&g->destination);

  if (dst != NULL)
    vmce_migration_incoming_abandon (dst, "vmced lost the source QEMU");
}

gboolean
vmce_migration_guard_signal (VmceVm *vm, const VmceStop *stop)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  guint64 hva = (guint64) (guintptr) stop->info.si_addr;
  guint64 gpa = 0;
  VmcePoisonedPage *p = vmce_vm_find_host_poisoned (vm, hva, &gpa);

  /* (a refused one may reach a page before its cancel lands) */
  gboolean carrying = g->carrying || (g->refused && vmce_migration_is_running (g->status));

  if (!vmce_migration_takes_read (carrying, vmce_vm_is_incoming (vm),
                                  vmce_vm_find_vcpu_by_tid (vm, stop->tid) != NULL, p != NULL))
    return FALSE;
  vmce_migration_lend (vm, stop, p);
  return TRUE;
}

void
vmce_migration_guard_to_json (VmceVm *vm, JsonBuilder *b)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);

  json_builder_set_member_name (b, "migration");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "policy");
  json_builder_add_string_value (b, vmce_migration_policy_to_string (g->policy));
  json_builder_set_member_name (b, "status");
  json_builder_add_string_value (b, g->status != NULL ? g->status : "none");
  json_builder_set_member_name (b, "incoming");
  json_builder_add_boolean_value (b, vmce_vm_is_incoming (vm));
  if (g->carrying) {
    json_builder_set_member_name (b, "destination");
    json_builder_add_string_value (b, vmce_migration_destination_name (g));
  }
  if (g->domain_holds >= 0)
    vmce_json_builder_add_int (b, "domain_metadata_pages", g->domain_holds);
  vmce_migration_incoming_to_json (vm, b);
  json_builder_end_object (b);
}
