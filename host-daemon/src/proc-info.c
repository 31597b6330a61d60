/*
 * What /proc says about a process (see proc-info.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-vm"

#include <gio/gio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc-info.h"

static gchar *
vmce_proc_boot_id (void)
{
  g_autofree gchar *text = NULL;

  if (!g_file_get_contents ("/proc/sys/kernel/random/boot_id", &text, NULL, NULL))
    return g_strdup ("unknown-boot");
  return g_strdup (g_strstrip (text));
}

gchar *
vmce_proc_identity (pid_t pid, GError **error)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree gchar *stat = NULL;
  g_autofree gchar *boot = NULL;
  g_auto(GStrv) fields = NULL;
  const gchar *rest;

  if (!g_file_get_contents (path, &stat, NULL, NULL)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "no process with pid %d", pid);
    return NULL;
  }
  /* after "pid (comm) ", whose comm may hold spaces and parentheses;
   * starttime is field 22, the 20th after the comm */
  rest = strrchr (stat, ')');
  if (rest == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s: no command name", path);
    return NULL;
  }
  fields = g_strsplit (rest + 2, " ", -1);
  if (g_strv_length (fields) < 20) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s: too few fields", path);
    return NULL;
  }
  boot = vmce_proc_boot_id ();
  return g_strdup_printf ("%s/%d/%s", boot, pid, fields[19]);
}

pid_t
vmce_proc_identity_pid (const gchar *identity)
{
  const gchar *p = identity != NULL ? strchr (identity, '/') : NULL;

  return p != NULL ? (pid_t) atoi (p + 1) : 0;
}

gint64
vmce_proc_identity_start_time (const gchar *identity)
{
  g_autofree gchar *stat = NULL;
  const gchar *p = identity != NULL ? strrchr (identity, '/') : NULL;
  const gchar *btime;
  long hz = sysconf (_SC_CLK_TCK);
  guint64 ticks;

  if (p == NULL || hz <= 0 || !g_file_get_contents ("/proc/stat", &stat, NULL, NULL) ||
      (btime = strstr (stat, "\nbtime ")) == NULL)
    return 0;
  ticks = g_ascii_strtoull (p + 1, NULL, 10);
  return g_ascii_strtoll (btime + 7, NULL, 10) * G_USEC_PER_SEC +
         (gint64) (ticks * G_USEC_PER_SEC / (guint64) hz);
}

gboolean
vmce_proc_status_number (pid_t pid, const gchar *field, gint64 *value, GError **error)
{
  g_autofree gchar *path = pid == 0 ? g_strdup ("/proc/self/status")
                                    : g_strdup_printf ("/proc/%d/status", pid);
  g_autofree gchar *status = NULL;
  g_autofree gchar *key = g_strdup_printf ("\n%s:", field);
  const gchar *line;
  gchar *end = NULL;

  if (pid < 0 || !g_file_get_contents (path, &status, NULL, NULL)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "no process with pid %d", pid);
    return FALSE;
  }
  /* "Name:" comes first and holds the command name, which may look like
   * anything: the field is only ever matched at the start of a line */
  line = strstr (status, key);
  if (line != NULL)
    *value = g_ascii_strtoll (line + strlen (key), &end, 10);
  if (line == NULL || end == line + strlen (key)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s has no number %s", path, field);
    return FALSE;
  }
  return TRUE;
}

gboolean
vmce_proc_is_alive (pid_t pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree gchar *stat = NULL;
  const gchar *after_comm;

  if (pid <= 0 || !g_file_get_contents (path, &stat, NULL, NULL))
    return FALSE;
  /* the command name, in parentheses, may hold anything: the state comes
   * after its last ") " */
  after_comm = g_strrstr (stat, ") ");
  return after_comm != NULL && after_comm[2] != 'Z' && after_comm[2] != 'X';
}

gboolean
vmce_proc_signal_pending (pid_t pid, pid_t tid, int signo)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/task/%d/status", pid, tid);
  g_autofree gchar *status = NULL;
  guint64 bit = G_GUINT64_CONSTANT (1) << (signo - 1);
  const gchar *keys[] = { "\nSigPnd:", "\nShdPnd:" };

  if (!g_file_get_contents (path, &status, NULL, NULL))
    return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (keys); i++) {
    const gchar *line = strstr (status, keys[i]);

    if (line != NULL && (g_ascii_strtoull (line + strlen (keys[i]), NULL, 16) & bit) != 0)
      return TRUE;
  }
  return FALSE;
}
