/*
 * The host page behind an address: pagemap entries decoded (a table of
 * entries as Linux 6.1 and 6.12 write them), and one read of this
 * process's own page table.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "host-pfn.h"

#define PRESENT (G_GUINT64_CONSTANT (1) << 63)
#define SWAP (G_GUINT64_CONSTANT (1) << 62)
#define FILE_PAGE (G_GUINT64_CONSTANT (1) << 61)
#define EXCLUSIVE (G_GUINT64_CONSTANT (1) << 56)
#define SOFT_DIRTY (G_GUINT64_CONSTANT (1) << 55)
/* Debian's 6.1 and 6.12: MAX_SWAPFILES = 32 - 4 device - 3 migration - 1
 * hwpoison - 1 pte marker, and SWP_HWPOISON = MAX_SWAPFILES */
#define HWPOISON_TYPE 23

static const struct {
  const gchar *name;
  guint64 entry;
  gboolean kernel_error;
  VmceHostPfnFrom from;
  guint64 pfn;
  const gchar *why; /* a part of it */
} cases[] = {
  { "present anonymous page", PRESENT | EXCLUSIVE | SOFT_DIRTY | 0x12345, FALSE, VMCE_HOST_PFN_PRESENT, 0x12345, NULL },
  { "present shared file page", PRESENT | FILE_PAGE | 0x7fff00, TRUE, VMCE_HOST_PFN_PRESENT, 0x7fff00, NULL },
  { "largest pfn", PRESENT | ((G_GUINT64_CONSTANT (1) << 55) - 1), FALSE, VMCE_HOST_PFN_PRESENT,
    (G_GUINT64_CONSTANT (1) << 55) - 1, NULL },
  { "hwpoison entry", SWAP | (G_GUINT64_CONSTANT (0x2a5b1) << 5) | HWPOISON_TYPE, TRUE,
    VMCE_HOST_PFN_HWPOISON, 0x2a5b1, NULL },
  { "hwpoison entry, soft-dirty", SWAP | SOFT_DIRTY | (G_GUINT64_CONSTANT (0x1) << 5) | HWPOISON_TYPE, TRUE,
    VMCE_HOST_PFN_HWPOISON, 0x1, NULL },
  { "hwpoison entry of a file page", SWAP | FILE_PAGE | (G_GUINT64_CONSTANT (0x3ffff) << 5) | HWPOISON_TYPE,
    TRUE, VMCE_HOST_PFN_HWPOISON, 0x3ffff, NULL },
  { "swapped out, simulated error", SWAP | (G_GUINT64_CONSTANT (0x99) << 5) | 1, FALSE, VMCE_HOST_PFN_NONE, 0,
    "swapped out" },
  { "present, pfn hidden", PRESENT | EXCLUSIVE, FALSE, VMCE_HOST_PFN_NONE, 0, "CAP_SYS_ADMIN" },
  { "swap, pfn hidden", SWAP, TRUE, VMCE_HOST_PFN_NONE, 0, "CAP_SYS_ADMIN" },
  { "nothing mapped (hugetlb hwpoison)", 0, TRUE, VMCE_HOST_PFN_NONE, 0, "hugetlb" },
  { "nothing mapped, soft-dirty", SOFT_DIRTY, FALSE, VMCE_HOST_PFN_NONE, 0, "no page mapped" },
};

static void
test_host_pfn_decode (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    VmceHostPfn got;

    g_test_message ("%s", cases[i].name);
    vmce_host_pfn_decode (cases[i].entry, cases[i].kernel_error, &got);
    g_assert_cmpint (got.from, ==, cases[i].from);
    g_assert_cmphex (got.pfn, ==, cases[i].pfn);
    if (cases[i].why != NULL)
      g_assert_nonnull (strstr (got.why, cases[i].why));
    else
      g_assert_null (got.why);
    g_assert_true ((vmce_host_pfn_from_to_string (got.from) == NULL) == (got.from == VMCE_HOST_PFN_NONE));
  }
}

/* a page of this process's, touched: present, with its pfn when the
 * reader may see pfns */
static void
test_host_pfn_read_own (void)
{
  g_autoptr(GError) error = NULL;
  guint8 *page = mmap (NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  int fd = vmce_host_pfn_open (getpid (), &error);
  guint64 entry = 0;
  VmceHostPfn got;

  g_assert_no_error (error);
  g_assert_true (page != MAP_FAILED);
  page[0] = 1;
  g_assert_true (vmce_host_pfn_read (fd, (guint64) (guintptr) page, &entry, &error));
  g_assert_no_error (error);
  vmce_host_pfn_decode (entry, FALSE, &got);
  if (got.from == VMCE_HOST_PFN_NONE)
    g_assert_nonnull (strstr (got.why, "CAP_SYS_ADMIN"));
  else
    g_assert_cmpint (got.from, ==, VMCE_HOST_PFN_PRESENT);
  /* taken away as the simulator does: still present to pagemap */
  g_assert_cmpint (mprotect (page, 4096, PROT_NONE), ==, 0);
  g_assert_true (vmce_host_pfn_read (fd, (guint64) (guintptr) page, &entry, &error));
  g_assert_true (entry & PRESENT);
  munmap (page, 4096);
  close (fd);
}

static void
test_host_pfn_bad_input (void)
{
  g_autoptr(GError) error = NULL;
  guint64 entry;

  g_assert_cmpint (vmce_host_pfn_open (0x7ffffff0, &error), <, 0);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (vmce_host_pfn_read (-1, 0x1000, &entry, &error));
  g_assert_nonnull (error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/host-pfn/decode", test_host_pfn_decode);
  g_test_add_func ("/host-pfn/read-own", test_host_pfn_read_own);
  g_test_add_func ("/host-pfn/bad-input", test_host_pfn_bad_input);
  return g_test_run ();
}
