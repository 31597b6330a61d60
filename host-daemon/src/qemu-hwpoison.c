/*
 * QEMU's own list of poisoned pages (see qemu-hwpoison.h).
 *
 * vmced takes QEMU's memory-error signals itself (ptrace), so QEMU never
 * lists the pages; the series' 0008 makes migration skip and carry the
 * pages QEMU lists, and 0009 lets vmced list them. A migration then reads
 * none of them, with or without vmced: a vmced killed while the RAM goes
 * can no longer leave QEMU's migration thread to read a poisoned page and
 * die of it. vmced tells QEMU when a migration starts, and of each error
 * while one runs; the destination's QEMU poisons them again itself (and
 * the destination's vmced marks them too: the marks are idempotent).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-migration"

#include "page.h"
#include "poison-set.h"
#include "qemu-hwpoison.h"

static gint
vmce_qemu_hwpoison_cmp (gconstpointer a, gconstpointer b)
{
  const VmcePoisonedPage *x = *(VmcePoisonedPage *const *) a, *y = *(VmcePoisonedPage *const *) b;

  return x->gpa < y->gpa ? -1 : x->gpa > y->gpa;
}

GArray *
vmce_qemu_hwpoison_runs (GPtrArray *pages)
{
  g_autoptr(GPtrArray) sorted = g_ptr_array_copy (pages, NULL, NULL);
  GArray *runs = g_array_new (FALSE, FALSE, sizeof (VmceQemuHwpoisonRun));

  /* (the copy would free @pages' pages with its own free function) */
  g_ptr_array_set_free_func (sorted, NULL);
  g_ptr_array_sort (sorted, vmce_qemu_hwpoison_cmp);
  for (guint i = 0; i < sorted->len; i++) {
    const VmcePoisonedPage *p = g_ptr_array_index (sorted, i);
    VmceQemuHwpoisonRun *last = runs->len > 0 ? &g_array_index (runs, VmceQemuHwpoisonRun, runs->len - 1) : NULL;
    /* (told: a machine check went in; vmce_poisoned_page_told() also
     * counts a page whose error still waits in the queue) */
    gboolean told = p->count > 0;
    guint64 gpa = p->gpa & VMCE_PAGE_MASK;

    if (last != NULL && last->reported == told && last->gpa + last->size == gpa) {
      last->size += VMCE_PAGE_SIZE;
    } else if (last == NULL || gpa >= last->gpa + last->size) {
      VmceQemuHwpoisonRun run = { .gpa = gpa, .size = VMCE_PAGE_SIZE, .reported = told };
      g_array_append_val (runs, run);
    }
  }
  return runs;
}

guint
vmce_qemu_hwpoison_add (VmceVm *vm, GPtrArray *pages)
{
  g_autoptr(GArray) runs = NULL;

  if (!vmce_vm_has_hwpoison_add (vm) || pages->len == 0)
    return 0;
  runs = vmce_qemu_hwpoison_runs (pages);
  for (guint i = 0; i < runs->len; i++) {
    const VmceQemuHwpoisonRun *r = &g_array_index (runs, VmceQemuHwpoisonRun, i);
    g_autoptr(JsonBuilder) b = json_builder_new ();
    g_autoptr(JsonNode) args = NULL;

    json_builder_begin_object (b);
    json_builder_set_member_name (b, "addr");
    json_builder_add_int_value (b, (gint64) r->gpa);
    json_builder_set_member_name (b, "size");
    json_builder_add_int_value (b, (gint64) r->size);
    json_builder_set_member_name (b, "reported");
    json_builder_add_boolean_value (b, r->reported);
    json_builder_end_object (b);
    args = json_builder_get_root (b);
    vmce_vm_execute_or_warn (vm, "x-hwpoison-page-add", args, "tell QEMU of its poisoned pages");
  }
  return runs->len;
}
