/*
 * A host memory error as a raw CPER record for an Arm64 guest's GHES.
 *
 * What QEMU 10.2's inject-ghes-v2-error takes is the error block exactly
 * as the guest reads it: hw/acpi/ghes_cper.c base64-decodes the argument
 * and ghes_record_cper_errors() (hw/acpi/ghes.c) copies it unchanged to
 * the Generic Error Status Block's address, nothing checked but its length
 * (at most 1 KiB). So this file writes the block status, lengths and
 * severities that the guest's cper_estatus_check() and ghes_do_proc()
 * (Linux drivers/firmware/efi/cper.c, drivers/acpi/apei/ghes.c) check.
 * docs/internals.md, "The Arm path", has the citations.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-cper"

#include <string.h>

#include "cper-encode.h"
#include "error.h"
#include "page.h"

/* Memory Error Section, A5BC1114-6F64-4EDE-B863-3E83ED7C83B1, as EFI_GUID
 * lays it out: the first three fields little-endian, the last eight bytes
 * as written */
static const guint8 vmce_cper_mem_guid[16] = {
  0x14, 0x11, 0xbc, 0xa5, 0x64, 0x6f, 0xde, 0x4e,
  0xb8, 0x63, 0x3e, 0x83, 0xed, 0x7c, 0x83, 0xb1,
};

static void
vmce_cper_put (guint8 *p, guint64 value, guint size)
{
  for (guint i = 0; i < size; i++)
    p[i] = (guint8) (value >> (8 * i));
}

guint
vmce_cper_sections_needed (const VmceCperMemError *e)
{
  if (e->lost_size <= e->guest_page_size)
    return 1;
  return (guint) (e->lost_size / e->guest_page_size);
}

/* One Generic Error Data Entry (revision 0x300: 72 bytes, with a time
 * stamp field, left invalid) and its Memory Error Section */
static void
vmce_cper_put_entry (guint8 *p, const VmceCperMemError *e, guint64 pa, guint64 granule, gboolean primary)
{
  guint8 flags = primary ? VMCE_CPER_FLAG_PRIMARY : 0;
  guint8 *mem = p + VMCE_CPER_GEDE_SIZE;

  /* an AO is data the hardware contained and nothing consumed yet */
  if (e->kind == VMCE_MCE_KIND_AO)
    flags |= VMCE_CPER_FLAG_LATENT;
  memcpy (p, vmce_cper_mem_guid, sizeof vmce_cper_mem_guid);
  vmce_cper_put (p + 16, VMCE_CPER_SEV_RECOVERABLE, 4);
  vmce_cper_put (p + 20, 0x0300, 2); /* revision */
  p[22] = 0;                         /* no FRU id, FRU text, time stamp */
  p[23] = flags;
  vmce_cper_put (p + 24, VMCE_CPER_MEM_SIZE, 4);
  /* FRU id (16), FRU text (20), time stamp (8): zero */

  vmce_cper_put (mem + 0, VMCE_CPER_MEM_VALID_PA | VMCE_CPER_MEM_VALID_PA_MASK | VMCE_CPER_MEM_VALID_TYPE, 8);
  vmce_cper_put (mem + 16, pa, 8);
  vmce_cper_put (mem + 24, ~(granule - 1), 8);
  /* the type an x86 guest would read from the same error: an SRAO is a
   * patrol scrub's find (MCACOD 0xC0), an SRAR a consumed multi-bit one */
  mem[72] = e->kind == VMCE_MCE_KIND_AO ? VMCE_CPER_MEM_TYPE_SCRUB_UNCORRECTED
                                        : VMCE_CPER_MEM_TYPE_MULTI_BIT_ECC;
}

static gboolean
vmce_cper_check (const VmceCperMemError *e, GError **error)
{
  guint n;

  if (e->lost_size < VMCE_PAGE_SIZE || (e->lost_size & (e->lost_size - 1)) != 0 ||
      e->guest_page_size < VMCE_PAGE_SIZE || (e->guest_page_size & (e->guest_page_size - 1)) != 0) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                 "lost size %" G_GUINT64_FORMAT " and guest page size %" G_GUINT64_FORMAT
                 " must be powers of two of 4 KiB or more", e->lost_size, e->guest_page_size);
    return FALSE;
  }
  n = vmce_cper_sections_needed (e);
  if (VMCE_CPER_GESB_SIZE + (gsize) n * (VMCE_CPER_GEDE_SIZE + VMCE_CPER_MEM_SIZE) > VMCE_CPER_BLOCK_MAX) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_NOT_SUPPORTED,
                 "a loss of %" G_GUINT64_FORMAT " KiB in %" G_GUINT64_FORMAT
                 " KiB guest pages needs %u memory error sections, and QEMU's GHES error block holds "
                 "%u", e->lost_size / 1024, e->guest_page_size / 1024, n,
                 (guint) ((VMCE_CPER_BLOCK_MAX - VMCE_CPER_GESB_SIZE) / (VMCE_CPER_GEDE_SIZE + VMCE_CPER_MEM_SIZE)));
    return FALSE;
  }
  return TRUE;
}

GBytes *
vmce_cper_encode_memory_error (const VmceCperMemError *e, GError **error)
{
  guint n;
  gsize data_length, size;
  guint8 *block;
  guint64 granule, base;

  if (!vmce_cper_check (e, error))
    return NULL;
  n = vmce_cper_sections_needed (e);
  /* each section names what the guest loses in one of its pages: the
   * whole loss when it fits in one, else one guest page each */
  granule = MIN (e->lost_size, e->guest_page_size);
  base = e->gpa & ~(e->lost_size - 1);
  data_length = (gsize) n * (VMCE_CPER_GEDE_SIZE + VMCE_CPER_MEM_SIZE);
  size = VMCE_CPER_GESB_SIZE + data_length;
  block = g_malloc0 (size);

  vmce_cper_put (block + 0, VMCE_CPER_BLOCK_UE_VALID | ((guint64) n << VMCE_CPER_BLOCK_COUNT_SHIFT), 4);
  /* raw data offset and length (4 + 4): none */
  vmce_cper_put (block + 12, data_length, 4);
  vmce_cper_put (block + 16, VMCE_CPER_SEV_RECOVERABLE, 4);
  for (guint i = 0; i < n; i++)
    vmce_cper_put_entry (block + VMCE_CPER_GESB_SIZE + (gsize) i * (VMCE_CPER_GEDE_SIZE + VMCE_CPER_MEM_SIZE), e,
                         base + (guint64) i * granule, granule, i == 0);
  return g_bytes_new_take (block, size);
}

gchar *
vmce_cper_to_base64 (GBytes *record)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (record, &size);

  /* QEMU's qbase64_decode() takes the standard alphabet, no line breaks:
   * what g_base64_encode() writes */
  return g_base64_encode (data, size);
}
