/*
 * hugepage = salvage: when a lost huge page can be salvaged, and the
 * kernel releases that can read one back. Tables of cases against the pure
 * functions (the salvage itself, in a QEMU: e2e-hugetlbfs; with the host
 * kernel's own errors: run/hostlab --backing hugetlb-2M).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "hugepage-salvage.h"

#define MIB (G_GUINT64_CONSTANT (1) << 20)
#define GIB (G_GUINT64_CONSTANT (1) << 30)

static void
test_release (void)
{
  static const struct {
    const gchar *release;
    gboolean at_least_6_4;
  } cases[] = {
    { "6.12.57+deb13-amd64", TRUE },
    { "6.4.0", TRUE },
    { "6.3.13", FALSE },
    { "6.1.0-41-amd64", FALSE },     /* Debian 12: the lab's first L1 */
    { "7.3.4+deb13-amd64", TRUE },
    { "10.0", TRUE },
    { "5.19", FALSE },
    { "6", FALSE },                  /* not a release */
    { "", FALSE },
    { NULL, FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    g_assert_cmpint (vmce_kernel_release_at_least (cases[i].release, 6, 4), ==, cases[i].at_least_6_4);
}

/* QEMU's RAM as /proc/PID/maps shows it, one mapping of each kind */
static const VmceVma hugetlbfs = { .start = 0x7f0000000000, .end = 0x7f0040000000, .readable = TRUE,
                                   .writable = TRUE, .shared = TRUE, .path = (gchar *) "/dev/hugepages/guest",
                                   .hugetlb = TRUE, .page_size = 2 * MIB };
static const VmceVma memfd = { .start = 0x7f0000000000, .end = 0x7f0040000000, .readable = TRUE,
                               .writable = TRUE, .shared = TRUE, .path = (gchar *) "/memfd:pc.ram (deleted)",
                               .hugetlb = TRUE, .page_size = 2 * MIB };
static const VmceVma anon_huge = { .start = 0x7f0000000000, .end = 0x7f0040000000, .readable = TRUE,
                                   .writable = TRUE, .path = (gchar *) "/anon_hugepage (deleted)",
                                   .hugetlb = TRUE, .page_size = 2 * MIB };
static const VmceVma anon = { .start = 0x7f0000000000, .end = 0x7f0040000000, .readable = TRUE,
                              .writable = TRUE, .page_size = 4096 };

static void
test_refusal (void)
{
  static const struct {
    const VmceVma *vma;
    guint64 size;
    gboolean simulated;
    const gchar *release;
    guint64 available;
    const gchar *refusal; /* NULL: salvaged */
  } *c, cases[] = {
    { &hugetlbfs, 2 * MIB, FALSE, "6.12.57+deb13-amd64", 8 * GIB, NULL },
    { &hugetlbfs, GIB, FALSE, "6.12.57+deb13-amd64", 8 * GIB, NULL },
    { &memfd, 2 * MIB, FALSE, "6.12.57+deb13-amd64", 8 * GIB, NULL },
    /* Linux 6.1 reads none of a poisoned huge page back */
    { &hugetlbfs, 2 * MIB, FALSE, "6.1.0-41-amd64", 8 * GIB, "cannot read a poisoned huge page back" },
    /* vmced's own error leaves the file whole, whatever the kernel */
    { &hugetlbfs, 2 * MIB, TRUE, "6.1.0-41-amd64", 8 * GIB, NULL },
    { &anon_huge, 2 * MIB, FALSE, "6.12.57+deb13-amd64", 8 * GIB, "anonymous hugetlb memory" },
    /* a transparent huge page, or 4 KiB pages: nothing is huge there to salvage */
    { &anon, 2 * MIB, TRUE, "6.12.57+deb13-amd64", 8 * GIB, "not hugetlbfs memory (anonymous memory)" },
    { NULL, 2 * MIB, FALSE, "6.12.57+deb13-amd64", 8 * GIB, "not mapped in QEMU" },
    /* the copy and the reserve (256 MiB here) must fit */
    { &hugetlbfs, GIB, FALSE, "6.12.57+deb13-amd64", GIB + 255 * MIB, "not enough free memory for the copy: 1024 MiB" },
    { &hugetlbfs, GIB, FALSE, "6.12.57+deb13-amd64", GIB + 256 * MIB, NULL },
    { &hugetlbfs, 2 * MIB, FALSE, NULL, 8 * GIB, "(unknown)" },
  };

  for (c = cases; c < cases + G_N_ELEMENTS (cases); c++) {
    g_autofree gchar *why = vmce_hugepage_salvage_refusal (c->vma, c->size, c->simulated, c->release,
                                                            c->available, 256 * MIB);
    if (c->refusal == NULL)
      g_assert_null (why);
    else
      g_assert_nonnull (strstr (why != NULL ? why : "", c->refusal));
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hugepage-salvage/release", test_release);
  g_test_add_func ("/hugepage-salvage/refusal", test_refusal);
  return g_test_run ();
}
