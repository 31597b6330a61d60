/*
 * remote-syscall with a real child process: the child's own thread changes
 * its own mapping, and goes on as if nothing happened.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ptrace-watch.h"
#include "remote-syscall.h"
#include "test-child.h"

typedef struct {
  TestChild *child;
  gboolean attached;
  gboolean done;
  long getpid_ret;
  gchar *perms_after_protect;
  gchar *perms_after_unprotect;
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

/* "rw-p" etc. of the mapping that holds @addr */
static gchar *
test_perms (pid_t pid, guint64 addr)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/maps", pid);
  g_autofree gchar *maps = NULL;
  g_auto(GStrv) lines = NULL;

  g_assert_true (g_file_get_contents (path, &maps, NULL, NULL));
  lines = g_strsplit (maps, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    guint64 start = 0, end = 0;
    char perms[5] = { 0 };
    if (sscanf (lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x %4s", &start, &end,
                perms) == 3 &&
        addr >= start && addr < end)
      return g_strdup (perms);
  }
  return NULL;
}

static gboolean
run_calls (Ctx *ctx, pid_t tid)
{
  long args[6] = { 0 };
  long ret = -1;

  if (!vmce_remote_syscall (ctx->child->pid, tid, SYS_getpid, args, &ret, &ctx->error))
    return FALSE;
  ctx->getpid_ret = ret;
  if (!vmce_remote_mprotect (ctx->child->pid, tid, ctx->child->page, 4096, PROT_NONE,
                             &ctx->error))
    return FALSE;
  ctx->perms_after_protect = test_perms (ctx->child->pid, ctx->child->page);
  if (!vmce_remote_mprotect (ctx->child->pid, tid, ctx->child->page, 4096,
                             PROT_READ | PROT_WRITE, &ctx->error))
    return FALSE;
  ctx->perms_after_unprotect = test_perms (ctx->child->pid, ctx->child->page);
  return TRUE;
}

static void
at_stop (VmcePtraceWatch *watch, pid_t tid, gpointer data)
{
  Ctx *ctx = data;

  (void) run_calls (ctx, tid);
  ctx->done = TRUE;
}

static void
test_remote_syscall_mprotect (void)
{
  g_autoptr(TestChild) child = NULL;
  g_autoptr(VmcePtraceWatch) watch = NULL;
  g_autoptr(GError) error = NULL;
  Ctx ctx = { 0 };

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  child = test_child_spawn ();
  ctx.child = child;
  watch = vmce_ptrace_watch_new (child->pid, &funcs, &ctx);
  g_assert_true (vmce_ptrace_watch_attach (watch, &error));
  g_assert_true (test_run_until (&ctx.attached));

  /* the child sits in read(): the call interrupts a blocked syscall, which
   * must be restarted afterwards as if nothing happened */
  vmce_ptrace_watch_call_stopped (watch, child->pid, at_stop, &ctx, NULL);
  g_assert_true (test_run_until (&ctx.done));
  g_assert_no_error (ctx.error);
  g_assert_cmpint (ctx.getpid_ret, ==, child->pid);
  g_assert_cmpstr (ctx.perms_after_protect, ==, "---p");
  g_assert_cmpstr (ctx.perms_after_unprotect, ==, "rw-p");
  /* its read() was restarted, and it can still read its page */
  g_assert_true (test_child_command (child, 'r'));
  g_assert_true (test_child_command (child, 'p'));
  g_free (ctx.perms_after_protect);
  g_free (ctx.perms_after_unprotect);
}

int
main (int argc, char **argv)
{
  test_block_sigchld ();
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/remote-syscall/mprotect", test_remote_syscall_mprotect);
  return g_test_run ();
}
