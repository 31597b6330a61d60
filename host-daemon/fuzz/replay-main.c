/*
 * Run a libFuzzer target without libFuzzer: call LLVMFuzzerTestOneInput()
 * once for every file named on the command line and every file under the
 * directories named there, so the seed corpora are regression tests in
 * every build, with any compiler.
 *
 * Each input is passed in a buffer of exactly its size (no terminating
 * NUL), as libFuzzer does, so a sanitizer build sees reads past the end.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
/* optional in a target, as in libFuzzer */
int LLVMFuzzerInitialize (int *argc, char ***argv) __attribute__ ((weak));

static gboolean
replay_file (const gchar *path, guint *count, GError **error)
{
  g_autofree gchar *contents = NULL;
  uint8_t *copy;
  gsize len = 0;

  if (!g_file_get_contents (path, &contents, &len, error))
    return FALSE;
  /* malloc (0) is a valid, empty buffer, unlike g_malloc (0) */
  copy = malloc (len);
  if (copy == NULL && len > 0) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOMEM, "%s: out of memory", path);
    return FALSE;
  }
  if (len > 0)
    memcpy (copy, contents, len);
  g_debug ("replaying %s (%" G_GSIZE_FORMAT " bytes)", path, len);
  LLVMFuzzerTestOneInput (copy, len);
  free (copy);
  (*count)++;
  return TRUE;
}

static gint
replay_cmp_names (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const gchar *const *) a, *(const gchar *const *) b);
}

static gboolean
replay_path (const gchar *path, guint *count, GError **error)
{
  g_autoptr(GDir) dir = NULL;
  g_autoptr(GPtrArray) names = NULL;
  const gchar *name;

  if (!g_file_test (path, G_FILE_TEST_IS_DIR))
    return replay_file (path, count, error);

  dir = g_dir_open (path, 0, error);
  if (dir == NULL)
    return FALSE;
  /* sorted, so a failure is reproducible by position */
  names = g_ptr_array_new_with_free_func (g_free);
  while ((name = g_dir_read_name (dir)) != NULL) {
    if (name[0] == '.')
      continue;
    g_ptr_array_add (names, g_build_filename (path, name, NULL));
  }
  g_ptr_array_sort (names, replay_cmp_names);
  for (guint i = 0; i < names->len; i++) {
    if (!replay_path (g_ptr_array_index (names, i), count, error))
      return FALSE;
  }
  return TRUE;
}

int
main (int argc, char **argv)
{
  guint count = 0;

  if (argc < 2) {
    g_printerr ("usage: %s FILE-OR-DIRECTORY...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize != NULL)
    LLVMFuzzerInitialize (&argc, &argv);
  for (int i = 1; i < argc; i++) {
    g_autoptr(GError) error = NULL;
    if (!replay_path (argv[i], &count, &error)) {
      g_printerr ("%s\n", error->message);
      return 1;
    }
  }
  if (count == 0) {
    /* an empty corpus would make this test pass without testing anything */
    g_printerr ("no inputs found\n");
    return 1;
  }
  g_print ("replayed %u inputs\n", count);
  return 0;
}
