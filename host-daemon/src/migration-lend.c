/*
 * A poisoned page lent to a migration's thread (see migration-lend.h).
 *
 * QEMU's migration thread (or a multifd thread) reads every page of guest
 * RAM, and a poisoned one kills QEMU: the thread blocks SIGBUS, so the
 * kernel delivers it at its default action. Debian's QEMUs cannot be told
 * to skip a page, so vmced gives the thread what the destination is to get
 * (a zeroed page, which QEMU sends as a zero page: the destination holds
 * it poisoned, migration-incoming.c) and keeps the guest from seeing it:
 *  1. every vCPU is held (vcpu-hold.c);
 *  2. the page is replaced by a zeroed one (page-replace.c) and the thread
 *     goes on;
 *  3. a moment later the page is poisoned again (poison-mark.c, or
 *     PROT_NONE under TCG without it) and the vCPUs go on.
 * A vCPU therefore never reads the zeros. If the thread had not finished
 * with the page in that moment, it faults on it again and is lent it
 * again for twice as long; after VMCE_LEND_TRIES the migration is
 * cancelled rather than the guest held on. One lend at a time: a thread
 * that stops meanwhile waits its turn, still stopped. A lend takes the
 * poisoned pages that follow the one read too (up to VMCE_LEND_RUN), in a
 * few system calls: 10^4 of them cost 10 lends, not 10^4.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-migration"

#include <sys/mman.h>

#include "json-util.h"
#include "migration-lend.h"
#include "page-replace.h"
#include "page.h"
#include "poison-mark.h"
#include "remote-syscall.h"
#include "sim-poison.h"
#include "vcpu-hold.h"

#define VMCE_LEND_FIRST_MS 2
#define VMCE_LEND_TRIES 8
/* pages lent at once: the poisoned pages that follow the one read, which
 * the migration reads next (a lost huge page, a storm's run of pages) */
#define VMCE_LEND_RUN 1024

typedef struct {
  pid_t tid;
  guint64 hva; /* the first page of the run, where the thread stopped */
  guint64 gpa;
  guint n;     /* poisoned pages from there, consecutive in QEMU's memory */
} VmceLendStop;

typedef struct {
  GQueue waiting;      /* of VmceLendStop */
  VmceLendStop *current;
  VmceVcpuHold *hold;
  guint timer;
  guint n_lent;        /* pages, in this migration */
  gint64 held_us;      /* the vCPUs held for lending, summed */
  gboolean gave_up;
} VmceLender;

GQuark vmce_migration_lend_quark (void);
G_DEFINE_QUARK (vmce-migration-lend, vmce_migration_lend)

static void
vmce_lender_free (VmceLender *l)
{
  g_queue_clear_full (&l->waiting, g_free);
  g_clear_pointer (&l->current, g_free);
  g_clear_handle_id (&l->timer, g_source_remove);
  g_clear_pointer (&l->hold, vmce_vcpu_hold_release);
  g_free (l);
}

static VmceLender *
vmce_lender_new (void)
{
  VmceLender *l = g_new0 (VmceLender, 1);

  g_queue_init (&l->waiting);
  return l;
}

static VmceLender *
vmce_lender (VmceVm *vm)
{
  return vmce_vm_ensure_layer_data (vm, vmce_migration_lend_quark (), (VmceLayerNewFunc) vmce_lender_new,
                                    (GDestroyNotify) vmce_lender_free);
}

static void vmce_lend_next (VmceVm *vm);

static void
vmce_lend_journal (VmceVm *vm, VmceLendStop *s, guint delay_ms, const gchar *how)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *detail = g_strdup_printf ("the migration read it as a zeroed page with the vCPUs held, "
                                              "poisoned again after %u ms (%s)",
                                              delay_ms, how);

  json_builder_begin_object (b);
  vmce_vm_begin_record (vm, b, "page-replaced");
  vmce_json_builder_add_hex (b, "gpa", s->gpa);
  vmce_json_builder_add_int (b, "pages", s->n);
  json_builder_set_member_name (b, "still_poisoned");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_set_member_name (b, "lent_to_migration");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_set_member_name (b, "detail");
  json_builder_add_string_value (b, detail);
  json_builder_set_member_name (b, "how");
  json_builder_add_string_value (b, how);
  json_builder_end_object (b);
  record = json_builder_get_root (b);
  vmce_vm_emit_record (vm, "PAGE_REPLACED", record);
}

/* The pages poisoned again, in a held vCPU's thread */
static gboolean
vmce_lend_poison_again (VmceVm *vm, pid_t tid, VmceLendStop *s, const gchar **how, GError **error)
{
  if (!vmce_poison_mark_or_protect (vmce_vm_get_pid (vm), tid, s->hva, (guint64) s->n * VMCE_PAGE_SIZE,
                                    !vmce_vm_is_kvm (vm), how, error))
    return FALSE;
  for (guint i = 0; i < s->n; i++) {
    guint64 hva = s->hva + (guint64) i * VMCE_PAGE_SIZE, gpa = s->gpa + (guint64) i * VMCE_PAGE_SIZE;
    if (g_strcmp0 (*how, "UFFDIO_POISON") == 0)
      vmce_sim_adopt_marked_page (vm, hva, gpa);
    else
      vmce_sim_adopt_page (vm, hva, gpa);
  }
  return TRUE;
}

static gboolean
vmce_lend_timeout_cb (gpointer user_data)
{
  VmceVm *vm = user_data;
  VmceLender *l = vmce_lender (vm);
  VmceLendStop *s = l->current;
  VmcePoisonedPage *p = vmce_vm_find_poisoned (vm, s->gpa);
  g_autoptr(GError) error = NULL;
  const gchar *how = NULL;

  l->timer = 0;
  if (!vmce_lend_poison_again (vm, vmce_vcpu_hold_get_tid (l->hold), s, &how, &error)) {
    /* the guest would read zeros where it had a machine check: the
     * migration goes, not the promise */
    g_warning ("vm %s: the page at GPA 0x%" G_GINT64_MODIFIER "x cannot be poisoned again after the "
               "migration read it (%s): the migration is cancelled",
               vmce_vm_get_name (vm), s->gpa, error->message);
    vmce_vm_execute_or_warn (vm, "migrate_cancel", NULL, "cancel the migration");
  } else if (p != NULL && p->lent == 1) {
    vmce_lend_journal (vm, s, VMCE_LEND_FIRST_MS, how);
  }
  l->held_us += vmce_vcpu_hold_get_age_us (l->hold);
  g_clear_pointer (&l->hold, vmce_vcpu_hold_release);
  g_clear_pointer (&l->current, g_free);
  vmce_lend_next (vm);
  return G_SOURCE_REMOVE;
}

static void
vmce_lend_held_cb (VmceVm *vm, VmceVcpuHold *hold, gpointer user_data)
{
  VmceLender *l = vmce_lender (vm);
  VmceLendStop *s = l->current;
  VmcePoisonedPage *p = vmce_vm_find_poisoned (vm, s->gpa);
  g_autoptr(VmceVmaTable) vmas = NULL;
  g_autoptr(GError) error = NULL;
  VmcePageReplace r = { 0 };
  guint delay_ms;

  if (l->hold != hold)
    return; /* ready inside vmce_vcpu_hold_new(): vmce_lend_next() goes on */
  vmas = vmce_vma_table_read (vmce_vm_get_pid (vm), &error);
  if (p == NULL || vmas == NULL ||
      !vmce_page_replace_range (vmce_vm_get_pid (vm), s->tid, vmas, s->hva, s->n, &r, &error)) {
    g_warning ("vm %s: the migration read the poisoned page at GPA 0x%" G_GINT64_MODIFIER
               "x, which cannot be lent to it: %s",
               vmce_vm_get_name (vm), s->gpa, error != NULL ? error->message : "the page is not known");
    vmce_page_replace_clear (&r);
    /* as without vmced: QEMU takes its signal */
    vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), s->tid, SIGBUS);
    g_clear_pointer (&l->hold, vmce_vcpu_hold_release);
    g_clear_pointer (&l->current, g_free);
    vmce_lend_next (vm);
    return;
  }
  /* (a run that reached past its mapping is cut there) */
  s->n = (guint) (r.len / VMCE_PAGE_SIZE);
  vmce_page_replace_clear (&r);
  for (guint i = 0; i < s->n; i++) {
    VmcePoisonedPage *q = vmce_vm_find_poisoned (vm, s->gpa + (guint64) i * VMCE_PAGE_SIZE);
    vmce_sim_forget_page (vm, s->hva + (guint64) i * VMCE_PAGE_SIZE, "the page was lent to the migration");
    if (q != NULL && q != p && q->lent++ == 0)
      l->n_lent++;
  }
  if (p->lent++ == 0)
    l->n_lent++;
  /* again and again: it had not finished with the page */
  delay_ms = VMCE_LEND_FIRST_MS << MIN (p->lent - 1, 16u);
  vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), s->tid, 0);
  l->timer = g_timeout_add (delay_ms, vmce_lend_timeout_cb, vm);
}

static void
vmce_lend_next (VmceVm *vm)
{
  VmceLender *l = vmce_lender (vm);

  if (l->current != NULL || g_queue_is_empty (&l->waiting))
    return;
  l->current = g_queue_pop_head (&l->waiting);
  l->hold = vmce_vcpu_hold_new (vm, vmce_lend_held_cb, NULL);
  if (vmce_vcpu_hold_is_ready (l->hold))
    vmce_lend_held_cb (vm, l->hold, NULL);
}

void
vmce_migration_lend (VmceVm *vm, const VmceStop *stop, VmcePoisonedPage *p)
{
  VmceLender *l = vmce_lender (vm);
  VmceLendStop *s = g_new0 (VmceLendStop, 1);

  s->tid = stop->tid;
  s->hva = (guint64) (guintptr) stop->info.si_addr & VMCE_PAGE_MASK;
  s->gpa = p->gpa;
  /* the poisoned pages right after it, in QEMU's memory and the guest's */
  for (s->n = 1; s->n < VMCE_LEND_RUN; s->n++) {
    guint64 gpa = 0;
    VmcePoisonedPage *next = vmce_vm_find_host_poisoned (vm, s->hva + (guint64) s->n * VMCE_PAGE_SIZE, &gpa);
    if (next == NULL || next->gpa != s->gpa + (guint64) s->n * VMCE_PAGE_SIZE)
      break;
  }
  if (p->lent >= VMCE_LEND_TRIES && !l->gave_up) {
    l->gave_up = TRUE;
    g_warning ("vm %s: the migration read the page at GPA 0x%" G_GINT64_MODIFIER "x %u times without "
               "getting past it: the migration is cancelled",
               vmce_vm_get_name (vm), p->gpa, p->lent);
    vmce_vm_execute_or_warn (vm, "migrate_cancel", NULL, "cancel the migration");
  }
  g_queue_push_tail (&l->waiting, s);
  vmce_lend_next (vm);
}

void
vmce_migration_lend_reset (VmceVm *vm)
{
  VmceLender *l = vmce_lender (vm);
  GHashTableIter iter;
  gpointer value;

  /* a thread still waiting its turn is lent its page all the same: let go
   * now it would read the poisoned page, and QEMU would die of it */
  if (l->current != NULL || !g_queue_is_empty (&l->waiting))
    return;
  l->n_lent = 0;
  l->held_us = 0;
  l->gave_up = FALSE;
  g_hash_table_iter_init (&iter, vmce_vm_get_poisoned (vm));
  while (g_hash_table_iter_next (&iter, NULL, &value))
    ((VmcePoisonedPage *) value)->lent = 0;
}

guint
vmce_migration_lend_count (VmceVm *vm)
{
  return vmce_lender (vm)->n_lent;
}

gint64
vmce_migration_lend_held_us (VmceVm *vm)
{
  return vmce_lender (vm)->held_us;
}
