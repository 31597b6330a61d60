/*
 * Fuzz what vmced reads back from its journal when it starts (the
 * poisoned-page sets, poison-index.c) and QEMU's ROM list (rom-blobs.c):
 * each input is a journal, line by line, and an `info roms` answer.
 * Whatever the input, the index must stay consistent: every page it keeps
 * is page-aligned and found again under its own address.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <string.h>

#include "poison-index.h"
#include "poison-set.h"
#include "rom-blobs.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
check_set (GHashTable *set)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, set);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    const VmcePoisonedPage *p = value;
    g_assert ((p->gpa & 0xfff) == 0);
    g_assert (*(guint64 *) key == p->gpa);
    g_assert (vmce_poison_set_lookup (set, p->gpa | 0x123) == p);
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(VmcePoisonIndex) idx = vmce_poison_index_new ();
  g_autofree gchar *text = g_strndup ((const gchar *) data, size);
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  g_autoptr(VmceRomBlobs) roms = NULL;
  guint pages_before;

  for (guint i = 0; lines[i] != NULL; i++)
    (void) vmce_poison_index_apply_line (idx, lines[i], strlen (lines[i]));
  pages_before = vmce_poison_index_get_n_pages (idx);
  /* every identity the input names, taken back */
  for (guint i = 0; lines[i] != NULL; i++) {
    const gchar *id = strstr (lines[i], "\"qemu_id\":\"");
    g_autofree gchar *identity = NULL;
    g_autofree gchar *other = NULL;
    g_autoptr(GHashTable) set = NULL;
    guint64 n = 0;
    gboolean kept = FALSE;

    if (id == NULL)
      continue;
    id += strlen ("\"qemu_id\":\"");
    identity = g_strndup (id, strcspn (id, "\""));
    set = vmce_poison_index_take (idx, identity, &n, &kept, &other);
    if (set != NULL) {
      g_assert (g_hash_table_size (set) <= pages_before);
      check_set (set);
    }
  }
  roms = vmce_rom_blobs_parse (text, NULL);
  if (roms != NULL)
    (void) vmce_rom_blobs_lookup (roms, 0x1000000);
  return 0;
}
