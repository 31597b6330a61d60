/*
 * QEMU's ROM blobs that live in guest RAM (HMP `info roms`): a direct-boot
 * kernel's ELF segments, option ROMs copied to RAM. QEMU's main thread
 * writes them into RAM again at every reset (rom_reset()), before it
 * announces the reset.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>

typedef struct _VmceRomBlobs VmceRomBlobs;

/* The text of HMP `info roms`; lines of blobs that are not in RAM (fw_cfg
 * files, real ROM) are skipped, a line that is not understood is an error */
VmceRomBlobs *vmce_rom_blobs_parse (const gchar *text, GError **error);
void vmce_rom_blobs_free (VmceRomBlobs *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceRomBlobs, vmce_rom_blobs_free)

guint vmce_rom_blobs_get_n (VmceRomBlobs *self);
/* The name of the blob QEMU reloads at @gpa on reset, or NULL */
const gchar *vmce_rom_blobs_lookup (VmceRomBlobs *self, guint64 gpa);
