/*
 * Machine-check register values for a forwarded memory error.
 *
 * The values are those QEMU's own KVM forwarding uses (kvm_mce_inject() in
 * target/i386/kvm/kvm.c), so a guest cannot tell vmced's injection from
 * QEMU's: the guest's MCE severity grading only recovers when the status
 * matches the SRAO/SRAR patterns of arch/x86/kernel/cpu/mce/severity.c.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-mce"

#include "mce-encode.h"

/* MCi_MISC: address mode physical (bits 8:6 = 2), least significant valid
 * address bit 12 (bits 5:0): the error is reported for a whole 4 KiB page. */
#define VMCE_MCI_MISC_PAGE ((2ULL << 6) | 12)

const gchar *
vmce_mce_kind_to_string (VmceMceKind kind)
{
  return kind == VMCE_MCE_KIND_AR ? "ar" : "ao";
}

const gchar *
vmce_mce_kind_to_mce_name (VmceMceKind kind)
{
  return kind == VMCE_MCE_KIND_AR ? "SRAR" : "SRAO";
}

gboolean
vmce_mce_kind_from_string (const gchar *str, VmceMceKind *kind)
{
  if (g_ascii_strcasecmp (str, "ao") == 0) {
    *kind = VMCE_MCE_KIND_AO;
    return TRUE;
  }
  if (g_ascii_strcasecmp (str, "ar") == 0) {
    *kind = VMCE_MCE_KIND_AR;
    return TRUE;
  }
  return FALSE;
}

/* Mirrors cpu_x86_support_mca_broadcast(): QEMU refuses "mce -b" for CPUs
 * without broadcast, and Linux on CPUs with it waits in its MCE rendezvous
 * for every CPU, so broadcast must be used exactly where QEMU allows it. */
gboolean
vmce_cpu_model_supports_mca_broadcast (const VmceCpuModel *model)
{
  if (g_strcmp0 (model->vendor, "GenuineIntel") != 0)
    return FALSE;
  return (model->family == 6 && model->model >= 14) || model->family > 6;
}

void
vmce_mce_encode (VmceMceKind kind,
                 guint64 gpa,
                 guint cpu,
                 const VmceCpuModel *model,
                 VmceMce *mce)
{
  guint64 status = VMCE_MCI_STATUS_VAL | VMCE_MCI_STATUS_UC | VMCE_MCI_STATUS_EN |
                   VMCE_MCI_STATUS_MISCV | VMCE_MCI_STATUS_ADDRV | VMCE_MCI_STATUS_S;
  guint64 mcg_status = VMCE_MCG_STATUS_MCIP | VMCE_MCG_STATUS_RIPV;

  if (kind == VMCE_MCE_KIND_AR) {
    status |= VMCE_MCI_STATUS_AR | VMCE_MCACOD_DATA;
    /* the faulting instruction is the one at RIP: the guest must not
     * simply return to it */
    mcg_status |= VMCE_MCG_STATUS_EIPV;
  } else {
    status |= VMCE_MCACOD_SCRUB;
  }

  mce->cpu = cpu;
  mce->bank = VMCE_MCE_BANK_MEMORY;
  mce->status = status;
  mce->mcg_status = mcg_status;
  /* exact, as QEMU passes it: MISC's LSB field tells the guest to mask it */
  mce->addr = gpa;
  mce->misc = VMCE_MCI_MISC_PAGE;
  mce->broadcast = vmce_cpu_model_supports_mca_broadcast (model);
}

gchar *
vmce_mce_to_hmp (const VmceMce *mce)
{
  return g_strdup_printf ("mce %s%u %u 0x%" G_GINT64_MODIFIER "x 0x%" G_GINT64_MODIFIER "x "
                          "0x%" G_GINT64_MODIFIER "x 0x%" G_GINT64_MODIFIER "x",
                          mce->broadcast ? "-b " : "",
                          mce->cpu, mce->bank, mce->status, mce->mcg_status,
                          mce->addr, mce->misc);
}
