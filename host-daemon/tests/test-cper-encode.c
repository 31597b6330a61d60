/*
 * The CPER record for inject-ghes-v2-error, against the layout the specs
 * give: the expected bytes are written here field by field from ACPI 6.x
 * Table 18.380 (Generic Error Status Block), UEFI 2.10 Table N.6 (Generic
 * Error Data Entry, which ACPI's Table 18.381 repeats) and Table N.31
 * (Memory Error Section), never from the encoder.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "cper-encode.h"
#include "error.h"

/* AO at GPA 0x45678abc, a 4 KiB page lost, a 4 KiB guest page */
static const guint8 expected_ao[172] = {
  /* Generic Error Status Block, offset 0 */
  0x11, 0x00, 0x00, 0x00, /* 0 Block Status: uncorrectable valid (bit 0), 1 entry (bits 13:4) */
  0x00, 0x00, 0x00, 0x00, /* 4 Raw Data Offset */
  0x00, 0x00, 0x00, 0x00, /* 8 Raw Data Length */
  0x98, 0x00, 0x00, 0x00, /* 12 Data Length: 72 + 80 = 152 */
  0x00, 0x00, 0x00, 0x00, /* 16 Error Severity: 0, recoverable */
  /* Generic Error Data Entry, offset 20 */
  /* 0 Section Type: A5BC1114-6F64-4EDE-B863-3E83ED7C83B1, EFI_GUID's
   * mixed endianness: UINT32, UINT16, UINT16 little-endian, then 8 bytes */
  0x14, 0x11, 0xbc, 0xa5, 0x64, 0x6f, 0xde, 0x4e,
  0xb8, 0x63, 0x3e, 0x83, 0xed, 0x7c, 0x83, 0xb1,
  0x00, 0x00, 0x00, 0x00, /* 16 Error Severity: recoverable */
  0x00, 0x03,             /* 20 Revision 0x0300 */
  0x00,                   /* 22 Validation Bits: no FRU id, FRU text, time stamp */
  0x21,                   /* 23 Flags: primary (bit 0), latent error (bit 5) */
  0x50, 0x00, 0x00, 0x00, /* 24 Error Data Length: 80 */
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,             /* 28 FRU Id */
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 44 FRU Text */
  0, 0, 0, 0, 0, 0, 0, 0,                                     /* 64 Timestamp */
  /* Memory Error Section, offset 92 */
  0x06, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 0 Validation Bits: PA (1), PA mask (2), type (14) */
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 8 Error Status */
  0x00, 0x80, 0x67, 0x45, 0x00, 0x00, 0x00, 0x00, /* 16 Physical Address */
  0x00, 0xf0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* 24 Physical Address Mask: 4 KiB */
  0x00, 0x00, /* 32 Node */
  0x00, 0x00, /* 34 Card */
  0x00, 0x00, /* 36 Module */
  0x00, 0x00, /* 38 Bank */
  0x00, 0x00, /* 40 Device */
  0x00, 0x00, /* 42 Row */
  0x00, 0x00, /* 44 Column */
  0x00, 0x00, /* 46 Bit Position */
  0, 0, 0, 0, 0, 0, 0, 0, /* 48 Requestor ID */
  0, 0, 0, 0, 0, 0, 0, 0, /* 56 Responder ID */
  0, 0, 0, 0, 0, 0, 0, 0, /* 64 Target ID */
  0x0e,       /* 72 Memory Error Type: 14, scrub uncorrected error */
  0x00,       /* 73 Extended */
  0x00, 0x00, /* 74 Rank Number */
  0x00, 0x00, /* 76 Card Handle */
  0x00, 0x00, /* 78 Module Handle */
};

static guint64
get_le (const guint8 *p, guint size)
{
  guint64 v = 0;

  for (guint i = 0; i < size; i++)
    v |= (guint64) p[i] << (8 * i);
  return v;
}

static GBytes *
encode (VmceMceKind kind, guint64 gpa, guint64 lost, guint64 guest_page)
{
  VmceCperMemError e = { .kind = kind, .gpa = gpa, .lost_size = lost, .guest_page_size = guest_page };
  g_autoptr(GError) error = NULL;
  GBytes *b = vmce_cper_encode_memory_error (&e, &error);

  g_assert_no_error (error);
  g_assert_nonnull (b);
  return b;
}

static void
test_cper_ao_layout (void)
{
  g_autoptr(GBytes) b = encode (VMCE_MCE_KIND_AO, 0x45678abc, 4096, 4096);
  gsize size;
  const guint8 *p = g_bytes_get_data (b, &size);

  g_assert_cmpmem (p, size, expected_ao, sizeof expected_ao);
}

/* AR: not latent, a multi-bit ECC error; the rest as AO */
static void
test_cper_ar (void)
{
  g_autoptr(GBytes) b = encode (VMCE_MCE_KIND_AR, 0x45678abc, 4096, 4096);
  gsize size;
  const guint8 *p = g_bytes_get_data (b, &size);
  guint8 expected[sizeof expected_ao];

  memcpy (expected, expected_ao, sizeof expected);
  expected[20 + 23] = 0x01;
  expected[92 + 72] = 0x03;
  g_assert_cmpmem (p, size, expected, sizeof expected);
}

/* A 64 KiB guest page: still one section, naming the 4 KiB the host lost;
 * the guest kernel poisons its page that holds it */
static void
test_cper_big_guest_page (void)
{
  g_autoptr(GBytes) b = encode (VMCE_MCE_KIND_AO, 0x45678abc, 4096, 65536);
  gsize size;
  const guint8 *p = g_bytes_get_data (b, &size);

  g_assert_cmpmem (p, size, expected_ao, sizeof expected_ao);
}

/* 16 KiB lost in 4 KiB guest pages: four entries, one per page, only the
 * first primary; the block's lengths and entry count add up as Linux's
 * cper_estatus_check() wants them to */
static void
test_cper_several_sections (void)
{
  g_autoptr(GBytes) b = encode (VMCE_MCE_KIND_AO, 0x10006123, 16384, 4096);
  gsize size;
  const guint8 *p = g_bytes_get_data (b, &size);

  g_assert_cmpuint (size, ==, 20 + 4 * 152);
  g_assert_cmphex (get_le (p, 4), ==, 0x41);
  g_assert_cmpuint (get_le (p + 12, 4), ==, 4 * 152);
  for (guint i = 0; i < 4; i++) {
    const guint8 *entry = p + 20 + i * 152;

    g_assert_cmpmem (entry, 16, expected_ao + 20, 16);
    g_assert_cmphex (entry[23], ==, i == 0 ? 0x21 : 0x20);
    g_assert_cmpuint (get_le (entry + 24, 4), ==, 80);
    g_assert_cmphex (get_le (entry + 72 + 16, 8), ==, 0x10004000 + i * 4096);
    g_assert_cmphex (get_le (entry + 72 + 24, 8), ==, G_GUINT64_CONSTANT (0xfffffffffffff000));
  }
}

/* A lost 2 MiB page in 4 KiB guest pages needs 512 sections; QEMU's error
 * block holds 6: one clear error, no record */
static void
test_cper_too_big (void)
{
  VmceCperMemError e = { .kind = VMCE_MCE_KIND_AO, .gpa = 0x200000, .lost_size = 2 << 20, .guest_page_size = 4096 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) b = vmce_cper_encode_memory_error (&e, &error);

  g_assert_null (b);
  g_assert_error (error, VMCE_ERROR, VMCE_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "needs 512 memory error sections"));
  g_assert_nonnull (strstr (error->message, "holds 6"));
  g_assert_cmpuint (vmce_cper_sections_needed (&e), ==, 512);
}

static void
test_cper_bad_sizes (void)
{
  VmceCperMemError e = { .kind = VMCE_MCE_KIND_AO, .gpa = 0, .lost_size = 4096, .guest_page_size = 12288 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) b = vmce_cper_encode_memory_error (&e, &error);

  g_assert_null (b);
  g_assert_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER);
}

/* What the QMP command takes: base64 of exactly those bytes, one line */
static void
test_cper_base64 (void)
{
  g_autoptr(GBytes) b = encode (VMCE_MCE_KIND_AO, 0x45678abc, 4096, 4096);
  g_autofree gchar *text = vmce_cper_to_base64 (b);
  g_autofree guchar *back = NULL;
  gsize len = 0;

  g_assert_null (strchr (text, '\n'));
  g_assert_true (g_str_has_prefix (text, "EQAAAAAAAAAAAAAAmAAAAAAAAAAUEbylZG/eTrhjPoPtfIOx"));
  back = g_base64_decode (text, &len);
  g_assert_cmpmem (back, len, expected_ao, sizeof expected_ao);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cper/ao-layout", test_cper_ao_layout);
  g_test_add_func ("/cper/ar", test_cper_ar);
  g_test_add_func ("/cper/big-guest-page", test_cper_big_guest_page);
  g_test_add_func ("/cper/several-sections", test_cper_several_sections);
  g_test_add_func ("/cper/too-big", test_cper_too_big);
  g_test_add_func ("/cper/bad-sizes", test_cper_bad_sizes);
  g_test_add_func ("/cper/base64", test_cper_base64);
  return g_test_run ();
}
