/*
 * Finding the poisoned pages of a QEMU in its own page table (see
 * poison-scan.h).
 *
 * The journal says which pages vmced learned of, but the last records
 * before a crash may never have reached the disk (they are written after
 * the error is handled, not before), and a QEMU may have been poisoned
 * while no vmced watched it. The page table itself says which pages the
 * kernel took away: memory_failure() leaves a hwpoison entry where the
 * page was, which /proc/PID/pagemap shows as a "swapped" page that is not
 * present. A page QEMU's RAM really has in swap looks the same there, so
 * each candidate is read (process_vm_readv): a swapped page comes back, a
 * poisoned one fails. Pages vmced took away itself are PROT_NONE mappings.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-vm"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <unistd.h>

#include "page-replace.h"
#include "page.h"
#include "poison-scan.h"

#define VMCE_PM_PRESENT (G_GUINT64_CONSTANT (1) << 63)
#define VMCE_PM_SWAP (G_GUINT64_CONSTANT (1) << 62)
/* pagemap entries read at a time: 512 KiB, 128 MiB of guest RAM */
#define VMCE_SCAN_CHUNK 65536

static void
vmce_poison_scan_taken_away (VmceVmaTable *vmas, guint64 hva, guint64 end, GArray *found)
{
  for (guint64 addr = hva; addr < end;) {
    const VmceVma *vma = vmce_vma_table_lookup (vmas, addr);
    guint64 stop;

    if (vma == NULL) {
      addr += VMCE_PAGE_SIZE;
      continue;
    }
    stop = MIN (vma->end, end);
    if (!vma->readable) {
      for (guint64 page = addr; page < stop; page += VMCE_PAGE_SIZE) {
        VmcePoisonFound f = { .hva = page, .taken_away = TRUE };
        g_array_append_val (found, f);
      }
    }
    addr = stop;
  }
}

GArray *
vmce_poison_scan (pid_t pid, VmceVmaTable *vmas, guint64 hva, guint64 size, GError **error)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/pagemap", pid);
  g_autoptr(GArray) found = g_array_new (FALSE, FALSE, sizeof (VmcePoisonFound));
  g_autofree guint64 *entries = g_new (guint64, VMCE_SCAN_CHUNK);
  guint64 end = (hva + size) & ~(VMCE_PAGE_SIZE - 1);
  int fd;

  hva &= ~(VMCE_PAGE_SIZE - 1);
  vmce_poison_scan_taken_away (vmas, hva, end, found);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "cannot open %s: %s", path,
                 g_strerror (errsv));
    return NULL;
  }
  for (guint64 addr = hva; addr < end;) {
    guint64 n = MIN ((end - addr) / VMCE_PAGE_SIZE, VMCE_SCAN_CHUNK);
    ssize_t got = pread (fd, entries, n * sizeof (guint64),
                         (off_t) (addr / VMCE_PAGE_SIZE * sizeof (guint64)));

    if (got <= 0) {
      int errsv = got < 0 ? errno : EIO;
      close (fd);
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                   "cannot read %s at 0x%" G_GINT64_MODIFIER "x: %s", path, addr,
                   g_strerror (errsv));
      return NULL;
    }
    n = (guint64) got / sizeof (guint64);
    for (guint64 i = 0; i < n; i++) {
      guint64 page = addr + i * VMCE_PAGE_SIZE;
      VmcePoisonFound f = { .hva = page, .taken_away = FALSE };

      if ((entries[i] & (VMCE_PM_SWAP | VMCE_PM_PRESENT)) != VMCE_PM_SWAP)
        continue;
      /* swapped out, or poisoned: only a poisoned page cannot be read */
      if (!vmce_page_is_readable (pid, page))
        g_array_append_val (found, f);
    }
    addr += n * VMCE_PAGE_SIZE;
  }
  close (fd);
  return g_steal_pointer (&found);
}
