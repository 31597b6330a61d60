/*
 * Machine-check register values for a forwarded memory error.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>

/* IA32_MCi_STATUS bits (Intel SDM vol. 3B, 16.3.2.2) */
#define VMCE_MCI_STATUS_VAL   (1ULL << 63)
#define VMCE_MCI_STATUS_OVER  (1ULL << 62)
#define VMCE_MCI_STATUS_UC    (1ULL << 61)
#define VMCE_MCI_STATUS_EN    (1ULL << 60)
#define VMCE_MCI_STATUS_MISCV (1ULL << 59)
#define VMCE_MCI_STATUS_ADDRV (1ULL << 58)
#define VMCE_MCI_STATUS_PCC   (1ULL << 57)
#define VMCE_MCI_STATUS_S     (1ULL << 56)
#define VMCE_MCI_STATUS_AR    (1ULL << 55)

/* IA32_MCG_STATUS bits */
#define VMCE_MCG_STATUS_RIPV  (1ULL << 0)
#define VMCE_MCG_STATUS_EIPV  (1ULL << 1)
#define VMCE_MCG_STATUS_MCIP  (1ULL << 2)

/* MCACOD values of the two recoverable memory errors Linux knows */
#define VMCE_MCACOD_SCRUB     0x00c0 /* SRAO: memory scrubbing */
#define VMCE_MCACOD_DATA      0x0134 /* SRAR: data load */

/* The bank QEMU uses for memory errors it forwards itself */
#define VMCE_MCE_BANK_MEMORY  9

typedef enum {
  VMCE_MCE_KIND_AO, /* action optional: found, not consumed (SRAO) */
  VMCE_MCE_KIND_AR, /* action required: consumed (SRAR) */
} VmceMceKind;

typedef struct {
  gchar vendor[13]; /* CPUID vendor string, e.g. "GenuineIntel" */
  guint family;
  guint model;
} VmceCpuModel;

typedef struct {
  guint cpu; /* QEMU cpu index */
  guint bank;
  guint64 status;
  guint64 mcg_status;
  guint64 addr;
  guint64 misc;
  gboolean broadcast;
} VmceMce;

const gchar *vmce_mce_kind_to_string (VmceMceKind kind);
gboolean vmce_mce_kind_from_string (const gchar *str, VmceMceKind *kind);
/* "SRAO"/"SRAR": what a machine-check person calls it */
const gchar *vmce_mce_kind_to_mce_name (VmceMceKind kind);

gboolean vmce_cpu_model_supports_mca_broadcast (const VmceCpuModel *model);

void vmce_mce_encode (VmceMceKind kind,
                      guint64 gpa,
                      guint cpu,
                      const VmceCpuModel *model,
                      VmceMce *mce);
gchar *vmce_mce_to_hmp (const VmceMce *mce);
