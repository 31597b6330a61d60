/*
 * QEMU's ROM blobs in guest RAM (see rom-blobs.h).
 *
 * QEMU 7.2 prints one line per blob (hw/core/loader.c, hmp_info_roms()):
 *   addr=0000000001000000 size=0x18eacdc mem=ram name="vmlinux ELF ... 0"
 *   addr=00000000fffc0000 size=0x040000 mem=rom name="bios-256k.bin"
 *   fw=genroms/kvmvapic.bin size=0x002400 name="kvmvapic.bin"
 *   /rom@etc/acpi/tables size=0x200000 name="etc/acpi/tables"
 * Only mem=ram blobs are rewritten into guest RAM by rom_reset().
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-layout"

#include <gio/gio.h>
#include <string.h>

#include "rom-blobs.h"

typedef struct {
  guint64 gpa;
  guint64 size;
  gchar *name;
} VmceRomBlob;

struct _VmceRomBlobs {
  GArray *blobs; /* of VmceRomBlob */
};

static void
vmce_rom_blob_clear (gpointer data)
{
  g_free (((VmceRomBlob *) data)->name);
}

/* value of "key=" up to the next space (or the quoted name) */
static gchar *
vmce_rom_field (const gchar *line, const gchar *key)
{
  g_autofree gchar *pat = g_strdup_printf (" %s=", key);
  g_autofree gchar *padded = g_strconcat (" ", line, NULL);
  const gchar *p = strstr (padded, pat);
  const gchar *end;

  if (p == NULL)
    return NULL;
  p += strlen (pat);
  if (*p == '"') {
    p++;
    end = strrchr (p, '"');
    return end != NULL && end >= p ? g_strndup (p, end - p) : NULL;
  }
  end = p + strcspn (p, " ");
  return g_strndup (p, end - p);
}

VmceRomBlobs *
vmce_rom_blobs_parse (const gchar *text, GError **error)
{
  g_autoptr(VmceRomBlobs) self = g_new0 (VmceRomBlobs, 1);
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);

  self->blobs = g_array_new (FALSE, TRUE, sizeof (VmceRomBlob));
  g_array_set_clear_func (self->blobs, vmce_rom_blob_clear);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_autofree gchar *line = g_strstrip (g_strdup (lines[i]));
    g_autofree gchar *addr = NULL;
    g_autofree gchar *size = NULL;
    g_autofree gchar *mem = NULL;
    VmceRomBlob blob = { 0 };
    gchar *end = NULL;

    if (line[0] == '\0')
      continue;
    /* fw_cfg files: not in guest RAM */
    if (g_str_has_prefix (line, "fw=") || line[0] == '/')
      continue;
    addr = vmce_rom_field (line, "addr");
    size = vmce_rom_field (line, "size");
    mem = vmce_rom_field (line, "mem");
    if (addr == NULL || size == NULL || mem == NULL) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "info roms, line %u: not a ROM blob: %.80s", i + 1, line);
      return NULL;
    }
    if (g_strcmp0 (mem, "ram") != 0)
      continue;
    blob.gpa = g_ascii_strtoull (addr, &end, 16);
    if (end == addr || *end != '\0') {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "info roms, line %u: bad address '%s'", i + 1, addr);
      return NULL;
    }
    blob.size = g_ascii_strtoull (size, &end, 16);
    if (end == size || *end != '\0' || blob.size == 0 || blob.gpa + blob.size < blob.gpa) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "info roms, line %u: bad size '%s'", i + 1, size);
      return NULL;
    }
    blob.name = vmce_rom_field (line, "name");
    if (blob.name == NULL)
      blob.name = g_strdup ("?");
    g_array_append_val (self->blobs, blob);
  }
  return g_steal_pointer (&self);
}

void
vmce_rom_blobs_free (VmceRomBlobs *self)
{
  if (self == NULL)
    return;
  g_array_unref (self->blobs);
  g_free (self);
}

guint
vmce_rom_blobs_get_n (VmceRomBlobs *self)
{
  return self->blobs->len;
}

const gchar *
vmce_rom_blobs_lookup (VmceRomBlobs *self, guint64 gpa)
{
  /* a handful of blobs: a scan is enough */
  for (guint i = 0; self != NULL && i < self->blobs->len; i++) {
    const VmceRomBlob *b = &g_array_index (self->blobs, VmceRomBlob, i);
    if (gpa >= b->gpa && gpa - b->gpa < b->size)
      return b->name;
  }
  return NULL;
}
