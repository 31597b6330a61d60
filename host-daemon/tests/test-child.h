/*
 * A child process for the ptrace tests: it blocks SIGBUS in its main
 * thread, as QEMU does, and obeys one-letter commands on a pipe.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "ptrace-watch.h"

typedef struct {
  pid_t pid;
  int cmd_fd;   /* write commands */
  int reply_fd; /* read answers */
  guint64 page; /* a private page of the child */
} TestChild;

/* commands: 't' start a thread (created with every signal blocked, as
 * qemu_thread_create() does), 'r' read the page, 'p' ping; answers are
 * one byte, 'k' for ok */
TestChild *test_child_spawn (void);
/* The same, with its page a read-only shared mapping of @path (which
 * starts with 'x'): a page nobody can give it back once taken away */
TestChild *test_child_spawn_file (const gchar *path);
gboolean test_child_command (TestChild *child, char cmd);
void test_child_free (TestChild *child);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TestChild, test_child_free)

/* A child that only pauses: it has the test's mappings (its own copies
 * of private ones), and dies with the test */
pid_t test_child_fork_idle (void);
/* Seizes @pid, runs @func at its first stop (where vmced's remote system
 * calls can be made), lets it go, kills and reaps it */
void test_child_run_stopped (pid_t pid, VmceStoppedFunc func, gpointer data);

/* /proc/PID/task/TID/status field as a number (SigBlk in hex) */
guint64 test_proc_status_hex (pid_t pid, pid_t tid, const gchar *field);
gint64 test_proc_status_int (pid_t pid, pid_t tid, const gchar *field);
guint test_proc_n_threads (pid_t pid);
/* the thread of @pid that is not its main thread, or 0 */
pid_t test_proc_other_thread (pid_t pid);
/* One round of the main loop, dispatching ptrace events */
void test_iterate (void);
/* Iterates until @cond holds or 5 s have passed */
#define test_wait(cond)                                                         \
  G_STMT_START                                                                  \
  {                                                                             \
    gint64 _deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;            \
    while (!(cond) && g_get_monotonic_time () < _deadline)                      \
      test_iterate ();                                                          \
  }                                                                             \
  G_STMT_END
gboolean test_run_until (gboolean *done);
gboolean test_ptrace_allowed (void);
/* As in vmced: SIGCHLD only through waitid(); call before any thread starts */
void test_block_sigchld (void);
