/*
 * The host page behind an address of QEMU's (see host-pfn.h).
 *
 * pagemap's entry (Documentation/admin-guide/mm/pagemap.rst; the same in
 * Linux 6.1 and 6.12, fs/proc/task_mmu.c): bit 63 present, bit 62 swapped,
 * bits 0-54 the pfn of a present page, or of a swap entry its type (the
 * low MAX_SWAPFILES_SHIFT = 5 bits) and offset above. memory_failure()
 * replaces each mapping of a poisoned page by a hwpoison entry,
 * swp_entry(SWP_HWPOISON, page_to_pfn(page)) (make_hwpoison_entry() in
 * include/linux/swapops.h), whose offset pagemap shows as the pfn
 * (swp_offset_pfn(): is_pfn_swap_entry() counts hwpoison entries). Its
 * swap type, MAX_SWAPFILES, depends on the kernel's configuration, so the
 * decode does not judge by it: the entry at the address of the kernel's
 * memory-error signal is its hwpoison entry.
 *
 * A hugetlb mapping's entry is made by pagemap_hugetlb_range(), which
 * shows the pfn of a present huge page (plus the 4 KiB page's place in
 * it) and nothing for a swap entry: a poisoned huge page's pfn is not
 * there. Both fields are 0 for a reader without CAP_SYS_ADMIN (show_pfn):
 * pfn 0 is never a page of a user process, nor offset 0 of a swap entry
 * (the swap header).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-hostpage"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <unistd.h>

#include "host-pfn.h"
#include "page.h"

#define VMCE_PM_PRESENT (G_GUINT64_CONSTANT (1) << 63)
#define VMCE_PM_SWAP (G_GUINT64_CONSTANT (1) << 62)
#define VMCE_PM_PFRAME_MASK ((G_GUINT64_CONSTANT (1) << 55) - 1)
#define VMCE_PM_SWAP_TYPE_BITS 5

void
vmce_host_pfn_decode (guint64 entry, gboolean kernel_error, VmceHostPfn *out)
{
  guint64 frame = entry & VMCE_PM_PFRAME_MASK;

  out->from = VMCE_HOST_PFN_NONE;
  out->pfn = 0;
  out->why = NULL;
  if (entry & VMCE_PM_PRESENT) {
    if (frame == 0) {
      out->why = "pagemap hides pfns from a reader without CAP_SYS_ADMIN";
      return;
    }
    out->from = VMCE_HOST_PFN_PRESENT;
    out->pfn = frame;
    return;
  }
  if (!(entry & VMCE_PM_SWAP)) {
    out->why = "no page mapped there (a hugetlb page's hwpoison entry, whose pfn pagemap does not show, "
               "or a page never touched or given back)";
    return;
  }
  if (!kernel_error) {
    out->why = "the page is swapped out";
    return;
  }
  if ((frame >> VMCE_PM_SWAP_TYPE_BITS) == 0) {
    out->why = "pagemap hides pfns from a reader without CAP_SYS_ADMIN";
    return;
  }
  out->from = VMCE_HOST_PFN_HWPOISON;
  out->pfn = frame >> VMCE_PM_SWAP_TYPE_BITS;
}

const gchar *
vmce_host_pfn_from_to_string (VmceHostPfnFrom from)
{
  switch (from) {
  case VMCE_HOST_PFN_HWPOISON:
    return "hwpoison-entry";
  case VMCE_HOST_PFN_PRESENT:
    return "present";
  case VMCE_HOST_PFN_UNKNOWN:
  case VMCE_HOST_PFN_NONE:
    break;
  }
  return NULL;
}

int
vmce_host_pfn_open (pid_t pid, GError **error)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/pagemap", pid);
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "cannot open %s: %s", path,
                 g_strerror (errsv));
  }
  return fd;
}

gboolean
vmce_host_pfn_read (int pagemap_fd, guint64 hva, guint64 *entry, GError **error)
{
  ssize_t got = pread (pagemap_fd, entry, sizeof *entry, (off_t) (hva / VMCE_PAGE_SIZE * sizeof *entry));

  if (got == (ssize_t) sizeof *entry)
    return TRUE;
  int errsv = got < 0 ? errno : EIO;
  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
               "cannot read pagemap at 0x%" G_GINT64_MODIFIER "x: %s", hva, g_strerror (errsv));
  return FALSE;
}
