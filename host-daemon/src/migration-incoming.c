/*
 * A migration's destination (see migration-incoming.h).
 *
 * The rule is that after a migration the guest sees what it saw before: a
 * page its source had poisoned is poisoned here too before any vCPU runs,
 * told or not as it was there (a page of a lost huge page never reported
 * stays untold until the guest reads it).
 * QEMU loads into fresh memory, so the pages can only be poisoned once the
 * load is over, and before the guest runs: vmced turns the destination's
 * autostart off when the pages arrive (QMP `stop` while QEMU is still
 * "inmigrate" does only that, as libvirt uses it), puts the marks in when
 * the load has completed, journals them, and then lets the guest run
 * (`cont`), unless QEMU was started with -S, whose owner (libvirt, an
 * operator) resumes it. Holding the vCPU threads with ptrace instead would
 * do under KVM only after the load (QEMU waits for work on each vCPU then)
 * and, for the length of a migration, risks one held with the BQL taken,
 * which stops QEMU's main loop and with it the load (seen under TCG).
 * The marks are the kernel's own (UFFDIO_POISON, poison-mark.c): every
 * thread and KVM fault on them. Without it (Linux < 6.6), under TCG a page
 * is taken away (PROT_NONE), as the simulator does; under KVM nothing
 * holds, which the source refuses before anything moves.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-migration"

#include <string.h>
#include <sys/mman.h>

#include "json-util.h"
#include "migration-incoming.h"
#include "page.h"
#include "poison-mark.h"
#include "remote-syscall.h"
#include "sim-poison.h"

typedef struct {
  gchar *source;
  GPtrArray *pages;     /* of VmcePoisonedPage, copies of the source's */
  gboolean stopped;     /* vmced turned its autostart off */
  gboolean resume;      /* ... and lets it run once the marks are in (no -S) */
  gboolean ran_before;  /* the guest was running when they arrived: too late */
  gint64 loaded_us;     /* when its load completed */
  gboolean late;        /* received after that: the guest may have run */
} VmceIncoming;

GQuark vmce_migration_incoming_quark (void);
G_DEFINE_QUARK (vmce-migration-incoming, vmce_migration_incoming)

static void
vmce_incoming_free (VmceIncoming *in)
{
  g_free (in->source);
  g_clear_pointer (&in->pages, g_ptr_array_unref);
  g_free (in);
}

static VmceIncoming *
vmce_incoming_new (void)
{
  return g_new0 (VmceIncoming, 1);
}

static VmceIncoming *
vmce_incoming (VmceVm *vm)
{
  return vmce_vm_ensure_layer_data (vm, vmce_migration_incoming_quark (), (VmceLayerNewFunc) vmce_incoming_new,
                                    (GDestroyNotify) vmce_incoming_free);
}

static void
vmce_incoming_reset (VmceIncoming *in)
{
  g_clear_pointer (&in->source, g_free);
  g_clear_pointer (&in->pages, g_ptr_array_unref);
  in->stopped = FALSE;
  in->resume = FALSE;
  in->ran_before = FALSE;
  in->loaded_us = 0;
  in->late = FALSE;
}

static void
vmce_incoming_journal (VmceVm *vm, const gchar *action, GPtrArray *pages, guint marked, const gchar *how,
                       gint64 paused_us, const gchar *detail)
{
  VmceIncoming *in = vmce_incoming (vm);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;

  json_builder_begin_object (b);
  vmce_vm_begin_record (vm, b, "migration");
  json_builder_set_member_name (b, "action");
  json_builder_add_string_value (b, action);
  json_builder_set_member_name (b, "source");
  json_builder_add_string_value (b, in->source != NULL ? in->source : "");
  json_builder_set_member_name (b, "pages");
  json_builder_begin_array (b);
  for (guint i = 0; pages != NULL && i < pages->len; i++) {
    const VmcePoisonedPage *p = g_ptr_array_index (pages, i);
    json_builder_begin_object (b);
    vmce_json_builder_add_hex (b, "gpa", p->gpa);
    json_builder_set_member_name (b, "told");
    json_builder_add_boolean_value (b, vmce_poisoned_page_told (p));
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
  if (how != NULL) {
    vmce_json_builder_add_int (b, "marked", marked);
    json_builder_set_member_name (b, "how");
    json_builder_add_string_value (b, how);
    vmce_json_builder_add_int (b, "paused_us", paused_us);
  }
  json_builder_set_member_name (b, "detail");
  json_builder_add_string_value (b, detail);
  json_builder_end_object (b);
  record = json_builder_get_root (b);
  vmce_vm_emit_record (vm, "MIGRATION", record);
}

static void vmce_incoming_mark_cb (VmcePtraceWatch *watch, pid_t tid, gpointer user_data);

static void
vmce_incoming_qmp_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) vm = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);

  if (ret == NULL)
    g_warning ("vm %s: %s", vmce_vm_get_name (vm), error->message);
}

/* Whether QEMU was started with -S: its owner resumes it */
static gboolean
vmce_incoming_started_paused (VmceVm *vm)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/cmdline", vmce_vm_get_pid (vm));
  g_autofree gchar *cmdline = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &cmdline, &len, NULL))
    return TRUE; /* not known: not vmced's to resume */
  for (gsize i = 0; i < len; i += strlen (cmdline + i) + 1)
    if (g_strcmp0 (cmdline + i, "-S") == 0)
      return TRUE;
  return FALSE;
}

void
vmce_migration_incoming_receive (VmceVm *dst, const gchar *source, GPtrArray *pages)
{
  VmceIncoming *in = vmce_incoming (dst);
  g_autoptr(GPtrArray) added = g_ptr_array_new ();
  g_autofree gchar *detail = NULL;

  if (in->pages == NULL && !vmce_vm_is_incoming (dst)) {
    /* an error the source's vmced was done with after the migration
     * completed, and this end had its marks in already */
    in->pages = g_ptr_array_new_with_free_func (g_free);
    in->source = g_strdup (source);
    in->late = TRUE;
    in->ran_before = vmce_vm_is_running (dst);
  } else if (in->pages == NULL) {
    in->pages = g_ptr_array_new_with_free_func (g_free);
    in->source = g_strdup (source);
    in->ran_before = vmce_vm_is_running (dst);
    in->resume = !vmce_incoming_started_paused (dst);
    in->stopped = TRUE;
    /* while it is "inmigrate", stop only turns its autostart off */
    vmce_qmp_client_execute_async (vmce_vm_get_qmp (dst), "stop", NULL, NULL, vmce_incoming_qmp_cb,
                                   vmce_vm_ref (dst));
  }
  for (guint i = 0; i < pages->len; i++) {
    VmcePoisonedPage *copy = g_memdup2 (g_ptr_array_index (pages, i), sizeof (VmcePoisonedPage));
    g_ptr_array_add (in->pages, copy);
    g_ptr_array_add (added, copy);
  }
  detail = g_strdup_printf ("%u page(s) poisoned on %s to hold poisoned here: %s", added->len, source,
                            in->late     ? "now, the guest running (the error came as the migration completed)"
                            : in->resume ? "the guest waits for them"
                                         : "the guest waits for them, then for its owner's cont (-S)");
  g_message ("vm %s: %s", vmce_vm_get_name (dst), detail);
  vmce_incoming_journal (dst, "receiving", added, 0, NULL, 0, detail);
  if (in->late && in->loaded_us == 0) {
    in->loaded_us = g_get_monotonic_time ();
    vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (dst), vmce_vm_get_pid (dst), vmce_incoming_mark_cb,
                                    vmce_vm_ref (dst), (GDestroyNotify) vmce_vm_unref);
  }
}

gboolean
vmce_migration_incoming_is_receiving (VmceVm *dst)
{
  return vmce_incoming (dst)->pages != NULL;
}

/* One page poisoned in @dst's memory by @tid's system calls; @how says
 * which way */
static gboolean
vmce_incoming_mark_page (VmceVm *dst, pid_t tid, VmcePoisonedPage *p, guint64 *hva, const gchar **how,
                         GError **error)
{
  const VmceRamRange *range = NULL;
  VmcePoisonedPage *added;

  if (!vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (dst), p->gpa, hva, &range)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "GPA 0x%" G_GINT64_MODIFIER "x is not guest RAM here",
                 p->gpa);
    return FALSE;
  }
  if (vmce_poison_mark_unsupported () == NULL) {
    if (!vmce_poison_mark (vmce_vm_get_pid (dst), tid, *hva, error))
      return FALSE;
    *how = "UFFDIO_POISON";
  } else if (!vmce_vm_is_kvm (dst)) {
    if (!vmce_remote_mprotect (vmce_vm_get_pid (dst), tid, *hva & VMCE_PAGE_MASK, VMCE_PAGE_SIZE, PROT_NONE, error))
      return FALSE;
    *how = "PROT_NONE (no UFFDIO_POISON in this kernel)";
  } else {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "%s", vmce_poison_mark_unsupported ());
    return FALSE;
  }
  /* its fault is a memory error here as it was there */
  vmce_sim_adopt_page (dst, *hva, p->gpa);
  added = vmce_poison_set_add_migrated (vmce_vm_get_poisoned (dst), p, *hva);
  (void) added;
  return TRUE;
}

/* In a stopped thread of QEMU (its main thread), the guest paused */
static void
vmce_incoming_mark_cb (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  /* the op's reference: dropped here, or by the watch if it never runs */
  g_autoptr(VmceVm) dst = user_data;
  VmceIncoming *in = vmce_incoming (dst);
  gint64 paused_us = g_get_monotonic_time () - in->loaded_us;
  g_autoptr(GString) failed = g_string_new (NULL);
  g_autofree gchar *detail = NULL;
  const gchar *how = "none";
  guint marked = 0;

  if (in->pages == NULL)
    return; /* abandoned meanwhile */
  for (guint i = 0; i < in->pages->len; i++) {
    VmcePoisonedPage *p = g_ptr_array_index (in->pages, i);
    g_autoptr(GError) error = NULL;
    guint64 hva = 0;

    if (vmce_poison_set_lookup (vmce_vm_get_poisoned (dst), p->gpa) != NULL) {
      marked++; /* received twice: a second error on the page */
      continue;
    }
    if (!vmce_incoming_mark_page (dst, tid, p, &hva, &how, &error)) {
      g_string_append_printf (failed, "%sGPA 0x%" G_GINT64_MODIFIER "x: %s", failed->len > 0 ? "; " : "",
                              p->gpa, error->message);
      continue;
    }
    marked++;
  }
  if (failed->len > 0) {
    detail = g_strdup_printf ("%u of %u page(s) from %s NOT poisoned here: %s", in->pages->len - marked,
                              in->pages->len, in->source, failed->str);
    g_warning ("vm %s: %s", vmce_vm_get_name (dst), detail);
  } else {
    detail = g_strdup_printf ("%u page(s) from %s poisoned here %s", marked, in->source,
                              in->late         ? "as it ran: the error came as the migration completed"
                              : in->ran_before ? "(but the guest was running when they arrived)"
                                               : "before the guest ran");
    g_message ("vm %s: %s (%s; the guest paused %.1f ms for it)", vmce_vm_get_name (dst), detail, how,
               paused_us / 1000.0);
  }
  vmce_incoming_journal (dst, "received", in->pages, marked, how, paused_us, detail);
  if (in->resume)
    vmce_qmp_client_execute_async (vmce_vm_get_qmp (dst), "cont", NULL, NULL, vmce_incoming_qmp_cb,
                                   vmce_vm_ref (dst));
  vmce_incoming_reset (in);
}

void
vmce_migration_incoming_on_status (VmceVm *dst, const gchar *status)
{
  VmceIncoming *in = vmce_incoming (dst);

  if (in->pages == NULL)
    return;
  if (g_strcmp0 (status, "failed") == 0 || g_strcmp0 (status, "cancelled") == 0) {
    vmce_migration_incoming_abandon (dst, "its load failed");
    return;
  }
  if (g_strcmp0 (status, "completed") != 0 || in->loaded_us != 0)
    return;
  in->loaded_us = g_get_monotonic_time ();
  vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (dst), vmce_vm_get_pid (dst), vmce_incoming_mark_cb,
                                  vmce_vm_ref (dst), (GDestroyNotify) vmce_vm_unref);
}

void
vmce_migration_incoming_abandon (VmceVm *dst, const gchar *why)
{
  VmceIncoming *in = vmce_incoming (dst);
  g_autofree gchar *detail = NULL;

  if (in->pages == NULL)
    return;
  detail = g_strdup_printf ("the migration from %s did not complete (%s): its %u page(s) are not held here",
                            in->source, why, in->pages->len);
  g_message ("vm %s: %s", vmce_vm_get_name (dst), detail);
  vmce_incoming_journal (dst, "abandoned", in->pages, 0, NULL, 0, detail);
  vmce_incoming_reset (in);
}

void
vmce_migration_incoming_to_json (VmceVm *dst, JsonBuilder *b)
{
  VmceIncoming *in = vmce_incoming (dst);

  if (in->pages == NULL)
    return;
  json_builder_set_member_name (b, "receiving");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "source");
  json_builder_add_string_value (b, in->source);
  vmce_json_builder_add_int (b, "pages", in->pages->len);
  json_builder_set_member_name (b, "autostart_off");
  json_builder_add_boolean_value (b, in->stopped);
  json_builder_end_object (b);
}
