/*
 * poison-scan with a real child process: of its three pages, the one
 * taken away (PROT_NONE, as vmced leaves a simulated error) is found, and
 * the others, present or never touched, are not. (A hwpoison entry needs
 * a kernel with MEMORY_FAILURE: the host lab's rows find one for real.)
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "poison-scan.h"
#include "proc-maps.h"
#include "ptrace-watch.h"
#include "remote-syscall.h"
#include "test-child.h"

typedef struct {
  pid_t pid;
  guint64 mem;
  gboolean attached;
  gboolean done;
  GArray *found;
  GError *error;
} Ctx;

static gboolean
on_signal_stop (VmcePtraceWatch *watch, pid_t tid, siginfo_t *info, gint64 t, gpointer data)
{
  return FALSE;
}

static void
on_attached (VmcePtraceWatch *watch, gpointer data)
{
  ((Ctx *) data)->attached = TRUE;
}

static const VmcePtraceWatchFuncs funcs = {
  .signal_stop = on_signal_stop,
  .attached = on_attached,
};

static void
at_stop (VmcePtraceWatch *watch, pid_t tid, gpointer data)
{
  Ctx *ctx = data;
  g_autoptr(VmceVmaTable) vmas = NULL;

  ctx->done = TRUE;
  if (!vmce_remote_mprotect (ctx->pid, tid, ctx->mem + 4096, 4096, PROT_NONE, &ctx->error))
    return;
  vmas = vmce_vma_table_read (ctx->pid, &ctx->error);
  if (vmas != NULL)
    ctx->found = vmce_poison_scan (ctx->pid, vmas, ctx->mem, 3 * 4096, &ctx->error);
}

static void
test_poison_scan (void)
{
  g_autoptr(VmcePtraceWatch) watch = NULL;
  g_autoptr(GError) error = NULL;
  Ctx ctx = { 0 };
  guint8 *mem;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  mem = mmap (NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_assert_true (mem != MAP_FAILED);
  mem[0] = 1;
  mem[4096] = 2; /* the third page is never touched */
  ctx.mem = (guint64) (guintptr) mem;
  ctx.pid = fork ();
  g_assert_cmpint (ctx.pid, >=, 0);
  if (ctx.pid == 0) {
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    for (;;)
      pause ();
  }
  munmap (mem, 3 * 4096);
  watch = vmce_ptrace_watch_new (ctx.pid, &funcs, &ctx);
  g_assert_true (vmce_ptrace_watch_attach (watch, &error));
  g_assert_true (test_run_until (&ctx.attached));
  vmce_ptrace_watch_call_stopped (watch, ctx.pid, at_stop, &ctx, NULL);
  g_assert_true (test_run_until (&ctx.done));
  g_assert_no_error (ctx.error);
  g_assert_nonnull (ctx.found);
  g_assert_cmpuint (ctx.found->len, ==, 1);
  g_assert_cmphex (g_array_index (ctx.found, VmcePoisonFound, 0).hva, ==, ctx.mem + 4096);
  g_assert_true (g_array_index (ctx.found, VmcePoisonFound, 0).taken_away);
  g_array_unref (ctx.found);
  vmce_ptrace_watch_detach_sync (watch);
  kill (ctx.pid, SIGKILL);
  waitpid (ctx.pid, NULL, __WALL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  test_block_sigchld ();
  g_test_add_func ("/poison-scan/taken-away", test_poison_scan);
  return g_test_run ();
}
