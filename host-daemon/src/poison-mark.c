/*
 * A page of QEMU's memory made poisoned by the kernel (see poison-mark.h).
 *
 * Why UFFDIO_POISON: a migration's destination must hold the source's
 * poisoned pages as poisoned, for every thread and for KVM. PROT_NONE does
 * not do that under KVM (KVM_RUN fails with EFAULT where a poisoned page
 * makes it send BUS_MCEERR_AR), and MADV_HWPOISON would poison a healthy
 * physical page (and needs CONFIG_MEMORY_FAILURE). UFFDIO_POISON puts a
 * poison marker in the page table entry, which the fault path, GUP and KVM
 * treat as a hwpoisoned page, without touching any physical page; the
 * marker outlives the userfaultfd that put it there.
 *
 * A userfaultfd works on the memory of the process that made it, so QEMU
 * makes it (a remote userfaultfd()), and vmced takes a copy of the file
 * (pidfd_getfd, which the tracer may do) and drives it from here: the
 * ioctls need structures in QEMU's memory otherwise.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-ptrace"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "page.h"
#include "poison-mark.h"
#include "proc-maps.h"
#include "remote-syscall.h"

/* Linux 6.6's, which Debian 12's headers (6.1) lack */
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
struct uffdio_poison {
  struct uffdio_range range;
  __u64 mode;
  __s64 updated;
};
#define UFFDIO_POISON _IOWR (UFFDIO, 0x08, struct uffdio_poison)
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static gboolean
vmce_uffd_api (int fd, GError **error)
{
  struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_POISON };

  if (ioctl (fd, UFFDIO_API, &api) < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "the kernel has no UFFDIO_POISON (UFFDIO_API: %s; Linux 6.6 added it)",
                 g_strerror (errsv));
    return FALSE;
  }
  return TRUE;
}

const gchar *
vmce_poison_mark_unsupported (void)
{
  static gsize once = 0;
  static gchar *why = NULL;

  if (g_once_init_enter (&once)) {
    g_autoptr(GError) error = NULL;
    int fd = (int) syscall (SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

    if (fd < 0)
      why = g_strdup_printf ("userfaultfd: %s", g_strerror (errno));
    else if (!vmce_uffd_api (fd, &error))
      why = g_strdup (error->message);
    if (fd >= 0)
      close (fd);
    g_once_init_leave (&once, 1);
  }
  return why;
}

/* A userfaultfd of @pid's memory, held here */
static int
vmce_uffd_of (pid_t pid, pid_t tid, GError **error)
{
  long args[6] = { O_CLOEXEC | O_NONBLOCK, 0, 0, 0, 0, 0 };
  long close_args[6] = { 0 };
  long remote = -1, ret = 0;
  int pidfd, fd;
  int errsv;

  if (!vmce_remote_syscall (pid, tid, SYS_userfaultfd, args, &remote, error))
    return -1;
  if (remote < 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno ((int) -remote),
                 "userfaultfd() in QEMU: %s", g_strerror ((int) -remote));
    return -1;
  }
  pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
  fd = pidfd >= 0 ? (int) syscall (SYS_pidfd_getfd, pidfd, (int) remote, 0) : -1;
  errsv = errno;
  if (pidfd >= 0)
    close (pidfd);
  /* QEMU's own copy goes at once: QEMU never knew of it */
  close_args[0] = remote;
  if (!vmce_remote_syscall (pid, tid, SYS_close, close_args, &ret, error)) {
    if (fd >= 0)
      close (fd);
    return -1;
  }
  if (fd < 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "cannot take QEMU's userfaultfd (pidfd_getfd): %s", g_strerror (errsv));
    return -1;
  }
  return fd;
}

static gboolean
vmce_uffd_poison (int fd, guint64 start, guint64 len, GError **error)
{
  struct uffdio_register reg = { .range = { start, len }, .mode = UFFDIO_REGISTER_MODE_MISSING };
  struct uffdio_poison poison = { .range = { start, len } };

  if (ioctl (fd, UFFDIO_REGISTER, &reg) < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "UFFDIO_REGISTER: %s",
                 g_strerror (errsv));
    return FALSE;
  }
  if (ioctl (fd, UFFDIO_POISON, &poison) < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "UFFDIO_POISON: %s",
                 g_strerror (errsv));
    return FALSE;
  }
  return TRUE;
}

gboolean
vmce_poison_mark_range (pid_t pid, pid_t tid, guint64 start, guint64 len, GError **error)
{
  g_autoptr(VmceVmaTable) vmas = NULL;
  const VmceVma *vma;
  int fd;
  gboolean ok;

  start &= VMCE_PAGE_MASK;
  if (vmce_poison_mark_unsupported () != NULL) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, vmce_poison_mark_unsupported ());
    return FALSE;
  }
  vmas = vmce_vma_table_read (pid, error);
  if (vmas == NULL)
    return FALSE;
  vma = vmce_vma_table_lookup (vmas, start);
  if (vma == NULL || vma->hugetlb || start + len > vma->end) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                 "HVA 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x is %s: not pages that can be "
                 "poisoned alone",
                 start, start + len - 1,
                 vma == NULL ? "not mapped" : vma->hugetlb ? "in a hugetlbfs mapping" : "more than one mapping");
    return FALSE;
  }
  /* a marker goes only where no page is (UFFDIO_POISON says EEXIST), and a
   * page vmced took away (PROT_NONE) would fault before the marker counts */
  if ((!vma->readable || !vma->writable) &&
      !vmce_remote_mprotect (pid, tid, start, len, PROT_READ | PROT_WRITE, error))
    return FALSE;
  if (!vmce_remote_madvise (pid, tid, start, len, MADV_DONTNEED, error))
    return FALSE;
  fd = vmce_uffd_of (pid, tid, error);
  if (fd < 0)
    return FALSE;
  if (!vmce_uffd_api (fd, error)) {
    close (fd);
    return FALSE;
  }
  ok = vmce_uffd_poison (fd, start, len, error);
  /* the last reference: the range is unregistered, the markers stay */
  close (fd);
  if (!ok)
    g_prefix_error (error, "cannot poison HVA 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x: ", start,
                    start + len - 1);
  return ok;
}

gboolean
vmce_poison_mark (pid_t pid, pid_t tid, guint64 hva, GError **error)
{
  return vmce_poison_mark_range (pid, tid, hva & VMCE_PAGE_MASK, VMCE_PAGE_SIZE, error);
}

gboolean
vmce_poison_unmark (pid_t pid, pid_t tid, guint64 hva, GError **error)
{
  /* zapping the entry drops the marker with it */
  return vmce_remote_madvise (pid, tid, hva & VMCE_PAGE_MASK, VMCE_PAGE_SIZE, MADV_DONTNEED, error);
}

gboolean
vmce_poison_mark_or_protect (pid_t pid,
                             pid_t tid,
                             guint64 start,
                             guint64 len,
                             gboolean may_protect,
                             const gchar **how,
                             GError **error)
{
  g_autoptr(GError) local = NULL;

  if (vmce_poison_mark_range (pid, tid, start, len, &local)) {
    *how = "UFFDIO_POISON";
    return TRUE;
  }
  /* no UFFDIO_POISON in this kernel, or not for this mapping (a file on
   * disk: userfaultfd takes anonymous memory, shmem and hugetlbfs) */
  if (!may_protect) {
    g_propagate_error (error, g_steal_pointer (&local));
    return FALSE;
  }
  g_debug ("pid %d: %s: taking the pages away instead", pid, local->message);
  if (!vmce_remote_mprotect (pid, tid, start & VMCE_PAGE_MASK, len, PROT_NONE, error))
    return FALSE;
  *how = vmce_poison_mark_unsupported () != NULL ? "PROT_NONE (no UFFDIO_POISON in this kernel)"
                                                 : "PROT_NONE (no UFFDIO_POISON for this mapping)";
  return TRUE;
}
