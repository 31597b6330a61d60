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
 * operator) resumes it: while the marks go in, the vCPU threads are held
 * too (vcpu-hold.c), in case the owner resumes it meanwhile. Holding them
 * with ptrace for the whole load instead would not do: under KVM QEMU
 * waits for work on each vCPU at its end, and for the length of a
 * migration one may be held with the BQL taken, which stops QEMU's main
 * loop and with it the load (seen under TCG).
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

#include "forward.h"
#include "hugepage-loss.h"
#include "json-util.h"
#include "migration-incoming.h"
#include "page.h"
#include "poison-mark.h"
#include "remote-syscall.h"
#include "sim-poison.h"
#include "vcpu-hold.h"

typedef struct {
  gchar *source;
  GPtrArray *pages;     /* of VmcePoisonedPage, copies of the source's */
  gboolean stopped;     /* vmced turned its autostart off */
  gboolean resume;      /* ... and lets it run once the marks are in (no -S) */
  gboolean ran_before;  /* the guest was running when they arrived: too late */
  gint64 loaded_us;     /* when its load completed */
  VmceVcpuHold *hold;   /* from then until the marks are in */
  gboolean late;        /* received after that: the guest may have run */
  gboolean resume_late; /* ... and the vmced before this one was to let it run */
} VmceIncoming;

GQuark vmce_migration_incoming_quark (void);
G_DEFINE_QUARK (vmce-migration-incoming, vmce_migration_incoming)

static void
vmce_incoming_free (VmceIncoming *in)
{
  g_free (in->source);
  g_clear_pointer (&in->pages, g_ptr_array_unref);
  g_clear_pointer (&in->hold, vmce_vcpu_hold_release);
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
  g_clear_pointer (&in->hold, vmce_vcpu_hold_release);
  in->stopped = FALSE;
  in->resume = FALSE;
  in->ran_before = FALSE;
  in->loaded_us = 0;
  in->late = FALSE;
  in->resume_late = FALSE;
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
  /* (all a vmced restarted before the marks are in needs to put them in) */
  for (guint i = 0; pages != NULL && i < pages->len; i++)
    vmce_poisoned_page_carried_to_json (g_ptr_array_index (pages, i), b);
  json_builder_end_array (b);
  if (g_strcmp0 (action, "receiving") == 0) {
    json_builder_set_member_name (b, "autostart_off");
    json_builder_add_boolean_value (b, in->stopped);
  }
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

static void vmce_incoming_mark_now (VmceVm *dst);

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
  g_autoptr(GHashTable) have = NULL;
  g_autofree gchar *detail = NULL;

  if (in->pages == NULL && !vmce_vm_is_incoming (dst)) {
    /* an error the source's vmced was done with after the migration
     * completed, and this end had its marks in already */
    in->pages = g_ptr_array_new_with_free_func (g_free);
    in->source = g_strdup (source);
    in->late = TRUE;
    in->ran_before = vmce_vm_is_running (dst);
    in->resume = in->stopped = in->resume_late && !in->ran_before;
  } else if (in->pages == NULL) {
    in->pages = g_ptr_array_new_with_free_func (g_free);
    in->source = g_strdup (source);
    in->ran_before = vmce_vm_is_running (dst);
    in->resume = !vmce_incoming_started_paused (dst);
    /* while it is "inmigrate", stop only turns its autostart off (one
     * started with -S, as libvirt starts a destination, has none) */
    in->stopped = in->resume;
    if (in->stopped)
      vmce_vm_execute_or_warn (dst, "stop", NULL, "turn its autostart off");
  }
  in->resume_late = FALSE;
  /* (a page may come twice: from the journal and the domain's metadata
   * both, after a restart; handed over untold when the migration started,
   * its error waiting in the source's queue, then told there before it
   * stopped) */
  have = g_hash_table_new (g_int64_hash, g_int64_equal);
  for (guint i = 0; i < in->pages->len; i++) {
    VmcePoisonedPage *q = g_ptr_array_index (in->pages, i);
    g_hash_table_insert (have, &q->gpa, q);
  }
  for (guint i = 0; i < pages->len; i++) {
    const VmcePoisonedPage *p = g_ptr_array_index (pages, i);
    VmcePoisonedPage *copy = g_hash_table_lookup (have, &p->gpa);

    if (copy != NULL) {
      if (p->retell) {
        copy->count = 0;
        copy->kind = VMCE_MCE_KIND_AO;
      } else if (p->count > copy->count) {
        copy->count = p->count;
        copy->result = p->result;
      }
      continue;
    }
    copy = g_memdup2 (p, sizeof (VmcePoisonedPage));
    g_hash_table_insert (have, &copy->gpa, copy);
    g_ptr_array_add (in->pages, copy);
    g_ptr_array_add (added, copy);
  }
  if (added->len == 0)
    return;
  detail = g_strdup_printf ("%u page(s) poisoned on %s to hold poisoned here: %s", added->len, source,
                            in->late && in->ran_before
                              ? "now, the guest already running here (an error as the migration completed, or "
                                "a domain this vmced could reach only once libvirt had resumed it)"
                            : in->late && in->resume
                              ? "now, before the guest runs here (then vmced lets it run, as the vmced before it "
                                "was to)"
                            : in->late   ? "now, before the guest runs here (it came paused: its owner resumes it)"
                            : in->resume ? "the guest waits for them"
                                         : "the guest waits for them, then for its owner's cont (-S)");
  g_message ("vm %s: %s", vmce_vm_get_name (dst), detail);
  vmce_incoming_journal (dst, "receiving", added, 0, NULL, 0, detail);
  if (in->late && in->loaded_us == 0)
    vmce_incoming_mark_now (dst);
}

void
vmce_migration_incoming_resume (VmceVm *dst, const gchar *source, GPtrArray *pages, gboolean autostart_off)
{
  g_autofree gchar *who = g_strdup_printf ("%s (from the journal: the vmced that took them went before they "
                                           "were poisoned here)", source != NULL ? source : "?");

  vmce_incoming (dst)->resume_late = autostart_off;
  vmce_migration_incoming_receive (dst, who, pages);
}

gboolean
vmce_migration_incoming_is_receiving (VmceVm *dst)
{
  return vmce_incoming (dst)->pages != NULL;
}

typedef struct {
  guint64 hva;
  VmcePoisonedPage *page;
} VmceIncomingMark;

static gint
vmce_incoming_mark_cmp (gconstpointer a, gconstpointer b)
{
  const VmceIncomingMark *x = a, *y = b;

  return x->hva < y->hva ? -1 : x->hva > y->hva;
}

/* The pages of [@start, @start + @len) poisoned in @dst's memory by
 * @tid's system calls; @how says which way */
static gboolean
vmce_incoming_mark_run (VmceVm *dst, pid_t tid, guint64 start, guint64 len, const gchar **how, GError **error)
{
  return vmce_poison_mark_or_protect (vmce_vm_get_pid (dst), tid, start, len, !vmce_vm_is_kvm (dst), how, error);
}

/* Every page received, poisoned here in runs of pages consecutive in
 * QEMU's memory (a few system calls per run); returns how many are, and
 * says why for each that is not in @failed */
static guint
vmce_incoming_mark_pages (VmceVm *dst, pid_t tid, GPtrArray *pages, const gchar **how, GString *failed)
{
  g_autoptr(GArray) marks = g_array_new (FALSE, FALSE, sizeof (VmceIncomingMark));
  guint marked = 0;

  for (guint i = 0; i < pages->len; i++) {
    VmceIncomingMark m = { .page = g_ptr_array_index (pages, i) };

    if (vmce_poison_set_lookup (vmce_vm_get_poisoned (dst), m.page->gpa) != NULL) {
      marked++; /* received twice: a second error on the page */
      continue;
    }
    if (!vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (dst), m.page->gpa, &m.hva, NULL)) {
      g_string_append_printf (failed, "%sGPA 0x%" G_GINT64_MODIFIER "x: not guest RAM here",
                              failed->len > 0 ? "; " : "", m.page->gpa);
      continue;
    }
    m.hva &= VMCE_PAGE_MASK;
    g_array_append_val (marks, m);
  }
  g_array_sort (marks, vmce_incoming_mark_cmp);
  for (guint i = 0; i < marks->len;) {
    const VmceIncomingMark *first = &g_array_index (marks, VmceIncomingMark, i);
    g_autoptr(GError) error = NULL;
    guint j = i + 1;

    while (j < marks->len &&
           g_array_index (marks, VmceIncomingMark, j).hva == first->hva + (guint64) (j - i) * VMCE_PAGE_SIZE)
      j++;
    if (!vmce_incoming_mark_run (dst, tid, first->hva, (guint64) (j - i) * VMCE_PAGE_SIZE, how, &error)) {
      g_string_append_printf (failed, "%sGPA 0x%" G_GINT64_MODIFIER "x and %u more: %s",
                              failed->len > 0 ? "; " : "", first->page->gpa, j - i - 1, error->message);
      i = j;
      continue;
    }
    for (guint k = i; k < j; k++) {
      const VmceIncomingMark *m = &g_array_index (marks, VmceIncomingMark, k);
      /* its fault is a memory error here as it was there */
      if (g_strcmp0 (*how, "UFFDIO_POISON") == 0)
        vmce_sim_adopt_marked_page (dst, m->hva, m->page->gpa);
      else
        vmce_sim_adopt_page (dst, m->hva, m->page->gpa);
      vmce_poison_set_add_migrated (vmce_vm_get_poisoned (dst), m->page, m->hva);
    }
    marked += j - i;
    i = j;
  }
  return marked;
}

/* A found error (AO) its source took and did not tell its guest before it
 * stopped (queued, or in flight): told here, once the guest runs. A page
 * of a lost huge page never reported stays untold, told when read, as
 * under hugepage = one on the source; under hugepage = all here (the
 * operator's choice for this VM) it is told now, as the source was telling
 * them when the guest left. */
static void
vmce_incoming_tell (VmceVm *dst, GPtrArray *pages)
{
  gboolean all = vmce_hugepage_loss_get_policy (dst) == VMCE_HUGEPAGE_ALL;

  for (guint i = 0; i < pages->len; i++) {
    const VmcePoisonedPage *p = g_ptr_array_index (pages, i);
    if (p->count == 0 && (p->lost_with == 0 || all) && p->kind == VMCE_MCE_KIND_AO)
      vmce_forward_tell_migrated (dst, p->gpa);
  }
}

/* With every vCPU held (the guest paused, and held in case its owner
 * resumes it meanwhile) */
static void
vmce_incoming_held_cb (VmceVm *dst, VmceVcpuHold *hold, gpointer user_data)
{
  VmceIncoming *in = vmce_incoming (dst);
  g_autoptr(GString) failed = g_string_new (NULL);
  g_autofree gchar *detail = NULL;
  const gchar *how = "none";
  gint64 paused_us;
  guint marked;

  if (in->hold != hold || in->pages == NULL)
    return; /* ready inside vmce_vcpu_hold_new(): its caller goes on */
  marked = vmce_incoming_mark_pages (dst, vmce_vcpu_hold_get_tid (hold), in->pages, &how, failed);
  paused_us = g_get_monotonic_time () - in->loaded_us;
  if (failed->len > 0) {
    detail = g_strdup_printf ("%u of %u page(s) from %s NOT poisoned here: %s", in->pages->len - marked,
                              in->pages->len, in->source, failed->str);
    g_warning ("vm %s: %s", vmce_vm_get_name (dst), detail);
  } else {
    detail = g_strdup_printf ("%u page(s) from %s poisoned here %s", marked, in->source,
                              in->late && in->ran_before ? "after the guest had started here"
                              : in->ran_before           ? "(but the guest was running when they arrived)"
                                                         : "before the guest ran");
    g_message ("vm %s: %s (%s; the guest waited %.1f ms for it)", vmce_vm_get_name (dst), detail, how,
               paused_us / 1000.0);
  }
  vmce_incoming_journal (dst, "received", in->pages, marked, how, paused_us, detail);
  vmce_incoming_tell (dst, in->pages);
  if (in->resume)
    vmce_vm_execute_or_warn (dst, "cont", NULL, "let the guest run");
  vmce_incoming_reset (in);
}

/* The load is over (or a late page came): hold the vCPUs, then mark */
static void
vmce_incoming_mark_now (VmceVm *dst)
{
  VmceIncoming *in = vmce_incoming (dst);

  in->loaded_us = g_get_monotonic_time ();
  in->hold = vmce_vcpu_hold_new (dst, vmce_incoming_held_cb, NULL);
  if (vmce_vcpu_hold_is_ready (in->hold))
    vmce_incoming_held_cb (dst, in->hold, NULL);
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
  vmce_incoming_mark_now (dst);
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
