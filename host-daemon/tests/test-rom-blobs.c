/*
 * rom-blobs: QEMU 7.2's `info roms`, recorded from the vmce guest (a
 * direct-boot kernel loaded as an ELF, PVH)
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <string.h>

#include "rom-blobs.h"

static const gchar info_roms[] =
  "fw=genroms/kvmvapic.bin size=0x002400 name=\"kvmvapic.bin\"\r\n"
  "fw=genroms/pvh.bin size=0x000600 name=\"pvh.bin\"\r\n"
  "addr=0000000001000000 size=0x18eacdc mem=ram name=\"/work/main/build/guest-kernel/vmlinux "
  "ELF program header segment 0\"\r\n"
  "addr=0000000002a00000 size=0x644000 mem=ram name=\"/work/main/build/guest-kernel/vmlinux "
  "ELF program header segment 1\"\r\n"
  "addr=00000000fffc0000 size=0x040000 mem=rom name=\"bios-256k.bin\"\r\n"
  "/rom@etc/acpi/tables size=0x200000 name=\"etc/acpi/tables\"\r\n"
  "/rom@etc/table-loader size=0x010000 name=\"etc/table-loader\"\r\n";

static void
test_rom_blobs_parse (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceRomBlobs) roms = vmce_rom_blobs_parse (info_roms, &error);
  const gchar *name;

  g_assert_no_error (error);
  /* only what is in RAM: the kernel's segments, not fw_cfg files or ROM */
  g_assert_cmpuint (vmce_rom_blobs_get_n (roms), ==, 2);
  name = vmce_rom_blobs_lookup (roms, 0x1200fc0);
  g_assert_nonnull (name);
  g_assert_true (g_str_has_suffix (name, "vmlinux ELF program header segment 0"));
  g_assert_nonnull (vmce_rom_blobs_lookup (roms, 0x2a00000));
  g_assert_null (vmce_rom_blobs_lookup (roms, 0xfff));
  g_assert_null (vmce_rom_blobs_lookup (roms, 0x1000000 + 0x18eacdc));
  g_assert_null (vmce_rom_blobs_lookup (roms, 0xfffc0000));
}

static void
test_rom_blobs_bad (void)
{
  const gchar *bad[] = {
    "something else entirely\n",
    "addr=zz size=0x10 mem=ram name=\"x\"\n",
    "addr=0000000000001000 size=0 mem=ram name=\"x\"\n",
    "addr=ffffffffffffff00 size=0x1000 mem=ram name=\"wraps\"\n",
    "addr=0000000000001000 mem=ram name=\"no size\"\n",
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(VmceRomBlobs) roms = vmce_rom_blobs_parse (bad[i], &error);
    g_assert_null (roms);
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
    g_assert_nonnull (strstr (error->message, "line 1"));
  }
  /* no blobs at all is fine: nothing is rewritten at reset */
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(VmceRomBlobs) roms = vmce_rom_blobs_parse ("", &error);
    g_assert_no_error (error);
    g_assert_cmpuint (vmce_rom_blobs_get_n (roms), ==, 0);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/rom-blobs/parse", test_rom_blobs_parse);
  g_test_add_func ("/rom-blobs/bad", test_rom_blobs_bad);
  return g_test_run ();
}
