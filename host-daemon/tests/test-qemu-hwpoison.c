/*
 * qemu-hwpoison: the pages QEMU is told of, as runs of consecutive guest
 * pages with one told flag each (one x-hwpoison-page-add per run)
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "page.h"
#include "poison-set.h"
#include "qemu-hwpoison.h"

static VmcePoisonedPage *
page (GPtrArray *pages, guint64 gpa, guint count, guint64 lost_with)
{
  VmcePoisonedPage *p = g_new0 (VmcePoisonedPage, 1);

  p->gpa = gpa;
  p->kind = VMCE_MCE_KIND_AO;
  p->count = count;
  p->lost_with = lost_with;
  p->host_poisoned = TRUE;
  g_ptr_array_add (pages, p);
  return p;
}

static void
test_runs (void)
{
  g_autoptr(GPtrArray) pages = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GArray) runs = NULL;
  const VmceQemuHwpoisonRun *r;

  /* out of order; a lost huge page's pages: the one hit told, the rest not */
  page (pages, 0x200000 + 2 * VMCE_PAGE_SIZE, 0, 7);
  page (pages, 0x200000, 1, 7);
  page (pages, 0x200000 + VMCE_PAGE_SIZE, 0, 7);
  page (pages, 0x200000 + 3 * VMCE_PAGE_SIZE, 0, 7);
  /* a page alone above 4 GiB, and the same page twice */
  page (pages, 0x140000000, 1, 0);
  page (pages, 0x140000000, 1, 0);
  /* told pages side by side: one run */
  page (pages, 0x9000, 1, 0);
  page (pages, 0xa000, 2, 0);

  runs = vmce_qemu_hwpoison_runs (pages);
  g_assert_cmpuint (runs->len, ==, 4);
  r = &g_array_index (runs, VmceQemuHwpoisonRun, 0);
  g_assert_true (r->gpa == 0x9000 && r->size == 2 * VMCE_PAGE_SIZE && r->reported);
  r = &g_array_index (runs, VmceQemuHwpoisonRun, 1);
  g_assert_true (r->gpa == 0x200000 && r->size == VMCE_PAGE_SIZE && r->reported);
  r = &g_array_index (runs, VmceQemuHwpoisonRun, 2);
  g_assert_true (r->gpa == 0x201000 && r->size == 3 * VMCE_PAGE_SIZE && !r->reported);
  r = &g_array_index (runs, VmceQemuHwpoisonRun, 3);
  g_assert_true (r->gpa == 0x140000000 && r->size == VMCE_PAGE_SIZE && r->reported);
}

static void
test_runs_none (void)
{
  g_autoptr(GPtrArray) pages = g_ptr_array_new ();
  g_autoptr(GArray) runs = vmce_qemu_hwpoison_runs (pages);

  g_assert_cmpuint (runs->len, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/qemu-hwpoison/runs", test_runs);
  g_test_add_func ("/qemu-hwpoison/none", test_runs_none);
  return g_test_run ();
}
