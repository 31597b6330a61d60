/*
 * The io_uring journal: lines in order, all of them on disk.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>

#include "journal.h"
#include "json-util.h"

static JsonNode *
record (guint n)
{
  g_autoptr(JsonObject) obj = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (obj, "type", "test");
  json_object_set_int_member (obj, "n", n);
  /* a newline inside a value must not split the record */
  json_object_set_string_member (obj, "text", "two\nlines");
  json_node_set_object (node, obj);
  return node;
}

static gchar **
read_lines (const gchar *path)
{
  g_autofree gchar *text = NULL;
  gchar **lines;
  guint n;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_true (g_str_has_suffix (text, "\n"));
  lines = g_strsplit (text, "\n", -1);
  n = g_strv_length (lines);
  /* drop the empty string after the last newline */
  g_free (lines[n - 1]);
  lines[n - 1] = NULL;
  return lines;
}

static void
test_journal_order_and_sync (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("vmce-journal-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "sub", "journal.jsonl", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceJournal) journal = vmce_journal_open (path, &error);
  g_auto(GStrv) lines = NULL;
  guint64 last = 0;

  g_assert_no_error (error);
  /* a burst while the first write is in flight */
  for (guint i = 0; i < 500; i++) {
    g_autoptr(JsonNode) node = record (i);
    last = vmce_journal_append (journal, node);
  }
  g_assert_cmpuint (last, ==, 500);
  for (gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
       vmce_journal_get_n_synced (journal) < last && g_get_monotonic_time () < deadline;)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (vmce_journal_get_n_synced (journal), ==, 500);
  g_assert_null (vmce_journal_get_last_error (journal));

  lines = read_lines (path);
  g_assert_cmpuint (g_strv_length (lines), ==, 500);
  for (guint i = 0; i < 500; i++) {
    g_autoptr(JsonNode) node = vmce_json_parse_object (lines[i], -1, "journal", &error);
    g_assert_no_error (error);
    g_assert_cmpint (json_object_get_int_member (json_node_get_object (node), "n"), ==, i);
  }
  g_assert_no_errno (g_remove (path));
}

static void
test_journal_appends_and_flushes (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("vmce-journal-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "journal.jsonl", NULL);
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) lines = NULL;

  g_assert_true (g_file_set_contents (path, "{\"type\":\"old\"}\n", -1, NULL));
  {
    g_autoptr(VmceJournal) journal = vmce_journal_open (path, &error);
    g_autoptr(JsonNode) node = record (1);
    g_assert_no_error (error);
    vmce_journal_append (journal, node);
    /* at shutdown nothing waits for the main loop */
    g_assert_true (vmce_journal_flush_sync (journal, &error));
    g_assert_no_error (error);
  }
  lines = read_lines (path);
  g_assert_cmpuint (g_strv_length (lines), ==, 2);
  g_assert_cmpstr (lines[0], ==, "{\"type\":\"old\"}");
  g_assert_nonnull (strstr (lines[1], "\"n\":1"));
  g_remove (path);
}

static void
test_journal_open_error (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceJournal) journal = vmce_journal_open ("/proc/version/journal.jsonl", &error);

  g_assert_null (journal);
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "/proc/version"));
}

static void
wait_synced (VmceJournal *journal, guint64 n, gint64 seconds)
{
  for (gint64 deadline = g_get_monotonic_time () + seconds * G_USEC_PER_SEC;
       vmce_journal_get_n_synced (journal) < n && g_get_monotonic_time () < deadline;)
    g_main_context_iteration (NULL, TRUE);
}

/* A disk that takes no more (here: a file size limit, EFBIG): the journal
 * says it is degraded, holds every record, and writes each exactly once, in
 * order, when the disk takes them again */
static void
test_journal_degraded (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("vmce-journal-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "journal.jsonl", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceJournal) journal = vmce_journal_open (path, &error);
  g_auto(GStrv) lines = NULL;
  struct rlimit was, small;

  g_assert_no_error (error);
  g_assert_no_errno (getrlimit (RLIMIT_FSIZE, &was));
  signal (SIGXFSZ, SIG_IGN);
  small = was;
  small.rlim_cur = 200; /* two records and a half */
  g_assert_no_errno (setrlimit (RLIMIT_FSIZE, &small));
  g_test_expect_message ("vmce-journal", G_LOG_LEVEL_WARNING,
                         "journal degraded: cannot write *: File too large; * record(s) held*");
  for (guint i = 0; i < 10; i++) {
    g_autoptr(JsonNode) node = record (i);
    vmce_journal_append (journal, node);
  }
  for (gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
       vmce_journal_get_last_error (journal) == NULL && g_get_monotonic_time () < deadline;)
    g_main_context_iteration (NULL, TRUE);
  g_assert_nonnull (vmce_journal_get_last_error (journal));
  g_test_assert_expected_messages ();
  g_assert_nonnull (strstr (vmce_journal_get_last_error (journal), "File too large"));
  /* the first batch may have gone in before the limit */
  g_assert_cmpuint (vmce_journal_get_n_synced (journal), <, 10);
  g_assert_cmpuint (vmce_journal_get_n_held (journal), ==, 10 - vmce_journal_get_n_synced (journal));
  /* what comes meanwhile is held too */
  {
    g_autoptr(JsonNode) node = record (10);
    vmce_journal_append (journal, node);
  }

  g_assert_no_errno (setrlimit (RLIMIT_FSIZE, &was));
  wait_synced (journal, 11, 5);
  g_assert_cmpuint (vmce_journal_get_n_synced (journal), ==, 11);
  g_assert_cmpuint (vmce_journal_get_n_held (journal), ==, 0);
  g_assert_null (vmce_journal_get_last_error (journal));
  lines = read_lines (path);
  g_assert_cmpuint (g_strv_length (lines), ==, 11);
  for (guint i = 0; i < 11; i++) {
    g_autoptr(JsonNode) node = vmce_json_parse_object (lines[i], -1, "journal", &error);
    g_assert_no_error (error);
    g_assert_cmpint (json_object_get_int_member (json_node_get_object (node), "n"), ==, i);
  }
  g_remove (path);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/journal/order-and-sync", test_journal_order_and_sync);
  g_test_add_func ("/journal/appends-and-flushes", test_journal_appends_and_flushes);
  g_test_add_func ("/journal/open-error", test_journal_open_error);
  g_test_add_func ("/journal/degraded", test_journal_degraded);
  return g_test_run ();
}
