/*
 * Replacing a poisoned host page (see page-replace.h).
 *
 * Why not simply mmap(MAP_FIXED) over it, as QEMU 7.2's qemu_ram_remap()
 * does: for file-backed or shared RAM that maps the same poisoned page of
 * the file again (fixed in QEMU 10.0, which discards the page first), and
 * for any RAM it splits QEMU's mapping and drops what QEMU set on it with
 * madvise (KSM merging, MADV_DONTDUMP, huge pages). So, as QEMU 10.0's
 * ram_block_discard_range():
 *  - shared memory (a file, /dev/shm, memfd, shmem, hugetlbfs) first gets
 *    the page punched out of its backing (MADV_REMOVE);
 *  - then the page table entry goes (MADV_DONTNEED). For a poisoned page
 *    that entry is a hwpoison marker, which punching a hole leaves in place
 *    (unmap_mapping_range() keeps it, as it keeps private COW copies), so
 *    this step is needed for shared memory too. Locked memory takes
 *    MADV_DONTNEED_LOCKED (Linux 5.18), anonymous memory falls back to a
 *    fresh mapping.
 * The next touch then faults in a fresh page: zeros, or for a private file
 * mapping the file's own data.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-ptrace"

#include <errno.h>
#include <gio/gio.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "page-replace.h"
#include "page.h"
#include "remote-syscall.h"

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

void
vmce_page_replace_clear (VmcePageReplace *r)
{
  g_clear_pointer (&r->backing, g_free);
  g_clear_pointer (&r->how, g_free);
}

gboolean
vmce_page_is_readable (pid_t pid, guint64 hva)
{
  guint8 byte;
  struct iovec local = { .iov_base = &byte, .iov_len = 1 };
  struct iovec remote = { .iov_base = GSIZE_TO_POINTER (hva), .iov_len = 1 };

  /* a hwpoison entry or PROT_NONE fails the kernel's page lookup
   * (EFAULT); no signal is sent to anyone */
  return process_vm_readv (pid, &local, 1, &remote, 1, 0) == 1;
}

void
vmce_page_replace_plan (const VmceVma *vma, VmceReplacePlan *plan)
{
  plan->unit = vma->page_size;
  /* guest RAM is read-write; MADV_REMOVE also needs a writable mapping */
  plan->restore_access = !vma->readable || !vma->writable;
  plan->punch = vma->shared;
  plan->may_remap = !vma->shared && vma->path == NULL && !vma->hugetlb;
  plan->file_data = !vma->shared && vma->path != NULL && !vma->hugetlb;
}

/* Drops the page table entries of [start, start+len) */
static gboolean
vmce_page_zap (pid_t pid, pid_t tid, const VmceReplacePlan *plan, guint64 start, guint64 len,
               GString *how, GError **error)
{
  g_autoptr(GError) local = NULL;

  if (vmce_remote_madvise (pid, tid, start, len, MADV_DONTNEED, &local)) {
    g_string_append (how, "MADV_DONTNEED");
    return TRUE;
  }
  if (!g_error_matches (local, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT)) {
    g_propagate_error (error, g_steal_pointer (&local));
    return FALSE;
  }
  /* EINVAL: mlocked memory (QEMU's -overcommit mem-lock=on) */
  g_clear_error (&local);
  if (vmce_remote_madvise (pid, tid, start, len, MADV_DONTNEED_LOCKED, &local)) {
    g_string_append (how, "MADV_DONTNEED_LOCKED (locked memory)");
    return TRUE;
  }
  if (!plan->may_remap) {
    g_propagate_error (error, g_steal_pointer (&local));
    return FALSE;
  }
  /* what QEMU 7.2 does: a new mapping (QEMU's madvise settings on it are
   * lost, and with mlockall(MCL_FUTURE) the kernel locks it again) */
  g_clear_error (&local);
  if (!vmce_remote_map_anon_fixed (pid, tid, start, len, error))
    return FALSE;
  g_string_append (how, "mmap(MAP_FIXED) of fresh anonymous memory (MADV_DONTNEED refused)");
  return TRUE;
}

gboolean
vmce_page_replace (pid_t pid,
                   pid_t tid,
                   VmceVmaTable *vmas,
                   guint64 hva,
                   VmcePageReplace *out,
                   GError **error)
{
  return vmce_page_replace_range (pid, tid, vmas, hva, 1, out, error);
}

gboolean
vmce_page_replace_range (pid_t pid,
                         pid_t tid,
                         VmceVmaTable *vmas,
                         guint64 hva,
                         guint n_units,
                         VmcePageReplace *out,
                         GError **error)
{
  const VmceVma *vma = vmce_vma_table_lookup (vmas, hva);
  g_autoptr(GString) how = g_string_new (NULL);
  VmceReplacePlan plan;
  guint64 start, len;

  memset (out, 0, sizeof *out);
  if (vma == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                 "HVA 0x%" G_GINT64_MODIFIER "x is not mapped in pid %d", hva, pid);
    return FALSE;
  }
  /* a poisoned huge page is lost whole: the kernel poisons it all */
  vmce_page_replace_plan (vma, &plan);
  start = hva & ~(plan.unit - 1);
  len = MIN ((guint64) MAX (n_units, 1u) * plan.unit, vma->end - start);
  out->start = start;
  out->len = len;
  out->backing = vmce_vma_describe (vma);

  /* PROT_NONE: vmced took the page away (a simulated error, maybe left by
   * a vmced that was killed) */
  if (plan.restore_access) {
    if (!vmce_remote_mprotect (pid, tid, start, len, PROT_READ | PROT_WRITE, error))
      return FALSE;
    g_string_append (how, "mprotect read-write, ");
  }
  if (plan.punch) {
    if (!vmce_remote_madvise (pid, tid, start, len, MADV_REMOVE, error)) {
      g_prefix_error (error, "cannot punch the page out of %s: ", out->backing);
      return FALSE;
    }
    g_string_append_printf (how, "MADV_REMOVE (hole punched at offset 0x%" G_GINT64_MODIFIER "x), ",
                            vma->offset + (start - vma->start));
  }
  if (!vmce_page_zap (pid, tid, &plan, start, len, how, error)) {
    g_prefix_error (error, "cannot drop the page from QEMU's page table: ");
    return FALSE;
  }
  if (!vmce_page_is_readable (pid, start) || !vmce_page_is_readable (pid, start + len - VMCE_PAGE_SIZE)) {
    if (plan.file_data)
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                   "the page of %s is itself poisoned, and QEMU maps that file privately: "
                   "vmced does not punch holes in a file QEMU only reads",
                   vma->path);
    else if (vma->hugetlb)
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                   "the huge page is still unreadable after %s: no free huge page of %" G_GUINT64_FORMAT
                   " kB in the pool?",
                   how->str, plan.unit / 1024);
    else
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "the page is still unreadable after %s",
                   how->str);
    return FALSE;
  }
  g_string_append (how, plan.file_data ? ": the next touch reads the file's own data"
                                       : ": the next touch gets a fresh zeroed page");
  out->how = g_string_free (g_steal_pointer (&how), FALSE);
  return TRUE;
}
