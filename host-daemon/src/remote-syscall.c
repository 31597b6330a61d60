/*
 * Making a traced, stopped thread run one system call for us.
 *
 * vmced needs this to change QEMU's own mappings (mprotect a guest page to
 * stand for a host page the kernel has unmapped, and to undo it), which no
 * system call can do to another process. The thread is pointed at a
 * `syscall` instruction that already exists in the process (in the vDSO),
 * single-stepped over it, and put back exactly as it was.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-ptrace"

#include <errno.h>
#include <gio/gio.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remote-syscall.h"

#ifndef __x86_64__
#error "remote-syscall.c knows only x86_64 registers"
#endif

static GHashTable *vmce_syscall_insn = NULL; /* pid -> address of "syscall" */

static gboolean
vmce_find_syscall_insn (pid_t pid, guint64 *addr, GError **error)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/maps", pid);
  g_autofree gchar *maps = NULL;
  g_auto(GStrv) lines = NULL;
  gpointer cached;

  if (vmce_syscall_insn == NULL)
    vmce_syscall_insn = g_hash_table_new (g_direct_hash, g_direct_equal);
  cached = g_hash_table_lookup (vmce_syscall_insn, GINT_TO_POINTER (pid));
  if (cached != NULL) {
    *addr = GPOINTER_TO_SIZE (cached);
    return TRUE;
  }
  if (!g_file_get_contents (path, &maps, NULL, error))
    return FALSE;
  lines = g_strsplit (maps, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    guint64 start, end;
    g_autofree guint8 *buf = NULL;
    struct iovec local, remote;
    const guint8 *hit;
    gssize n;

    /* the vDSO always has one (its syscall fallbacks) and is executable */
    if (!g_str_has_suffix (lines[i], "[vdso]"))
      continue;
    if (sscanf (lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x", &start, &end) != 2 ||
        end <= start || end - start > 1024 * 1024)
      break;
    buf = g_malloc (end - start);
    local.iov_base = buf;
    local.iov_len = end - start;
    remote.iov_base = GSIZE_TO_POINTER (start);
    remote.iov_len = end - start;
    n = process_vm_readv (pid, &local, 1, &remote, 1, 0);
    if (n <= 0)
      break;
    hit = memmem (buf, n, "\x0f\x05", 2);
    if (hit == NULL)
      break;
    *addr = start + (hit - buf);
    g_hash_table_insert (vmce_syscall_insn, GINT_TO_POINTER (pid), GSIZE_TO_POINTER (*addr));
    return TRUE;
  }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
               "pid %d: no syscall instruction found in its vDSO", pid);
  return FALSE;
}

/* Waits for the single-step trap. Other signals that arrive first are
 * sent again afterwards, so the thread loses none. */
static gboolean
vmce_wait_step (pid_t pid, pid_t tid, GArray *resend, GError **error)
{
  for (;;) {
    siginfo_t info;

    memset (&info, 0, sizeof info);
    if (waitid (P_PID, tid, &info, WSTOPPED | WEXITED | __WALL) < 0) {
      int errsv = errno;
      if (errsv == EINTR)
        continue;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                   "thread %d: waitid: %s", tid, g_strerror (errsv));
      return FALSE;
    }
    if (info.si_code != CLD_TRAPPED) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                   "thread %d ended during a remote system call", tid);
      return FALSE;
    }
    if (info.si_status == SIGTRAP)
      return TRUE;
    if ((info.si_status >> 8) == 0) {
      int sig = info.si_status & 0xff;
      g_array_append_val (resend, sig);
    }
    if (ptrace (PTRACE_SINGLESTEP, tid, NULL, NULL) < 0) {
      int errsv = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                   "thread %d: cannot step: %s", tid, g_strerror (errsv));
      return FALSE;
    }
  }
}

gboolean
vmce_remote_syscall (pid_t pid,
                     pid_t tid,
                     long nr,
                     const long args[6],
                     long *ret,
                     GError **error)
{
  struct user_regs_struct saved, regs;
  g_autoptr(GArray) resend = g_array_new (FALSE, FALSE, sizeof (int));
  guint64 insn = 0;
  gboolean ok;

  if (!vmce_find_syscall_insn (pid, &insn, error))
    return FALSE;
  if (ptrace (PTRACE_GETREGS, tid, NULL, &saved) < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "thread %d: cannot read registers: %s", tid, g_strerror (errsv));
    return FALSE;
  }
  regs = saved;
  regs.rip = insn;
  regs.rax = nr;
  regs.rdi = args[0];
  regs.rsi = args[1];
  regs.rdx = args[2];
  regs.r10 = args[3];
  regs.r8 = args[4];
  regs.r9 = args[5];
  /* not in a syscall: the kernel must not "restart" anything on the way out */
  regs.orig_rax = (unsigned long long) -1;
  if (ptrace (PTRACE_SETREGS, tid, NULL, &regs) < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "thread %d: cannot set registers: %s", tid, g_strerror (errsv));
    return FALSE;
  }
  ok = ptrace (PTRACE_SINGLESTEP, tid, NULL, NULL) == 0;
  if (!ok) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "thread %d: cannot step: %s", tid, g_strerror (errsv));
  }
  if (ok)
    ok = vmce_wait_step (pid, tid, resend, error);
  if (ok && ptrace (PTRACE_GETREGS, tid, NULL, &regs) == 0)
    *ret = (long) regs.rax;
  /* put it back even after a failure: it may still be stopped */
  (void) ptrace (PTRACE_SETREGS, tid, NULL, &saved);
  for (guint i = 0; i < resend->len; i++)
    (void) syscall (SYS_tgkill, pid, tid, g_array_index (resend, int, i));
  return ok;
}

/* One system call that fails with a negative errno; @what names it for
 * the error ("mprotect(0x..., 4096, 3)") */
static gboolean
vmce_remote_call (pid_t pid,
                  pid_t tid,
                  long nr,
                  const long args[6],
                  long *ret,
                  const gchar *what,
                  GError **error)
{
  if (!vmce_remote_syscall (pid, tid, nr, args, ret, error))
    return FALSE;
  if (*ret < 0 && *ret > -4096) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno ((int) -*ret), "pid %d: %s: %s", pid,
                 what, g_strerror ((int) -*ret));
    return FALSE;
  }
  return TRUE;
}

gboolean
vmce_remote_mprotect (pid_t pid, pid_t tid, guint64 addr, guint64 len, int prot, GError **error)
{
  long args[6] = { (long) addr, (long) len, prot, 0, 0, 0 };
  g_autofree gchar *what = g_strdup_printf ("mprotect(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT
                                            ", %d)",
                                            addr, len, prot);
  long ret = 0;

  return vmce_remote_call (pid, tid, SYS_mprotect, args, &ret, what, error);
}

static const gchar *
vmce_madvise_name (int advice)
{
  switch (advice) {
  case MADV_DONTNEED:
    return "MADV_DONTNEED";
  case MADV_REMOVE:
    return "MADV_REMOVE";
#ifdef MADV_DONTNEED_LOCKED
  case MADV_DONTNEED_LOCKED:
    return "MADV_DONTNEED_LOCKED";
#endif
  default:
    return "madvise";
  }
}

gboolean
vmce_remote_madvise (pid_t pid, pid_t tid, guint64 addr, guint64 len, int advice, GError **error)
{
  long args[6] = { (long) addr, (long) len, advice, 0, 0, 0 };
  g_autofree gchar *what = g_strdup_printf ("madvise(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT
                                            ", %s)",
                                            addr, len, vmce_madvise_name (advice));
  long ret = 0;

  return vmce_remote_call (pid, tid, SYS_madvise, args, &ret, what, error);
}

gboolean
vmce_remote_sigaction_default (pid_t pid, pid_t tid, int signo, GError **error)
{
  /* the kernel's struct sigaction for SIG_DFL is all zeros (handler,
   * flags, restorer, mask): put one below the thread's stack pointer and
   * its red zone, where a signal frame would go, and put back what was there */
  enum { N_WORDS = 4 };
  struct user_regs_struct regs;
  long saved[N_WORDS], args[6] = { signo, 0, 0, sizeof (guint64), 0, 0 }, ret = 0;
  g_autofree gchar *what = g_strdup_printf ("rt_sigaction(%d, SIG_DFL)", signo);
  guint64 at;
  gboolean ok;

  if (ptrace (PTRACE_GETREGS, tid, NULL, &regs) < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "thread %d: cannot read registers: %s", tid, g_strerror (errsv));
    return FALSE;
  }
  at = (regs.rsp - 1024) & ~(guint64) 15;
  for (guint i = 0; i < N_WORDS; i++) {
    errno = 0;
    saved[i] = ptrace (PTRACE_PEEKDATA, tid, (void *) (at + i * sizeof (long)), NULL);
    if ((saved[i] == -1 && errno != 0) ||
        ptrace (PTRACE_POKEDATA, tid, (void *) (at + i * sizeof (long)), NULL) < 0) {
      int errsv = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                   "thread %d: cannot write below its stack: %s", tid, g_strerror (errsv));
      return FALSE;
    }
  }
  args[1] = (long) at;
  ok = vmce_remote_call (pid, tid, SYS_rt_sigaction, args, &ret, what, error);
  for (guint i = 0; i < N_WORDS; i++)
    (void) ptrace (PTRACE_POKEDATA, tid, (void *) (at + i * sizeof (long)), (void *) saved[i]);
  return ok;
}

gboolean
vmce_remote_map_anon_fixed (pid_t pid, pid_t tid, guint64 addr, guint64 len, GError **error)
{
  long args[6] = { (long) addr, (long) len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0 };
  g_autofree gchar *what = g_strdup_printf ("mmap(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT
                                            ", MAP_FIXED)",
                                            addr, len);
  long ret = 0;

  if (!vmce_remote_call (pid, tid, SYS_mmap, args, &ret, what, error))
    return FALSE;
  if ((guint64) ret != addr) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                 "pid %d: mmap(MAP_FIXED) mapped 0x%lx instead of 0x%" G_GINT64_MODIFIER "x", pid,
                 ret, addr);
    return FALSE;
  }
  return TRUE;
}

gboolean
vmce_remote_map_anon (pid_t pid, pid_t tid, guint64 len, gboolean shared, guint64 *addr, GError **error)
{
  long args[6] = { 0, (long) len, PROT_READ | PROT_WRITE,
                   (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0 };
  g_autofree gchar *what = g_strdup_printf ("mmap(NULL, %" G_GUINT64_FORMAT ", %s anonymous)", len,
                                            shared ? "shared" : "private");
  long ret = 0;

  if (!vmce_remote_call (pid, tid, SYS_mmap, args, &ret, what, error))
    return FALSE;
  *addr = (guint64) ret;
  return TRUE;
}

gboolean
vmce_remote_mremap_fixed (pid_t pid, pid_t tid, guint64 from, guint64 len, guint64 to, GError **error)
{
  long args[6] = { (long) from, (long) len, (long) len, MREMAP_MAYMOVE | MREMAP_FIXED, (long) to, 0 };
  g_autofree gchar *what = g_strdup_printf ("mremap(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT
                                            ", MREMAP_FIXED, 0x%" G_GINT64_MODIFIER "x)",
                                            from, len, to);
  long ret = 0;

  if (!vmce_remote_call (pid, tid, SYS_mremap, args, &ret, what, error))
    return FALSE;
  if ((guint64) ret != to) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "pid %d: %s moved it to 0x%lx", pid, what, ret);
    return FALSE;
  }
  return TRUE;
}

gboolean
vmce_remote_munmap (pid_t pid, pid_t tid, guint64 addr, guint64 len, GError **error)
{
  long args[6] = { (long) addr, (long) len, 0, 0, 0, 0 };
  g_autofree gchar *what = g_strdup_printf ("munmap(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT ")",
                                            addr, len);
  long ret = 0;

  return vmce_remote_call (pid, tid, SYS_munmap, args, &ret, what, error);
}
