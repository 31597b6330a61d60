/*
 * What /proc says about a process: identities and status numbers, read off
 * this test's own process and a child.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc-info.h"

static void
test_status_number_self (void)
{
  g_autoptr(GError) error = NULL;
  gint64 tgid = 0, rss = 0;

  g_assert_true (vmce_proc_status_number (getpid (), "Tgid", &tgid, &error));
  g_assert_no_error (error);
  g_assert_cmpint (tgid, ==, getpid ());
  /* 0 is vmced itself */
  g_assert_true (vmce_proc_status_number (0, "VmRSS", &rss, &error));
  g_assert_cmpint (rss, >, 0);
}

/* a child's thread group is its own, and nobody traces it */
static void
test_status_number_child (void)
{
  pid_t child = fork ();
  gint64 tgid = 0, tracer = -1;

  g_assert_cmpint (child, >=, 0);
  if (child == 0) {
    pause ();
    _exit (0);
  }
  g_assert_true (vmce_proc_status_number (child, "Tgid", &tgid, NULL));
  g_assert_true (vmce_proc_status_number (child, "TracerPid", &tracer, NULL));
  g_assert_cmpint (tgid, ==, child);
  g_assert_cmpint (tracer, ==, 0);
  kill (child, SIGKILL);
  waitpid (child, NULL, 0);
}

static void
test_status_number_bad (void)
{
  g_autoptr(GError) missing = NULL;
  g_autoptr(GError) gone = NULL;
  g_autoptr(GError) negative = NULL;
  gint64 value = 42;

  /* "Name" is text, not a number; "Tgi" only a prefix of a field */
  g_assert_false (vmce_proc_status_number (getpid (), "Name", &value, &missing));
  g_assert_error (missing, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&missing);
  g_assert_false (vmce_proc_status_number (getpid (), "Tgi", &value, &missing));
  g_assert_error (missing, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_assert_false (vmce_proc_status_number (999999999, "Tgid", &value, &gone));
  g_assert_error (gone, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_assert_cmpstr (gone->message, ==, "no process with pid 999999999");
  g_assert_false (vmce_proc_status_number (-1, "Tgid", &value, &negative));
  g_assert_error (negative, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
}

static void
test_identity (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = vmce_proc_identity (getpid (), &error);
  g_autofree gchar *again = vmce_proc_identity (getpid (), NULL);

  g_assert_no_error (error);
  g_assert_cmpstr (id, ==, again);
  g_assert_cmpint (vmce_proc_identity_pid (id), ==, getpid ());
  /* started before now, and not before the epoch */
  g_assert_cmpint (vmce_proc_identity_start_time (id), >, 0);
  g_assert_cmpint (vmce_proc_identity_start_time (id), <=, g_get_real_time () + G_USEC_PER_SEC);
  g_assert_cmpint (vmce_proc_identity_pid ("not an identity"), ==, 0);
  g_assert_null (vmce_proc_identity (999999999, NULL));
}

/* a child that has exited and is not yet reaped is no longer alive, as
 * a killed QEMU until its parent gets to it */
static void
test_is_alive (void)
{
  pid_t child = fork ();
  int status;

  g_assert_cmpint (child, >=, 0);
  if (child == 0)
    _exit (0);
  g_assert_true (vmce_proc_is_alive (getpid ()));
  /* exited: a zombie until waitpid() */
  for (gint64 until = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
       vmce_proc_is_alive (child) && g_get_monotonic_time () < until;)
    g_usleep (1000);
  g_assert_false (vmce_proc_is_alive (child));
  g_assert_cmpint (waitpid (child, &status, 0), ==, child);
  g_assert_false (vmce_proc_is_alive (child));
  g_assert_false (vmce_proc_is_alive (0));
  g_assert_false (vmce_proc_is_alive (-1));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/proc-info/status-number/self", test_status_number_self);
  g_test_add_func ("/proc-info/status-number/child", test_status_number_child);
  g_test_add_func ("/proc-info/status-number/bad", test_status_number_bad);
  g_test_add_func ("/proc-info/identity", test_identity);
  g_test_add_func ("/proc-info/is-alive", test_is_alive);
  return g_test_run ();
}
