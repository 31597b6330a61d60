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
#include <sys/mman.h>

#include "poison-scan.h"
#include "proc-maps.h"
#include "ptrace-watch.h"
#include "remote-syscall.h"
#include "test-child.h"

typedef struct {
  pid_t pid;
  guint64 mem;
  GArray *found;
  GError *error;
} Ctx;

static void
at_stop (VmcePtraceWatch *watch, pid_t tid, gpointer data)
{
  Ctx *ctx = data;
  g_autoptr(VmceVmaTable) vmas = NULL;

  if (!vmce_remote_mprotect (ctx->pid, tid, ctx->mem + 4096, 4096, PROT_NONE, &ctx->error))
    return;
  vmas = vmce_vma_table_read (ctx->pid, &ctx->error);
  if (vmas != NULL)
    ctx->found = vmce_poison_scan (ctx->pid, vmas, ctx->mem, 3 * 4096, &ctx->error);
}

static void
test_poison_scan (void)
{
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
  ctx.pid = test_child_fork_idle ();
  munmap (mem, 3 * 4096);
  test_child_run_stopped (ctx.pid, at_stop, &ctx);
  g_assert_no_error (ctx.error);
  g_assert_nonnull (ctx.found);
  g_assert_cmpuint (ctx.found->len, ==, 1);
  g_assert_cmphex (g_array_index (ctx.found, VmcePoisonFound, 0).hva, ==, ctx.mem + 4096);
  g_assert_true (g_array_index (ctx.found, VmcePoisonFound, 0).taken_away);
  g_array_unref (ctx.found);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  test_block_sigchld ();
  g_test_add_func ("/poison-scan/taken-away", test_poison_scan);
  return g_test_run ();
}
