/*
 * Machine-check register values for a forwarded memory error.
 *
 * The values are those QEMU's own KVM forwarding uses (kvm_mce_inject() in
 * target/i386/kvm/kvm.c), so a guest cannot tell vmced's injection from
 * QEMU's: the guest's MCE severity grading only recovers when the status
 * matches the patterns of arch/x86/kernel/cpu/mce/severity.c (SRAO/SRAR
 * on Intel, deferred and UC+POISON on AMD).
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
vmce_mce_kind_to_mce_name (VmceMceKind kind, VmceMceStyle style)
{
  if (style == VMCE_MCE_STYLE_AMD)
    return kind == VMCE_MCE_KIND_AR ? "UC+POISON" : "deferred";
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
vmce_cpu_model_is_amd (const VmceCpuModel *model)
{
  return g_strcmp0 (model->vendor, "AuthenticAMD") == 0 ||
         g_strcmp0 (model->vendor, "HygonGenuine") == 0;
}

gboolean
vmce_cpu_model_supports_mca_broadcast (const VmceCpuModel *model)
{
  /* QEMU 9.1 learned that AMD CPUs have no broadcast; 7.2 only looks at
   * family and model, and would broadcast to a family 23 AMD guest */
  if (vmce_cpu_model_is_amd (model))
    return FALSE;
  return (model->family == 6 && model->model >= 14) || model->family > 6;
}

/* Linux 6.1, arch/x86/kernel/cpu/mce/severity.c: an AMD guest grades
 * errors by mce_severity_amd(), which recovers only with SUCCOR; any other
 * guest by the Intel tables, which recover only with MCG_SER_P. */
VmceMceStyle
vmce_mce_style_for (const VmceCpuModel *model, const gchar **reason)
{
  const gchar *why = NULL;
  VmceMceStyle style = VMCE_MCE_STYLE_NONE;

  if (vmce_cpu_model_is_amd (model)) {
    if (model->succor)
      style = VMCE_MCE_STYLE_AMD;
    else
      why = "the guest has an AMD CPU without the SUCCOR bit (CPUID 0x80000007 EBX[1]): "
            "it panics on any uncorrected error";
  } else if (model->ser_p) {
    style = VMCE_MCE_STYLE_INTEL;
  } else {
    why = "the guest's MCG_CAP has no MCG_SER_P (kvm_amd clears it on AMD hosts): "
          "it panics on any uncorrected error";
  }
  if (reason != NULL)
    *reason = why;
  return style;
}

const gchar *
vmce_mce_style_to_string (VmceMceStyle style)
{
  switch (style) {
  case VMCE_MCE_STYLE_INTEL:
    return "intel";
  case VMCE_MCE_STYLE_AMD:
    return "amd";
  case VMCE_MCE_STYLE_NONE:
    break;
  }
  return "none";
}

/* The values QEMU 9.1's kvm_mce_inject() uses, Intel and AMD */
void
vmce_mce_encode (VmceMceKind kind,
                 guint64 gpa,
                 guint cpu,
                 const VmceCpuModel *model,
                 VmceMceStyle style,
                 VmceMce *mce)
{
  guint64 status = VMCE_MCI_STATUS_VAL | VMCE_MCI_STATUS_EN | VMCE_MCI_STATUS_MISCV |
                   VMCE_MCI_STATUS_ADDRV;
  guint64 mcg_status = VMCE_MCG_STATUS_MCIP | VMCE_MCG_STATUS_RIPV;

  g_return_if_fail (style != VMCE_MCE_STYLE_NONE);
  if (style == VMCE_MCE_STYLE_INTEL) {
    status |= VMCE_MCI_STATUS_UC | VMCE_MCI_STATUS_S;
    if (kind == VMCE_MCE_KIND_AR) {
      status |= VMCE_MCI_STATUS_AR | VMCE_MCACOD_DATA;
      /* the faulting instruction is the one at RIP: the guest must not
       * simply return to it */
      mcg_status |= VMCE_MCG_STATUS_EIPV;
    } else {
      status |= VMCE_MCACOD_SCRUB;
    }
  } else if (kind == VMCE_MCE_KIND_AR) {
    status |= VMCE_MCI_STATUS_UC | VMCE_MCI_STATUS_POISON;
    mcg_status |= VMCE_MCG_STATUS_EIPV;
  } else {
    /* a deferred error raises no #MC: the guest finds it by polling. POISON
     * says the address is usable, so the guest signals early-kill
     * processes (as QEMU 9.1 does it) */
    status |= VMCE_MCI_STATUS_DEFERRED | VMCE_MCI_STATUS_POISON;
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
