/*
 * ptrace-watch with a real child process and real ptrace.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace-watch.h"
#include "test-child.h"

#define SIGBUS_BIT (G_GUINT64_CONSTANT (1) << (SIGBUS - 1))

typedef struct {
  gboolean attached;
  gboolean detached;
  gboolean exited;
  int exit_status;
  guint n_stops;
  siginfo_t last;
  pid_t last_tid;
  gboolean take; /* take SIGBUS stops and hold them */
} Watched;

static gboolean
on_signal_stop (VmcePtraceWatch *watch, pid_t tid, siginfo_t *info, gint64 t, gpointer data)
{
  Watched *w = data;

  w->n_stops++;
  w->last = *info;
  w->last_tid = tid;
  return w->take && info->si_signo == SIGBUS;
}

static void
on_attached (VmcePtraceWatch *watch, gpointer data)
{
  ((Watched *) data)->attached = TRUE;
}

static void
on_exited (VmcePtraceWatch *watch, int status, gpointer data)
{
  Watched *w = data;

  w->exited = TRUE;
  w->exit_status = status;
}

static void
on_detached (VmcePtraceWatch *watch, gpointer data)
{
  ((Watched *) data)->detached = TRUE;
}

static const VmcePtraceWatchFuncs funcs = {
  .signal_stop = on_signal_stop,
  .attached = on_attached,
  .exited = on_exited,
  .detached = on_detached,
};

static VmcePtraceWatch *
attach_watch (TestChild *child, Watched *w)
{
  g_autoptr(GError) error = NULL;
  VmcePtraceWatch *watch = vmce_ptrace_watch_new (child->pid, &funcs, w);

  g_assert_true (vmce_ptrace_watch_attach (watch, &error));
  g_assert_no_error (error);
  g_assert_true (test_run_until (&w->attached));
  return watch;
}

static gboolean
skip_without_ptrace (void)
{
  if (test_ptrace_allowed ())
    return FALSE;
  g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
  return TRUE;
}

/* SIGBUS is unblocked while attached and blocked again after, like QEMU
 * expects; a SIGBUS sent to the main thread reaches signal-delivery-stop */
static void
test_ptrace_watch_mask_and_stop (void)
{
  g_autoptr(TestChild) child = NULL;
  g_autoptr(VmcePtraceWatch) watch = NULL;
  g_autoptr(GError) error = NULL;
  Watched w = { .take = TRUE };
  siginfo_t info, check;

  if (skip_without_ptrace ())
    return;
  child = test_child_spawn ();
  g_assert_cmphex (test_proc_status_hex (child->pid, child->pid, "SigBlk") & SIGBUS_BIT, ==,
                   SIGBUS_BIT);

  watch = attach_watch (child, &w);
  g_assert_cmpint (test_proc_status_int (child->pid, child->pid, "TracerPid"), ==, getpid ());
  g_assert_cmphex (test_proc_status_hex (child->pid, child->pid, "SigBlk") & SIGBUS_BIT, ==, 0);

  /* a SIGBUS to the main thread, as the kernel sends AO; rewritten, as
   * vmced's simulation does, then suppressed */
  g_assert_no_errno (syscall (SYS_tgkill, child->pid, child->pid, SIGBUS));
  test_wait (w.n_stops > 0);
  g_assert_cmpuint (w.n_stops, ==, 1);
  g_assert_cmpint (w.last.si_signo, ==, SIGBUS);
  g_assert_cmpint (w.last.si_code, ==, SI_TKILL);
  g_assert_cmpint (w.last_tid, ==, child->pid);
  g_assert_true (vmce_ptrace_watch_is_held (watch, child->pid));
  memset (&info, 0, sizeof info);
  info.si_signo = SIGBUS;
  info.si_code = BUS_MCEERR_AO;
  info.si_addr = (void *) 0x7f0000001000;
  info.si_addr_lsb = 12;
  g_assert_true (vmce_ptrace_watch_set_siginfo (watch, child->pid, &info, &error));
  g_assert_no_errno (ptrace (PTRACE_GETSIGINFO, child->pid, NULL, &check));
  g_assert_cmpint (check.si_code, ==, BUS_MCEERR_AO);
  g_assert_true (check.si_addr == (void *) 0x7f0000001000);
  g_assert_cmpint (check.si_addr_lsb, ==, 12);
  vmce_ptrace_watch_resume (watch, child->pid, 0);
  g_assert_false (vmce_ptrace_watch_is_held (watch, child->pid));
  /* suppressed: the child did not die of it and still answers */
  g_assert_true (test_child_command (child, 'p'));

  vmce_ptrace_watch_detach (watch);
  g_assert_true (test_run_until (&w.detached));
  g_assert_cmpint (test_proc_status_int (child->pid, child->pid, "TracerPid"), ==, 0);
  g_assert_cmphex (test_proc_status_hex (child->pid, child->pid, "SigBlk") & SIGBUS_BIT, ==,
                   SIGBUS_BIT);
  g_assert_true (test_child_command (child, 'p'));
}

/* Threads created while attached are traced and set up too */
static void
test_ptrace_watch_new_thread (void)
{
  g_autoptr(TestChild) child = NULL;
  g_autoptr(VmcePtraceWatch) watch = NULL;
  g_autoptr(GError) error = NULL;
  Watched w = { 0 };
  pid_t tid;

  if (skip_without_ptrace ())
    return;
  child = test_child_spawn ();
  watch = attach_watch (child, &w);
  g_assert_cmpuint (vmce_ptrace_watch_get_n_threads (watch), ==, 1);

  g_assert_true (test_child_command (child, 't'));
  g_assert_cmpuint (test_proc_n_threads (child->pid), ==, 2);
  tid = test_proc_other_thread (child->pid);
  g_assert_cmpint (tid, >, 0);
  test_wait (vmce_ptrace_watch_get_n_threads (watch) == 2);
  g_assert_cmpuint (vmce_ptrace_watch_get_n_threads (watch), ==, 2);
  g_assert_cmpint (test_proc_status_int (child->pid, tid, "TracerPid"), ==, getpid ());
  /* it started with every signal blocked; SIGBUS is open while we watch,
   * also after glibc's start_thread() restored its creator's mask: it may
   * be open for a moment before that, so look once the watch has looked
   * at the thread again (VMCE_NEW_THREAD_RECHECK_MS) */
  for (gint64 until = g_get_monotonic_time () + 100000; g_get_monotonic_time () < until;)
    test_iterate ();
  test_wait ((test_proc_status_hex (child->pid, tid, "SigBlk") & SIGBUS_BIT) == 0);
  g_assert_cmphex (test_proc_status_hex (child->pid, tid, "SigBlk") & SIGBUS_BIT, ==, 0);

  vmce_ptrace_watch_detach (watch);
  g_assert_true (test_run_until (&w.detached));
  g_assert_cmpint (test_proc_status_int (child->pid, tid, "TracerPid"), ==, 0);
  g_assert_cmphex (test_proc_status_hex (child->pid, tid, "SigBlk") & SIGBUS_BIT, ==, SIGBUS_BIT);
}

typedef struct {
  pid_t tid;
  guint code;
  guint64 count;
  guint64 stopped_us;
} StopCount;

static void
count_stops_cb (pid_t tid, guint code, const VmcePtraceStopTally *tally, gpointer user_data)
{
  StopCount *c = user_data;

  if (tid == c->tid && code == c->code) {
    c->count += tally->count;
    c->stopped_us += tally->stopped_us;
  }
}

static StopCount
stops_of (VmcePtraceWatch *watch, pid_t tid, guint code)
{
  StopCount c = { tid, code, 0, 0 };

  vmce_ptrace_watch_foreach_stop (watch, count_stops_cb, &c);
  return c;
}

static guint64
signal_stops (VmcePtraceWatch *watch, pid_t tid, int signo)
{
  return stops_of (watch, tid, (guint) signo).count;
}

/* Signals the watch does not take go on unchanged, each counted as a stop
 * (what being the tracer costs the process) */
static void
test_ptrace_watch_passes_other_signals (void)
{
  g_autoptr(TestChild) child = NULL;
  g_autoptr(VmcePtraceWatch) watch = NULL;
  g_autoptr(GError) error = NULL;
  Watched w = { 0 };

  if (skip_without_ptrace ())
    return;
  child = test_child_spawn ();
  watch = attach_watch (child, &w);
  /* ignored by default: the child lives on, one stop each (one at a time,
   * or the kernel merges them) */
  for (guint i = 1; i <= 3; i++) {
    g_assert_no_errno (kill (child->pid, SIGWINCH));
    test_wait (signal_stops (watch, child->pid, SIGWINCH) == i);
  }
  g_assert_cmpuint (signal_stops (watch, child->pid, SIGWINCH), ==, 3);
  /* each waited for the main loop to see it: the cost is counted */
  g_assert_cmpuint (stops_of (watch, child->pid, SIGWINCH).stopped_us, >, 0);
  g_assert_true (test_child_command (child, 'p'));
  g_assert_cmpuint (signal_stops (watch, child->pid, SIGTERM), ==, 0);
  /* SIGTERM is passed on: the child dies of it */
  g_assert_no_errno (kill (child->pid, SIGTERM));
  g_assert_true (test_run_until (&w.exited));
  g_assert_cmpint (w.last.si_signo, ==, SIGTERM);
  g_assert_true (WIFSIGNALED (w.exit_status));
  g_assert_cmpint (WTERMSIG (w.exit_status), ==, SIGTERM);
  g_assert_cmpuint (signal_stops (watch, child->pid, SIGTERM), ==, 1);
  child->pid = 0; /* reaped */
}

/* A thread the process makes while traced is a stop too (PTRACE_EVENT_CLONE
 * in its maker, then the new thread's first stop): counted by what
 * stopped it, not as a signal */
static void
test_ptrace_watch_counts_clone_stops (void)
{
  g_autoptr(TestChild) child = NULL;
  g_autoptr(VmcePtraceWatch) watch = NULL;
  Watched w = { 0 };
  guint clone = VMCE_PTRACE_STOP_EVENT | PTRACE_EVENT_CLONE;

  if (skip_without_ptrace ())
    return;
  child = test_child_spawn ();
  watch = attach_watch (child, &w);
  g_assert_cmpuint (stops_of (watch, child->pid, clone).count, ==, 0);
  g_assert_true (test_child_command (child, 't'));
  test_wait (stops_of (watch, child->pid, clone).count == 1);
  g_assert_cmpstr (vmce_ptrace_stop_event_name (clone), ==, "clone");
  g_assert_cmpstr (vmce_ptrace_stop_event_name (VMCE_PTRACE_STOP_EVENT | (PTRACE_EVENT_STOP & 0x7f)), ==,
                   "interrupt");
  g_assert_null (vmce_ptrace_stop_event_name (VMCE_PTRACE_STOP_EVENT | PTRACE_EVENT_EXEC));
  /* a clone is not a signal: no signal stop was counted for it */
  g_assert_cmpuint (signal_stops (watch, child->pid, SIGTRAP), ==, 0);
  /* the new thread's first stop may come after its maker's clone event:
   * let go only once the watch knows it, or it stays traced by us */
  test_wait (vmce_ptrace_watch_get_n_threads (watch) == 2);
  vmce_ptrace_watch_detach (watch);
  g_assert_true (test_run_until (&w.detached));
}

static void
test_ptrace_watch_errors (void)
{
  g_autoptr(TestChild) child = NULL;
  g_autoptr(VmcePtraceWatch) watch = NULL;
  g_autoptr(VmcePtraceWatch) second = NULL;
  g_autoptr(VmcePtraceWatch) nobody = NULL;
  g_autoptr(GError) error = NULL;
  Watched w = { 0 }, w2 = { 0 };
  pid_t dead;

  if (skip_without_ptrace ())
    return;
  child = test_child_spawn ();
  watch = attach_watch (child, &w);

  second = vmce_ptrace_watch_new (child->pid, &funcs, &w2);
  g_assert_false (vmce_ptrace_watch_attach (second, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_EXISTS);
  g_clear_error (&error);

  /* a pid that is gone */
  dead = fork ();
  if (dead == 0)
    _exit (0);
  waitpid (dead, NULL, 0);
  nobody = vmce_ptrace_watch_new (dead, &funcs, &w2);
  g_assert_false (vmce_ptrace_watch_attach (nobody, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "no process"));
}

int
main (int argc, char **argv)
{
  test_block_sigchld ();
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ptrace-watch/mask-and-stop", test_ptrace_watch_mask_and_stop);
  g_test_add_func ("/ptrace-watch/new-thread", test_ptrace_watch_new_thread);
  g_test_add_func ("/ptrace-watch/passes-other-signals", test_ptrace_watch_passes_other_signals);
  g_test_add_func ("/ptrace-watch/counts-clone-stops", test_ptrace_watch_counts_clone_stops);
  g_test_add_func ("/ptrace-watch/errors", test_ptrace_watch_errors);
  return g_test_run ();
}
