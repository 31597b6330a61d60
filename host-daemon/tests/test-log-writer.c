/*
 * vmced's log lines: the MESSAGE_IDs an operator's alert names, the
 * fields a record line carries, the priority journald and the text line
 * take.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log-writer.h"

/* the fields of the last line logged, as the writer got them */
static GHashTable *last_fields;
static GLogLevelFlags last_level;

static GLogWriterOutput
capture_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  g_hash_table_remove_all (last_fields);
  for (gsize i = 0; i < n_fields; i++)
    g_hash_table_insert (last_fields, g_strdup (fields[i].key), g_strdup (fields[i].value));
  last_level = level;
  return G_LOG_WRITER_HANDLED;
}

/* Shipped IDs never change: an alert rule names them; each kind has its
 * own, in systemd's form (128 bits, 32 lower-case hex digits) */
static void
test_log_message_ids (void)
{
  g_autoptr(GHashTable) ids = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GHashTable) names = g_hash_table_new (g_str_hash, g_str_equal);

  for (VmceLogKind k = 0; k < VMCE_LOG_KIND_COUNT; k++) {
    const gchar *id = vmce_log_kind_message_id (k);

    g_assert_nonnull (id);
    g_assert_cmpuint (strlen (id), ==, 32);
    for (const gchar *c = id; *c; c++)
      g_assert_true (g_ascii_isxdigit (*c) && !g_ascii_isupper (*c));
    g_assert_true (g_hash_table_add (ids, (gpointer) id));
    g_assert_true (g_hash_table_add (names, (gpointer) vmce_log_kind_to_string (k)));
  }
  g_assert_cmpstr (vmce_log_kind_message_id (VMCE_LOG_FORWARDED), ==, "392752ff4482457c816c965484d97868");
  g_assert_null (vmce_log_kind_message_id (VMCE_LOG_KIND_COUNT));
}

/* vmced(8) lists every kind with its priority and MESSAGE_ID, as the code
 * has them: an alert rule is written from the man page */
static void
test_log_man_page (void)
{
  g_autofree gchar *path = g_test_build_filename (G_TEST_DIST, "..", "man", "vmced.8", NULL);
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (VmceLogKind k = 0; k < VMCE_LOG_KIND_COUNT; k++) {
    /* nroff writes a hyphen in a name as \- */
    g_auto(GStrv) parts = g_strsplit (vmce_log_kind_to_string (k), "-", -1);
    g_autofree gchar *name = g_strjoinv ("\\-", parts);
    g_autofree gchar *want = NULL;
    gboolean found = FALSE;

    want = g_strdup_printf ("%s\t%d\t%s", name, vmce_log_kind_priority (k), vmce_log_kind_message_id (k));
    for (guint i = 0; lines[i] != NULL && !found; i++)
      found = g_strcmp0 (lines[i], want) == 0;
    if (!found)
      g_error ("%s: no line \"%s\" in its LOGGING table", path, want);
  }
}

/* A memory error's line: its kind, the VM, the GPA, the journal's seq, and
 * the priority journald files it under (a guest not told is an error) */
static void
test_log_record_fields (void)
{
  guint64 gpa = 0x6603000;

  vmce_log_record (VMCE_LOG_NOT_INJECTED, "web1", &gpa, 42, "vm %s: GPA 0x%x: failed", "web1", 0x6603000);
  g_assert_cmpint (last_level, ==, G_LOG_LEVEL_MESSAGE);
  g_assert_cmpstr (g_hash_table_lookup (last_fields, "MESSAGE"), ==, "vm web1: GPA 0x6603000: failed");
  g_assert_cmpstr (g_hash_table_lookup (last_fields, "MESSAGE_ID"), ==,
                   vmce_log_kind_message_id (VMCE_LOG_NOT_INJECTED));
  g_assert_cmpstr (g_hash_table_lookup (last_fields, "VMCE_VM"), ==, "web1");
  g_assert_cmpstr (g_hash_table_lookup (last_fields, "VMCE_GPA"), ==, "0x6603000");
  g_assert_cmpstr (g_hash_table_lookup (last_fields, "VMCE_SEQ"), ==, "42");
  g_assert_cmpstr (g_hash_table_lookup (last_fields, "VMCE_EVENT"), ==, "not-injected");
  g_assert_cmpstr (g_hash_table_lookup (last_fields, "VMCE_PRIORITY"), ==, "3");

  /* no VM, no page: no such fields, not empty ones */
  vmce_log_record (VMCE_LOG_FORWARDED, NULL, NULL, 0, "something");
  g_assert_false (g_hash_table_contains (last_fields, "VMCE_VM"));
  g_assert_false (g_hash_table_contains (last_fields, "VMCE_GPA"));
  g_assert_false (g_hash_table_contains (last_fields, "VMCE_SEQ"));
  g_assert_cmpstr (g_hash_table_lookup (last_fields, "VMCE_PRIORITY"), ==, "4");

  vmce_log_error ("cannot listen on %s", "/run/vmce/vmced.sock");
  g_assert_cmpstr (g_hash_table_lookup (last_fields, "VMCE_PRIORITY"), ==, "3");
  g_assert_false (g_hash_table_contains (last_fields, "MESSAGE_ID"));
}

/* What a terminal shows, and what journald's stream reads as priority */
static void
test_log_format_line (void)
{
  const struct {
    gint priority;
    const gchar *domain;
    gboolean prefix;
    const gchar *line;
  } rows[] = {
    { 3, NULL, FALSE, "vmced: error: m\n" },
    { 4, "vmce-vm", FALSE, "vmced: warning: m\n" },
    { 5, NULL, FALSE, "vmced: m\n" },
    { 6, NULL, FALSE, "vmced: m\n" },
    { 7, "vmce-vm", FALSE, "vmced: debug: [vmce-vm] m\n" },
    { 3, NULL, TRUE, "<3>vmced: error: m\n" },
    { 4, NULL, TRUE, "<4>vmced: warning: m\n" },
    { 5, NULL, TRUE, "<5>vmced: m\n" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++) {
    g_autofree gchar *line = vmce_log_format_line (rows[i].priority, rows[i].domain, "m", rows[i].prefix);
    g_assert_cmpstr (line, ==, rows[i].line);
  }
  g_assert_cmpint (vmce_log_level_priority (G_LOG_LEVEL_WARNING), ==, 4);
  g_assert_cmpint (vmce_log_level_priority (G_LOG_LEVEL_MESSAGE), ==, 5);
  g_assert_cmpint (vmce_log_level_priority (G_LOG_LEVEL_INFO), ==, 6);
  g_assert_cmpint (vmce_log_level_priority (G_LOG_LEVEL_DEBUG), ==, 7);
}

/* Off the journal: one line on stderr, the record's own priority deciding
 * its prefix, not GLib's level */
static void
test_log_writer_stderr (void)
{
  g_autofree gchar *path = NULL;
  g_autofree gchar *text = NULL;
  int fd = g_file_open_tmp ("vmce-log-XXXXXX", &path, NULL);
  int saved = dup (STDERR_FILENO);
  const GLogField fields[] = {
    { "MESSAGE", "vm web1: not injected", -1 },
    { "GLIB_DOMAIN", "vmced", -1 },
    { "VMCE_PRIORITY", "3", -1 },
  };
  const GLogField debug[] = {
    { "MESSAGE", "quiet", -1 },
    { "GLIB_DOMAIN", "vmce-vm", -1 },
  };

  g_assert_cmpint (fd, >=, 0);
  g_unsetenv ("JOURNAL_STREAM");
  fflush (stderr);
  dup2 (fd, STDERR_FILENO);
  vmce_log_writer (G_LOG_LEVEL_MESSAGE, fields, G_N_ELEMENTS (fields), NULL);
  vmce_log_set_verbose (FALSE);
  vmce_log_writer (G_LOG_LEVEL_DEBUG, debug, G_N_ELEMENTS (debug), NULL);
  fflush (stderr);
  dup2 (saved, STDERR_FILENO);
  close (saved);
  close (fd);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "vmced: error: vm web1: not injected\n");
  g_unlink (path);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  last_fields = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_log_set_writer_func (capture_writer, NULL, NULL);
  g_test_add_func ("/log/message-ids", test_log_message_ids);
  g_test_add_func ("/log/record-fields", test_log_record_fields);
  g_test_add_func ("/log/man-page", test_log_man_page);
  g_test_add_func ("/log/format-line", test_log_format_line);
  g_test_add_func ("/log/writer-stderr", test_log_writer_stderr);
  return g_test_run ();
}
