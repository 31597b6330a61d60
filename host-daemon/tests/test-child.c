/*
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace-watch.h"
#include "test-child.h"

static void *
test_child_thread (void *arg)
{
  for (;;)
    pause ();
  return NULL;
}

static void
test_child_main (int cmd_fd, int reply_fd, volatile char *page)
{
  sigset_t set;
  char cmd;

  sigemptyset (&set);
  sigaddset (&set, SIGBUS);
  sigprocmask (SIG_BLOCK, &set, NULL);
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  while (read (cmd_fd, &cmd, 1) == 1) {
    char answer = 'k';
    if (cmd == 't') {
      sigset_t all, old;
      pthread_t thread;
      sigfillset (&all);
      pthread_sigmask (SIG_SETMASK, &all, &old);
      if (pthread_create (&thread, NULL, test_child_thread, NULL) != 0)
        answer = 'e';
      pthread_sigmask (SIG_SETMASK, &old, NULL);
    } else if (cmd == 'r') {
      answer = page[0] == 'x' ? 'k' : 'e';
    }
    if (write (reply_fd, &answer, 1) != 1)
      _exit (1);
  }
  _exit (0);
}

static TestChild *
test_child_spawn_page (char *page)
{
  TestChild *child = g_new0 (TestChild, 1);
  int to_child[2], from_child[2];

  g_assert_no_errno (pipe (to_child));
  g_assert_no_errno (pipe (from_child));
  child->page = (guint64) (guintptr) page;
  child->pid = fork ();
  g_assert_cmpint (child->pid, >=, 0);
  if (child->pid == 0) {
    close (to_child[1]);
    close (from_child[0]);
    test_child_main (to_child[0], from_child[1], page);
  }
  close (to_child[0]);
  close (from_child[1]);
  munmap (page, 4096);
  child->cmd_fd = to_child[1];
  child->reply_fd = from_child[0];
  /* wait until it runs its loop, with SIGBUS blocked */
  g_assert_true (test_child_command (child, 'p'));
  return child;
}

TestChild *
test_child_spawn (void)
{
  char *page = mmap (NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  g_assert_true (page != MAP_FAILED);
  page[0] = 'x';
  return test_child_spawn_page (page);
}

TestChild *
test_child_spawn_file (const gchar *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  char *page;

  g_assert_cmpint (fd, >=, 0);
  page = mmap (NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
  g_assert_true (page != MAP_FAILED);
  close (fd);
  return test_child_spawn_page (page);
}

gboolean
test_child_command (TestChild *child, char cmd)
{
  char answer = 0;

  if (write (child->cmd_fd, &cmd, 1) != 1)
    return FALSE;
  /* the child may be stopped by ptrace: let the main loop run meanwhile */
  for (gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
       g_get_monotonic_time () < deadline;) {
    fd_set fds;
    struct timeval tv = { 0, 1000 };
    FD_ZERO (&fds);
    FD_SET (child->reply_fd, &fds);
    if (select (child->reply_fd + 1, &fds, NULL, NULL, &tv) > 0)
      return read (child->reply_fd, &answer, 1) == 1 && answer == 'k';
    vmce_ptrace_dispatch ();
    g_main_context_iteration (NULL, FALSE);
  }
  return FALSE;
}

void
test_child_free (TestChild *child)
{
  if (child == NULL)
    return;
  close (child->cmd_fd);
  close (child->reply_fd);
  if (child->pid > 0) {
    kill (child->pid, SIGKILL);
    while (waitpid (child->pid, NULL, __WALL) < 0 && errno == EINTR)
      ;
  }
  g_free (child);
}

pid_t
test_child_fork_idle (void)
{
  pid_t pid = fork ();

  g_assert_cmpint (pid, >=, 0);
  if (pid == 0) {
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    for (;;)
      pause ();
  }
  return pid;
}

typedef struct {
  VmceStoppedFunc func;
  gpointer data;
  gboolean attached;
  gboolean done;
} TestRunStopped;

static gboolean
test_run_stopped_signal (VmcePtraceWatch *watch, pid_t tid, siginfo_t *info, gint64 t,
                         gpointer data)
{
  return FALSE;
}

static void
test_run_stopped_attached (VmcePtraceWatch *watch, gpointer data)
{
  ((TestRunStopped *) data)->attached = TRUE;
}

static void
test_run_stopped_cb (VmcePtraceWatch *watch, pid_t tid, gpointer data)
{
  TestRunStopped *run = data;

  run->func (watch, tid, run->data);
  run->done = TRUE;
}

void
test_child_run_stopped (pid_t pid, VmceStoppedFunc func, gpointer data)
{
  static const VmcePtraceWatchFuncs funcs = {
    .signal_stop = test_run_stopped_signal,
    .attached = test_run_stopped_attached,
  };
  TestRunStopped run = { .func = func, .data = data };
  g_autoptr(GError) error = NULL;
  VmcePtraceWatch *watch = vmce_ptrace_watch_new (pid, &funcs, &run);

  g_assert_true (vmce_ptrace_watch_attach (watch, &error));
  g_assert_no_error (error);
  g_assert_true (test_run_until (&run.attached));
  vmce_ptrace_watch_call_stopped (watch, pid, test_run_stopped_cb, &run, NULL);
  g_assert_true (test_run_until (&run.done));
  vmce_ptrace_watch_free (watch);
  kill (pid, SIGKILL);
  while (waitpid (pid, NULL, __WALL) < 0 && errno == EINTR)
    ;
}

static gchar *
test_proc_status_field (pid_t pid, pid_t tid, const gchar *field)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/task/%d/status", pid, tid);
  g_autofree gchar *text = NULL;
  g_autofree gchar *key = g_strdup_printf ("\n%s:", field);
  const gchar *line;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  line = strstr (text, key);
  if (line == NULL)
    return NULL;
  return g_strndup (line + strlen (key), strcspn (line + strlen (key), "\n"));
}

guint64
test_proc_status_hex (pid_t pid, pid_t tid, const gchar *field)
{
  g_autofree gchar *value = test_proc_status_field (pid, tid, field);

  g_assert_nonnull (value);
  return g_ascii_strtoull (g_strstrip (value), NULL, 16);
}

gint64
test_proc_status_int (pid_t pid, pid_t tid, const gchar *field)
{
  g_autofree gchar *value = test_proc_status_field (pid, tid, field);

  g_assert_nonnull (value);
  return g_ascii_strtoll (g_strstrip (value), NULL, 10);
}

guint
test_proc_n_threads (pid_t pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/task", pid);
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  guint n = 0;

  while (dir != NULL && g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

pid_t
test_proc_other_thread (pid_t pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/task", pid);
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const gchar *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    if (atoi (name) != pid)
      return atoi (name);
  }
  return 0;
}

void
test_iterate (void)
{
  vmce_ptrace_dispatch ();
  g_main_context_iteration (NULL, FALSE);
  g_usleep (200);
}

gboolean
test_run_until (gboolean *done)
{
  test_wait (*done);
  return *done;
}

gboolean
test_ptrace_allowed (void)
{
  pid_t pid = fork ();
  int status = 0;
  gboolean ok;

  if (pid == 0) {
    pause ();
    _exit (0);
  }
  ok = ptrace (PTRACE_SEIZE, pid, NULL, NULL) == 0;
  kill (pid, SIGKILL);
  waitpid (pid, &status, __WALL);
  return ok;
}

void
test_block_sigchld (void)
{
  sigset_t set;

  sigemptyset (&set);
  sigaddset (&set, SIGCHLD);
  sigprocmask (SIG_BLOCK, &set, NULL);
}
