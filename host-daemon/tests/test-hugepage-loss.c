/*
 * A lost huge page: which errors show one, which pages the guest is told
 * of next, and a page of it that no error reported yet. Tables of cases,
 * against the pure functions (the daemon around them: e2e-hugepage).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "hugepage-loss.h"
#include "page.h"
#include "poison-set.h"

static void
test_shown_by (void)
{
  static const struct {
    guint lsb;
    gboolean have_gpa;
    const gchar *source;
    gboolean shows;
  } cases[] = {
    { 21, TRUE, "kernel", TRUE },
    { 30, TRUE, "kernel", TRUE },
    { 21, TRUE, "simulated", TRUE },
    { 12, TRUE, "kernel", FALSE },     /* a 4 KiB page */
    { 0, TRUE, "kernel", FALSE },      /* no lsb at all */
    { 31, TRUE, "kernel", FALSE },     /* no x86 page is that large */
    { 21, FALSE, "kernel", FALSE },    /* not guest RAM */
    { 21, TRUE, "huge-page", FALSE },  /* a page of a loss, being told */
    { 21, TRUE, "inject", FALSE },     /* vmcectl inject: no host side */
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    g_assert_cmpint (vmce_hugepage_loss_shown_by (cases[i].lsb, cases[i].have_gpa, cases[i].source), ==,
                     cases[i].shows);
}

static GArray *
pages_from (guint64 first_gpa, guint n)
{
  GArray *pages = g_array_new (FALSE, FALSE, sizeof (VmceGuestPage));

  for (guint i = 0; i < n; i++) {
    VmceGuestPage p = { .gpa = first_gpa + i * VMCE_PAGE_SIZE, .hva = 0x7f0000000000 + i * VMCE_PAGE_SIZE };
    g_array_append_val (pages, p);
  }
  return pages;
}

static void
test_to_tell (void)
{
  g_autoptr(GArray) pages = pages_from (0x6000000, 512);
  static const struct {
    VmceHugepagePolicy policy;
    VmceResult hit;
    guint64 hit_gpa;
    guint told;
    gboolean why_not;
  } cases[] = {
    { VMCE_HUGEPAGE_ALL, VMCE_RESULT_INJECTED, 0x6000000, 511, FALSE },
    { VMCE_HUGEPAGE_ALL, VMCE_RESULT_INJECTED, 0x6003abc, 511, FALSE }, /* hit inside a page */
    { VMCE_HUGEPAGE_ALL, VMCE_RESULT_INJECTED, 0x9000000, 512, FALSE }, /* hit outside: all */
    { VMCE_HUGEPAGE_ONE, VMCE_RESULT_INJECTED, 0x6000000, 0, FALSE },
    { VMCE_HUGEPAGE_ALL, VMCE_RESULT_REFUSED, 0x6000000, 0, TRUE },
    { VMCE_HUGEPAGE_ALL, VMCE_RESULT_PASSED, 0x6000000, 0, TRUE },
    { VMCE_HUGEPAGE_ALL, VMCE_RESULT_FAILED, 0x6000000, 0, TRUE },
    { VMCE_HUGEPAGE_ONE, VMCE_RESULT_PASSED, 0x6000000, 0, FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    const gchar *why_not = "unset";
    g_autoptr(GArray) tell = vmce_hugepage_loss_to_tell (cases[i].policy, cases[i].hit, pages, cases[i].hit_gpa,
                                                         &why_not);

    g_assert_cmpuint (tell->len, ==, cases[i].told);
    g_assert_cmpint (why_not != NULL, ==, cases[i].why_not);
    /* in GPA order, never the page hit */
    for (guint j = 0; j < tell->len; j++) {
      g_assert_cmphex (g_array_index (tell, guint64, j), !=, cases[i].hit_gpa & VMCE_PAGE_MASK);
      if (j > 0)
        g_assert_cmphex (g_array_index (tell, guint64, j), >, g_array_index (tell, guint64, j - 1));
    }
  }
}

/* A page lost and never reported is not "told": its first read is a first
 * error. Once an error reports it, it is; and other pages always were. */
static void
test_lost_page_told (void)
{
  g_autoptr(GHashTable) set = vmce_poison_set_new ();
  g_autoptr(VmceMceEvent) ev = vmce_mce_event_new ();
  VmcePoisonedPage *p = vmce_poison_set_add_lost (set, 0x6001000, 0x7f0000001000, FALSE, 7);

  g_assert_nonnull (p);
  g_assert_false (vmce_poisoned_page_told (p));
  g_assert_true (p->host_poisoned);
  g_assert_cmpuint (p->lost_with, ==, 7);
  /* known already: not added twice */
  g_assert_null (vmce_poison_set_add_lost (set, 0x6001000, 0x7f0000001000, FALSE, 8));

  ev->source = "kernel";
  ev->have_gpa = TRUE;
  ev->gpa = 0x6001000;
  ev->hva = 0x7f0000001000;
  ev->result = VMCE_RESULT_INJECTED;
  g_assert_true (vmce_poison_set_add_event (set, ev) == p);
  g_assert_true (vmce_poisoned_page_told (p));

  ev->gpa = 0x8000000;
  p = vmce_poison_set_add_event (set, ev);
  g_assert_true (p != NULL && vmce_poisoned_page_told (p));
  p = vmce_poison_set_add_found (set, 0x9000000, 0x7f0000009000, FALSE);
  g_assert_true (p != NULL && vmce_poisoned_page_told (p));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hugepage-loss/shown-by", test_shown_by);
  g_test_add_func ("/hugepage-loss/to-tell", test_to_tell);
  g_test_add_func ("/hugepage-loss/lost-page-told", test_lost_page_told);
  return g_test_run ();
}
