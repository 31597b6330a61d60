/*
 * poison-mark with a real child process: a private page and a memfd page
 * poisoned by the kernel's marker (UFFDIO_POISON) cannot be read by anyone
 * (process_vm_readv fails, as on a hwpoisoned page), their neighbours can,
 * and a mark taken away leaves a fresh zeroed page. On a kernel without
 * UFFDIO_POISON (Linux < 6.6) the test says so and skips.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <sys/mman.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "poison-mark.h"
#include "ptrace-watch.h"
#include "test-child.h"

typedef struct {
  pid_t pid;
  guint64 anon;   /* 3 private anonymous pages, written: the middle one is marked */
  guint64 shared; /* a memfd page, MAP_SHARED */
  gboolean anon_ok, shared_ok, unmark_ok;
  gboolean anon_readable, before_readable, after_readable, shared_readable, unmarked_readable;
  guint8 unmarked_byte, before_byte;
  GError *error;
} Ctx;

static gboolean
readable (pid_t pid, guint64 addr, guint8 *byte)
{
  guint8 b = 0xff;
  struct iovec local = { .iov_base = &b, .iov_len = 1 };
  struct iovec remote = { .iov_base = GSIZE_TO_POINTER (addr), .iov_len = 1 };
  gboolean ok = process_vm_readv (pid, &local, 1, &remote, 1, 0) == 1;

  if (byte != NULL)
    *byte = b;
  return ok;
}

static void
at_stop (VmcePtraceWatch *watch, pid_t tid, gpointer data)
{
  Ctx *ctx = data;

  ctx->anon_ok = vmce_poison_mark (ctx->pid, tid, ctx->anon + 4096 + 123, &ctx->error);
  if (!ctx->anon_ok)
    return;
  ctx->anon_readable = readable (ctx->pid, ctx->anon + 4096, NULL);
  ctx->before_readable = readable (ctx->pid, ctx->anon, &ctx->before_byte);
  ctx->after_readable = readable (ctx->pid, ctx->anon + 8192, NULL);
  ctx->shared_ok = vmce_poison_mark (ctx->pid, tid, ctx->shared, &ctx->error);
  if (!ctx->shared_ok)
    return;
  ctx->shared_readable = readable (ctx->pid, ctx->shared, NULL);
  ctx->unmark_ok = vmce_poison_unmark (ctx->pid, tid, ctx->anon + 4096, &ctx->error);
  if (ctx->unmark_ok)
    ctx->unmarked_readable = readable (ctx->pid, ctx->anon + 4096, &ctx->unmarked_byte);
}

static void
test_poison_mark (void)
{
  Ctx ctx = { 0 };
  guint8 *anon, *shared;
  int memfd;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  if (vmce_poison_mark_unsupported () != NULL) {
    g_autofree gchar *why = g_strdup_printf ("this kernel cannot mark a page: %s",
                                             vmce_poison_mark_unsupported ());
    g_test_skip (why);
    return;
  }
  anon = mmap (NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_assert_true (anon != MAP_FAILED);
  memset (anon, 'a', 3 * 4096);
  memfd = memfd_create ("vmce-test-ram", MFD_CLOEXEC);
  g_assert_cmpint (memfd, >=, 0);
  g_assert_no_errno (ftruncate (memfd, 4096));
  shared = mmap (NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  g_assert_true (shared != MAP_FAILED);
  shared[0] = 'b';
  ctx.anon = (guint64) (guintptr) anon;
  ctx.shared = (guint64) (guintptr) shared;
  ctx.pid = test_child_fork_idle ();
  munmap (anon, 3 * 4096);
  test_child_run_stopped (ctx.pid, at_stop, &ctx);

  g_assert_no_error (ctx.error);
  g_assert_true (ctx.anon_ok);
  g_assert_false (ctx.anon_readable);
  g_assert_true (ctx.before_readable);
  g_assert_cmpuint (ctx.before_byte, ==, 'a');
  g_assert_true (ctx.after_readable);
  g_assert_true (ctx.shared_ok);
  g_assert_false (ctx.shared_readable);
  /* the marker is in the child's page table, not in the memfd */
  g_assert_cmpuint (shared[0], ==, 'b');
  g_assert_true (ctx.unmark_ok);
  g_assert_true (ctx.unmarked_readable);
  g_assert_cmpuint (ctx.unmarked_byte, ==, 0);
  munmap (shared, 4096);
  close (memfd);
}

/* A page the kernel cannot mark alone: one of a hugetlbfs mapping, or none */
static void
test_poison_mark_unmapped (void)
{
  Ctx ctx = { 0 };

  if (!test_ptrace_allowed () || vmce_poison_mark_unsupported () != NULL) {
    g_test_skip ("ptrace is not allowed here, or this kernel has no UFFDIO_POISON");
    return;
  }
  ctx.pid = test_child_fork_idle ();
  ctx.anon = 0x1000; /* never mapped */
  test_child_run_stopped (ctx.pid, at_stop, &ctx);
  g_assert_false (ctx.anon_ok);
  g_assert_error (ctx.error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (ctx.error->message, "not mapped"));
  g_clear_error (&ctx.error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/poison-mark/private-and-shared", test_poison_mark);
  g_test_add_func ("/poison-mark/unmapped", test_poison_mark_unmapped);
  return g_test_run ();
}
