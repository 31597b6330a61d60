/*
 * A migration of a VM with poisoned memory (see migration-guard.h).
 *
 * Without vmced, QEMU's migration thread reads every page of guest RAM;
 * a poisoned one sends it SIGBUS BUS_MCEERR_AR, which that thread (as every
 * thread QEMU makes but the vCPUs) has blocked, so the kernel delivers it at
 * its default action and QEMU dies without a word of its own (its
 * sigbus_handler(), and the vCPU path's message, never run; docs/operator.md,
 * Migration). QEMU 9.0 refuses to start
 * a migration of a VM with poisoned memory (06152b89db64, "migration:
 * prevent migration when VM has poisoned memory"), which it can do because
 * it knows the pages; with vmced taking the signals it does not, so vmced
 * keeps the promise, by the policy `migration` of vmced.conf:
 *  - refuse (the default): when QEMU announces a migration (MIGRATION,
 *    status setup), vmced cancels it and says why, in one line and in the
 *    journal. That answers the setup event, so the migration thread may
 *    reach a poisoned page before the cancel lands: it then reads a zeroed
 *    page, which goes nowhere, and the page is taken away again once the
 *    migration has ended (a guest access still raises a machine check);
 *  - allow-zero: the migration goes on; each poisoned page the migration
 *    thread reads is a zeroed one, and the destination (a QEMU this vmced
 *    watches, loading the migration) gets those pages marked poisoned when
 *    it runs, so its guest is told again and a touch still faults.
 * A migration is seen through MIGRATION events: vmced turns the `events`
 * capability on for the QEMUs it attaches to itself (libvirt does so for
 * its domains).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-migration"

#include <sys/mman.h>

#include "json-util.h"
#include "log-writer.h"
#include "migration-guard.h"
#include "page-replace.h"
#include "page.h"
#include "remote-syscall.h"
#include "sim-poison.h"

#define VMCE_MARK_TIMEOUT_MS 30000

/* The guard's own, per VM (layer data of the session) */
typedef struct {
  VmceMigrationPolicy policy;
  gchar *status;     /* of the last MIGRATION event, or NULL */
  gboolean refused;
  GArray *marks;     /* GPAs to mark poisoned once it runs */
} VmceMigrationGuard;

GQuark vmce_migration_guard_quark (void);
G_DEFINE_QUARK (vmce-migration-guard, vmce_migration_guard)

static void
vmce_migration_guard_free (VmceMigrationGuard *g)
{
  g_free (g->status);
  g_clear_pointer (&g->marks, g_array_unref);
  g_free (g);
}

static VmceMigrationGuard *
vmce_migration_guard_new (void)
{
  return g_new0 (VmceMigrationGuard, 1);
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

/* --- journal --------------------------------------------------------------------- */

static void
vmce_migration_add_pages (JsonBuilder *b, const gchar *member, GPtrArray *pages, gboolean zeroed_only)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_array (b);
  for (guint i = 0; i < pages->len; i++) {
    const VmcePoisonedPage *p = g_ptr_array_index (pages, i);
    g_autofree gchar *gpa = vmce_hex (p->gpa);
    if (!zeroed_only || p->zeroed_for_migration)
      json_builder_add_string_value (b, gpa);
  }
  json_builder_end_array (b);
}

static void
vmce_migration_journal (VmceVm *vm,
                        const gchar *action,
                        const gchar *status,
                        const gchar *detail,
                        const gchar *destination,
                        gboolean zeroed_only)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;
  g_autoptr(GPtrArray) pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));

  json_builder_begin_object (b);
  vmce_vm_begin_record (vm, b, "migration");
  json_builder_set_member_name (b, "action");
  json_builder_add_string_value (b, action);
  json_builder_set_member_name (b, "status");
  json_builder_add_string_value (b, status);
  json_builder_set_member_name (b, "policy");
  json_builder_add_string_value (b, vmce_migration_policy_to_string (vmce_migration_guard (vm)->policy));
  vmce_migration_add_pages (b, zeroed_only ? "pages_zeroed" : "pages", pages, zeroed_only);
  if (destination != NULL) {
    json_builder_set_member_name (b, "destination");
    json_builder_add_string_value (b, destination);
  }
  json_builder_set_member_name (b, "detail");
  json_builder_add_string_value (b, detail);
  json_builder_end_object (b);
  record = json_builder_get_root (b);
  vmce_vm_emit_record (vm, "MIGRATION", record);
}

/* --- the source ------------------------------------------------------------------ */

static void
vmce_migration_cancel_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) vm = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;

  ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  if (ret == NULL)
    g_warning ("vm %s: cannot cancel the migration: %s", vmce_vm_get_name (vm), error->message);
}

static void
vmce_migration_start (VmceVm *vm, const gchar *status)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  g_autoptr(GPtrArray) pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));
  g_autofree gchar *why = NULL;
  g_autofree gchar *first = NULL;

  g->refused = FALSE;
  if (pages->len == 0)
    return;
  first = vmce_hex (((VmcePoisonedPage *) g_ptr_array_index (pages, 0))->gpa);
  if (g->policy == VMCE_MIGRATION_ALLOW_ZERO) {
    why = g_strdup_printf ("migration with %u poisoned page(s) (GPA %s%s) allowed: the "
                           "destination gets them zeroed, and marked poisoned if vmced watches it",
                           pages->len, first, pages->len > 1 ? ", ..." : "");
    g_message ("vm %s: %s", vmce_vm_get_name (vm), why);
    vmce_migration_journal (vm, "allowed", status, why, NULL, FALSE);
    return;
  }
  g->refused = TRUE;
  why = g_strdup_printf ("migration refused: %u poisoned page(s) (GPA %s%s) would reach the "
                         "destination as data; reset the guest first (the pages are replaced), "
                         "or set migration = allow-zero",
                         pages->len, first, pages->len > 1 ? ", ..." : "");
  vmce_log_record (VMCE_LOG_MIGRATION_REFUSED, vmce_vm_get_name (vm),
                   &((VmcePoisonedPage *) g_ptr_array_index (pages, 0))->gpa, 0, "vm %s: %s",
                   vmce_vm_get_name (vm), why);
  vmce_migration_journal (vm, "refused", status, why, NULL, FALSE);
  vmce_qmp_client_execute_async (vmce_vm_get_qmp (vm), "migrate_cancel", NULL, NULL, vmce_migration_cancel_cb,
                                 vmce_vm_ref (vm));
}

/* The source runs on (the migration failed or was cancelled): a page the
 * migration thread was given zeroed is taken away again, so the guest
 * still gets a machine check if it touches it */
static void
vmce_migration_guard_again_cb (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceVm *vm = user_data;
  g_autoptr(GPtrArray) pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));

  for (guint i = 0; i < pages->len; i++) {
    VmcePoisonedPage *p = g_ptr_array_index (pages, i);
    g_autoptr(GError) error = NULL;

    if (!p->zeroed_for_migration)
      continue;
    p->zeroed_for_migration = FALSE;
    if (!vmce_remote_mprotect (vmce_vm_get_pid (vm), tid, p->hva, VMCE_PAGE_SIZE, PROT_NONE, &error)) {
      g_warning ("vm %s: cannot take the page at GPA 0x%" G_GINT64_MODIFIER "x away again: %s",
                 vmce_vm_get_name (vm), p->gpa, error->message);
      continue;
    }
    vmce_sim_adopt_page (vm, p->hva, p->gpa);
  }
  vmce_vm_unref (vm);
}

static guint
vmce_migration_count_zeroed (GPtrArray *pages)
{
  guint n = 0;

  for (guint i = 0; i < pages->len; i++)
    n += ((VmcePoisonedPage *) g_ptr_array_index (pages, i))->zeroed_for_migration;
  return n;
}

/* --- the destination ----------------------------------------------------------------- */

static void
vmce_migration_mark_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) vm = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ev = vmce_sim_poison_finish (vm, res, &error);

  if (ev == NULL)
    g_warning ("vm %s: cannot mark a page poisoned after its migration: %s", vmce_vm_get_name (vm),
               error->message);
}

static void
vmce_migration_mark_pending (VmceVm *vm)
{
  g_autoptr(GArray) marks = g_steal_pointer (&vmce_migration_guard (vm)->marks);
  g_autoptr(GString) list = g_string_new (NULL);

  if (marks == NULL || marks->len == 0)
    return;
  for (guint i = 0; i < marks->len; i++) {
    guint64 gpa = g_array_index (marks, guint64, i);
    g_string_append_printf (list, "%s0x%" G_GINT64_MODIFIER "x", i > 0 ? ", " : "", gpa);
    /* what the source's host kernel told it: the guest hears of the page
     * again (a guest that isolated it says so), and a touch faults */
    vmce_sim_poison_async (vm, gpa, FALSE, VMCE_MCE_KIND_AO, VMCE_SIM_TRIGGER_NOW, -1, VMCE_PAGE_SHIFT,
                           VMCE_MARK_TIMEOUT_MS, vmce_migration_mark_cb, vmce_vm_ref (vm));
  }
  g_message ("vm %s: %u page(s) that reached it zeroed by migration marked poisoned: %s",
             vmce_vm_get_name (vm), marks->len, list->str);
}

static VmceVm *
vmce_migration_find_destination (VmceVm *source)
{
  GPtrArray *vms = vmce_vm_get_peers (source);
  VmceVm *found = NULL;

  for (guint i = 0; i < vms->len; i++) {
    VmceVm *vm = g_ptr_array_index (vms, i);
    if (vm == source || !vmce_vm_is_incoming (vm) || vmce_vm_get_state (vm) != VMCE_VM_READY)
      continue;
    if (found != NULL)
      return NULL; /* two could be it: neither is guessed */
    found = vm;
  }
  return found;
}

static void
vmce_migration_completed (VmceVm *vm, const gchar *status)
{
  g_autoptr(GPtrArray) pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));
  g_autoptr(GString) hint = g_string_new (NULL);
  guint n = vmce_migration_count_zeroed (pages);
  VmceVm *dst = vmce_migration_find_destination (vm);

  if (dst == NULL) {
    g_string_append_printf (hint, "%u page(s) reached the destination zeroed; vmced does not "
                                  "watch it (or cannot tell which it is): mark them there with "
                                  "vmcectl poison DESTINATION --gpa GPA",
                            n);
    g_warning ("vm %s: %s", vmce_vm_get_name (vm), hint->str);
    vmce_migration_journal (vm, "completed", status, hint->str, NULL, TRUE);
    return;
  }
  g_string_append_printf (hint, "%u page(s) reached vm %s zeroed: marked poisoned there once it "
                                "runs",
                          n, vmce_vm_get_name (dst));
  vmce_migration_journal (vm, "completed", status, hint->str, vmce_vm_get_name (dst), TRUE);
  if (vmce_migration_guard (dst)->marks == NULL)
    vmce_migration_guard (dst)->marks = g_array_new (FALSE, FALSE, sizeof (guint64));
  for (guint i = 0; i < pages->len; i++) {
    const VmcePoisonedPage *p = g_ptr_array_index (pages, i);
    if (p->zeroed_for_migration)
      g_array_append_val (vmce_migration_guard (dst)->marks, p->gpa);
  }
  if (vmce_vm_is_running (dst))
    vmce_migration_mark_pending (dst);
}

VmceMigrationAction
vmce_migration_decide (const gchar *was,
                       const gchar *status,
                       gboolean incoming,
                       VmceMigrationPolicy policy,
                       guint n_poisoned,
                       guint n_zeroed)
{
  gboolean was_running = vmce_migration_is_running (was);
  gboolean running = vmce_migration_is_running (status);

  /* a destination's own events: only the end of its loading counts */
  if (incoming)
    return g_strcmp0 (status, "completed") == 0 ? VMCE_MIGRATION_ACT_LOADED
                                                : VMCE_MIGRATION_ACT_NONE;
  if (!was_running && running) {
    if (n_poisoned == 0)
      return VMCE_MIGRATION_ACT_NONE;
    return policy == VMCE_MIGRATION_REFUSE ? VMCE_MIGRATION_ACT_REFUSE : VMCE_MIGRATION_ACT_ALLOW;
  }
  if (!was_running || running || n_zeroed == 0)
    return VMCE_MIGRATION_ACT_NONE;
  /* it ended: the pages went to a destination, or the source runs on */
  return g_strcmp0 (status, "completed") == 0 ? VMCE_MIGRATION_ACT_HAND_OVER
                                              : VMCE_MIGRATION_ACT_TAKE_BACK;
}

gboolean
vmce_migration_takes_read (const gchar *status, gboolean incoming, gboolean vcpu, gboolean poisoned)
{
  return vmce_migration_is_running (status) && !incoming && !vcpu && poisoned;
}

void
vmce_migration_guard_on_event (VmceVm *vm, JsonObject *data)
{
  const gchar *status = vmce_json_object_get_string_opt (data, "status");
  g_autoptr(GPtrArray) pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  g_autofree gchar *was = g_steal_pointer (&g->status);

  g->status = g_strdup (status);
  switch (vmce_migration_decide (was, status, vmce_vm_is_incoming (vm), g->policy, pages->len,
                                 vmce_migration_count_zeroed (pages))) {
  case VMCE_MIGRATION_ACT_LOADED:
    /* the session, which heard the event too, knows it runs on its own now */
    break;
  case VMCE_MIGRATION_ACT_REFUSE:
  case VMCE_MIGRATION_ACT_ALLOW:
    vmce_migration_start (vm, status);
    break;
  case VMCE_MIGRATION_ACT_HAND_OVER:
    vmce_migration_completed (vm, status);
    break;
  case VMCE_MIGRATION_ACT_TAKE_BACK:
    if (vmce_vm_get_watch (vm) == NULL)
      break;
    vmce_migration_journal (vm, "ended", status,
                            "the source runs on: the pages the migration read zeroed are taken "
                            "away again",
                            NULL, TRUE);
    /* the op's reference is dropped by the op, or if it never runs */
    vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (vm), vmce_vm_get_pid (vm), vmce_migration_guard_again_cb,
                                    vmce_vm_ref (vm), (GDestroyNotify) vmce_vm_unref);
    break;
  case VMCE_MIGRATION_ACT_NONE:
    if (g->refused && vmce_migration_is_running (was) &&
        !vmce_migration_is_running (status)) {
      g_message ("vm %s: the refused migration ended (%s)", vmce_vm_get_name (vm), status);
      g->refused = FALSE;
    }
    break;
  }
}

void
vmce_migration_guard_on_resume (VmceVm *vm)
{
  vmce_migration_mark_pending (vm);
}

gboolean
vmce_migration_guard_signal (VmceVm *vm, const VmceStop *stop)
{
  VmceMigrationGuard *g = vmce_migration_guard (vm);
  pid_t tid = stop->tid;
  guint64 hva = (guint64) (guintptr) stop->info.si_addr;
  g_autoptr(VmceVmaTable) vmas = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;
  VmcePageReplace r = { 0 };
  VmcePoisonedPage *p;
  guint64 gpa = 0;

  p = vmce_vm_find_host_poisoned (vm, hva, &gpa);
  if (!vmce_migration_takes_read (g->status, vmce_vm_is_incoming (vm),
                                  vmce_vm_find_vcpu_by_tid (vm, tid) != NULL, p != NULL))
    return FALSE;
  vmas = vmce_vma_table_read (vmce_vm_get_pid (vm), &error);
  if (vmas == NULL || !vmce_page_replace (vmce_vm_get_pid (vm), tid, vmas, hva, &r, &error)) {
    g_warning ("vm %s: the migration read the poisoned page at GPA 0x%" G_GINT64_MODIFIER
               "x, which cannot be replaced: %s",
               vmce_vm_get_name (vm), gpa, error->message);
    vmce_page_replace_clear (&r);
    return FALSE;
  }
  p->zeroed_for_migration = TRUE;
  vmce_sim_forget_page (vm, hva, "the page was given to the migration zeroed");
  json_builder_begin_object (b);
  vmce_vm_begin_record (vm, b, "page-replaced");
  vmce_json_builder_add_hex (b, "gpa", p->gpa);
  /* the page is fresh, the guest's data in it is still lost */
  json_builder_set_member_name (b, "still_poisoned");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_set_member_name (b, "detail");
  json_builder_add_string_value (b, g->refused
                                        ? "the migration thread read it before the cancel landed: "
                                          "it read a zeroed page, which goes nowhere"
                                        : "the migration thread read it: the destination gets a "
                                          "zeroed page (migration = allow-zero)");
  json_builder_set_member_name (b, "how");
  json_builder_add_string_value (b, r.how);
  json_builder_end_object (b);
  record = json_builder_get_root (b);
  vmce_vm_emit_record (vm, "PAGE_REPLACED", record);
  vmce_page_replace_clear (&r);
  vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), tid, 0);
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
  json_builder_end_object (b);
}
