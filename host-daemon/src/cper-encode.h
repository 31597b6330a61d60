/*
 * A host memory error as the raw CPER record QEMU's inject-ghes-v2-error
 * takes for an Arm64 guest (UEFI 2.10 appendix N, ACPI 6.x 18.3.2.7.1):
 * the whole Generic Error Status Block with its Generic Error Data
 * Entries, each followed by a Memory Error Section. Pure: bytes in, bytes
 * out, no I/O.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>

#include "mce-encode.h"

/* sizes, in bytes (ACPI 6.x Tables 18.380 and 18.381; UEFI 2.10 N.2.5) */
#define VMCE_CPER_GESB_SIZE    20 /* Generic Error Status Block, without its entries */
#define VMCE_CPER_GEDE_SIZE    72 /* Generic Error Data Entry, revision 0x300 */
#define VMCE_CPER_MEM_SIZE     80 /* Memory Error Section */
/* What one of QEMU's GHES error blocks holds (ACPI_GHES_MAX_RAW_DATA_LENGTH
 * in hw/acpi/ghes.c): inject-ghes-v2-error refuses a longer record */
#define VMCE_CPER_BLOCK_MAX    1024

/* Memory Error Section validation bits (UEFI 2.10 Table N.31) */
#define VMCE_CPER_MEM_VALID_PA       (1u << 1)
#define VMCE_CPER_MEM_VALID_PA_MASK  (1u << 2)
#define VMCE_CPER_MEM_VALID_TYPE     (1u << 14)

/* Memory Error Type (UEFI 2.10 Table N.31) */
#define VMCE_CPER_MEM_TYPE_MULTI_BIT_ECC    3
#define VMCE_CPER_MEM_TYPE_SCRUB_UNCORRECTED 14

/* Generic Error Data Entry flags (UEFI 2.10 Table N.6) */
#define VMCE_CPER_FLAG_PRIMARY 0x01
#define VMCE_CPER_FLAG_LATENT  0x20

/* Error severity (UEFI 2.10 Table N.6; ACPI's Generic Error Severity) */
#define VMCE_CPER_SEV_RECOVERABLE 0

/* Block Status (ACPI 6.x Table 18.380) */
#define VMCE_CPER_BLOCK_UE_VALID    (1u << 0)
#define VMCE_CPER_BLOCK_COUNT_SHIFT 4

typedef struct {
  VmceMceKind kind;       /* AO: found, not consumed (latent); AR: consumed */
  guint64 gpa;            /* any address in the lost range */
  guint64 lost_size;      /* what the host lost: 4 KiB, or a whole huge page */
  guint64 guest_page_size; /* the guest kernel's page: 4, 16 or 64 KiB */
} VmceCperMemError;

/* The record, or NULL and @error: sizes not powers of two, or a loss that
 * needs more sections than one error block holds */
GBytes *vmce_cper_encode_memory_error (const VmceCperMemError *e, GError **error);
/* How many Memory Error Sections @e needs: the guest kernel poisons only
 * the page of each section's physical address (ghes_handle_memory_failure()
 * reads no mask), so a loss larger than a guest page takes one per page */
guint vmce_cper_sections_needed (const VmceCperMemError *e);
/* inject-ghes-v2-error's @cper argument: the record in base64 */
gchar *vmce_cper_to_base64 (GBytes *record);
