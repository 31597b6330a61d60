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
/* AMD (APM vol. 2, 9.3.2.2) */
#define VMCE_MCI_STATUS_DEFERRED (1ULL << 44)
#define VMCE_MCI_STATUS_POISON   (1ULL << 43)

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
  /* what the guest kernel will see, which decides whether it recovers:
   * Linux grades Intel-style errors by MCG_CAP.MCG_SER_P, and errors on AMD
   * by the SUCCOR bit (CPUID 0x80000007 EBX bit 1) */
  gboolean ser_p;
  gboolean succor;
} VmceCpuModel;

typedef enum {
  VMCE_MCE_STYLE_NONE,  /* the guest cannot recover from what we could send */
  VMCE_MCE_STYLE_INTEL, /* SRAO/SRAR, MCG_SER_P */
  VMCE_MCE_STYLE_AMD,   /* deferred error / UC+POISON, SUCCOR */
} VmceMceStyle;

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


gboolean vmce_cpu_model_supports_mca_broadcast (const VmceCpuModel *model);
gboolean vmce_cpu_model_is_amd (const VmceCpuModel *model);

/* How to tell this guest, or VMCE_MCE_STYLE_NONE and why not (@reason) */
VmceMceStyle vmce_mce_style_for (const VmceCpuModel *model, const gchar **reason);
const gchar *vmce_mce_style_to_string (VmceMceStyle style);
/* "SRAO", "SRAR", "deferred", "UC+POISON": what a machine-check person calls it */
const gchar *vmce_mce_kind_to_mce_name (VmceMceKind kind, VmceMceStyle style);

/* @style must not be VMCE_MCE_STYLE_NONE */
void vmce_mce_encode (VmceMceKind kind,
                      guint64 gpa,
                      guint cpu,
                      const VmceCpuModel *model,
                      VmceMceStyle style,
                      VmceMce *mce);
gchar *vmce_mce_to_hmp (const VmceMce *mce);
