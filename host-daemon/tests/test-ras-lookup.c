/*
 * rasdaemon's record of a host page: its database as rasdaemon 0.6.8
 * makes it (ras-record.c's memory_failure_event table), read directly and
 * through the lookups that wait for its row.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib/gstdio.h>
#include <string.h>
#include <sqlite3.h>

#include "ras-lookup.h"

static gchar *
make_db (const gchar *dir, gboolean with_table)
{
  gchar *path = g_build_filename (dir, "ras-mc_event.db", NULL);
  sqlite3 *db = NULL;

  g_assert_cmpint (sqlite3_open (path, &db), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (db, "CREATE TABLE IF NOT EXISTS mc_event (id INTEGER PRIMARY KEY, timestamp TEXT)",
                                 NULL, NULL, NULL), ==, SQLITE_OK);
  if (with_table)
    g_assert_cmpint (sqlite3_exec (db,
                                   "CREATE TABLE IF NOT EXISTS memory_failure_event (id INTEGER PRIMARY KEY, "
                                   "timestamp TEXT, pfn TEXT, page_type TEXT, action_result TEXT);"
                                   "INSERT INTO memory_failure_event (timestamp, pfn, page_type, action_result) "
                                   "VALUES ('2026-12-07 07:00:00 +0000', '0x2a5b1', 'dirty LRU page', 'Recovered'),"
                                   "('2026-12-07 07:00:01 +0000', '0x1f000', 'clean LRU page', 'Delayed'),"
                                   "('2026-12-07 07:00:02 +0000', '0x2a5b1', 'already poisoned', 'Failed')",
                                   NULL, NULL, NULL), ==, SQLITE_OK);
  sqlite3_close (db);
  return path;
}

static void
test_ras_lookup_row (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("vmce-ras-XXXXXX", NULL);
  g_autofree gchar *path = make_db (dir, TRUE);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) row = vmce_ras_lookup_row (path, 0x2a5b1, &error);
  g_autoptr(JsonNode) none = NULL;
  JsonObject *obj;

  g_assert_no_error (error);
  obj = json_node_get_object (row);
  /* the latest of the page's rows */
  g_assert_cmpint (json_object_get_int_member (obj, "id"), ==, 3);
  g_assert_cmpstr (json_object_get_string_member (obj, "pfn"), ==, "0x2a5b1");
  g_assert_cmpstr (json_object_get_string_member (obj, "page_type"), ==, "already poisoned");
  g_assert_cmpstr (json_object_get_string_member (obj, "action_result"), ==, "Failed");
  g_assert_cmpstr (json_object_get_string_member (obj, "timestamp"), ==, "2026-12-07 07:00:02 +0000");
  none = vmce_ras_lookup_row (path, 0x2a5b, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_NULL (none));
  g_unlink (path);
  g_rmdir (dir);
}

static void
test_ras_lookup_no_db (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("vmce-ras-XXXXXX", NULL);
  g_autofree gchar *missing = g_build_filename (dir, "none.db", NULL);
  g_autofree gchar *path = make_db (dir, FALSE);
  g_autoptr(GError) error = NULL;

  g_assert_null (vmce_ras_lookup_row (missing, 1, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_clear_error (&error);
  /* rasdaemon built without memory-failure support: no such table */
  g_assert_null (vmce_ras_lookup_row (path, 1, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "memory_failure_event"));
  g_clear_error (&error);
  /* not a database */
  g_assert_true (g_file_set_contents (path, "not sqlite at all, not at all, not at all, really", -1, NULL));
  g_assert_null (vmce_ras_lookup_row (path, 1, &error));
  g_assert_nonnull (error);
  g_unlink (path);
  g_rmdir (dir);
}

typedef struct {
  GMainLoop *loop;
  GPtrArray *records;
  guint want;
} Collect;

static void
collect_cb (JsonNode *record, gpointer user_data)
{
  Collect *c = user_data;

  g_ptr_array_add (c->records, json_node_ref (record));
  if (c->records->len == c->want)
    g_main_loop_quit (c->loop);
}

static JsonObject *
record_about (GPtrArray *records, gint64 seq)
{
  for (guint i = 0; i < records->len; i++) {
    JsonObject *obj = json_node_get_object (g_ptr_array_index (records, i));
    if (json_object_get_int_member (obj, "about_seq") == seq)
      return obj;
  }
  g_assert_not_reached ();
}

/* a row there, a row never written, and no database at all: one record
 * each, tied to its error */
static void
test_ras_lookup_records (void)
{
  static const guint waits[] = { 5, 20, 0 };
  g_autofree gchar *dir = g_dir_make_tmp ("vmce-ras-XXXXXX", NULL);
  g_autofree gchar *path = make_db (dir, TRUE);
  g_autofree gchar *missing = g_build_filename (dir, "none.db", NULL);
  Collect c = { g_main_loop_new (NULL, FALSE), g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref), 3 };
  VmceRasLookup *lookup = vmce_ras_lookup_new (path, waits, collect_cb, &c);
  VmceRasLookup *nodb = vmce_ras_lookup_new (missing, waits, collect_cb, &c);
  JsonObject *obj;

  vmce_ras_lookup_start (lookup, "guest1", 7, 0x1f000);
  vmce_ras_lookup_start (lookup, "guest2", 8, 0x99);
  vmce_ras_lookup_start (nodb, "guest1", 9, 0x1f000);
  g_main_loop_run (c.loop);

  obj = record_about (c.records, 7);
  g_assert_cmpstr (json_object_get_string_member (obj, "type"), ==, "host-page");
  g_assert_cmpstr (json_object_get_string_member (obj, "vm"), ==, "guest1");
  g_assert_cmpint (json_object_get_int_member (obj, "host_pfn"), ==, 0x1f000);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (obj, "rasdaemon"), "page_type"),
                   ==, "clean LRU page");
  g_assert_null (json_object_get_string_member (obj, "detail"));
  obj = record_about (c.records, 8);
  g_assert_true (json_object_get_null_member (obj, "rasdaemon"));
  g_assert_nonnull (strstr (json_object_get_string_member (obj, "detail"), "recorded nothing for pfn 0x99 in 2 tries"));
  g_assert_cmpint (json_object_get_int_member (obj, "waited_ms"), >=, 25);
  obj = record_about (c.records, 9);
  g_assert_true (json_object_get_null_member (obj, "rasdaemon"));
  g_assert_nonnull (strstr (json_object_get_string_member (obj, "detail"), "no rasdaemon database"));

  /* let go with a lookup waiting: nothing comes after */
  vmce_ras_lookup_start (lookup, "guest3", 10, 0x1f000);
  vmce_ras_lookup_free (lookup);
  vmce_ras_lookup_free (nodb);
  g_timeout_add_once (100, (GSourceOnceFunc) g_main_loop_quit, c.loop);
  g_main_loop_run (c.loop);
  g_assert_cmpuint (c.records->len, ==, 3);
  g_ptr_array_unref (c.records);
  g_main_loop_unref (c.loop);
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ras-lookup/row", test_ras_lookup_row);
  g_test_add_func ("/ras-lookup/no-db", test_ras_lookup_no_db);
  g_test_add_func ("/ras-lookup/records", test_ras_lookup_records);
  return g_test_run ();
}
