/*
 * Machine-check register values: they must be exactly QEMU's, or the
 * guest's severity grading does not recover.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "mce-encode.h"

static const VmceCpuModel skylake = { .vendor = "GenuineIntel", .family = 6, .model = 94,
                                      .ser_p = TRUE };
static const VmceCpuModel core2 = { .vendor = "GenuineIntel", .family = 6, .model = 13,
                                    .ser_p = TRUE };
/* a KVM guest on an AMD host: kvm_amd dropped MCG_SER_P */
static const VmceCpuModel intel_on_amd_kvm = { .vendor = "GenuineIntel", .family = 6,
                                               .model = 94 };
static const VmceCpuModel epyc = { .vendor = "AuthenticAMD", .family = 23, .model = 1,
                                   .ser_p = TRUE };
static const VmceCpuModel epyc_succor = { .vendor = "AuthenticAMD", .family = 23, .model = 1,
                                          .succor = TRUE };

static void
test_mce_encode_srao (void)
{
  VmceMce mce;
  g_autofree gchar *hmp = NULL;

  vmce_mce_encode (VMCE_MCE_KIND_AO, 0x1234567, 0, &skylake, VMCE_MCE_STYLE_INTEL, &mce);
  /* the values QEMU's kvm_mce_inject() uses for BUS_MCEERR_AO */
  g_assert_cmphex (mce.status, ==, G_GUINT64_CONSTANT (0xbd000000000000c0));
  g_assert_cmphex (mce.mcg_status, ==, 0x5);
  g_assert_cmphex (mce.misc, ==, 0x8c);
  g_assert_cmpuint (mce.bank, ==, 9);
  g_assert_cmphex (mce.addr, ==, 0x1234567);
  g_assert_true (mce.broadcast);
  hmp = vmce_mce_to_hmp (&mce);
  g_assert_cmpstr (hmp, ==, "mce -b 0 9 0xbd000000000000c0 0x5 0x1234567 0x8c");
}

static void
test_mce_encode_srar (void)
{
  VmceMce mce;
  g_autofree gchar *hmp = NULL;

  vmce_mce_encode (VMCE_MCE_KIND_AR, G_GUINT64_CONSTANT (0x140001000), 3, &core2,
                   VMCE_MCE_STYLE_INTEL, &mce);
  /* AR bit, MCACOD 0x134 (data load); MCIP|EIPV|RIPV */
  g_assert_cmphex (mce.status, ==, G_GUINT64_CONSTANT (0xbd80000000000134));
  g_assert_cmphex (mce.mcg_status, ==, 0x7);
  g_assert_cmphex (mce.misc, ==, 0x8c);
  g_assert_cmpuint (mce.cpu, ==, 3);
  g_assert_false (mce.broadcast);
  hmp = vmce_mce_to_hmp (&mce);
  g_assert_cmpstr (hmp, ==, "mce 3 9 0xbd80000000000134 0x7 0x140001000 0x8c");
}

/* QEMU 9.1's encodings for AMD guests: a deferred error for AO (no #MC,
 * found by polling), UC+POISON for AR, never broadcast */
static void
test_mce_encode_amd (void)
{
  VmceMce mce;

  vmce_mce_encode (VMCE_MCE_KIND_AO, 0x2000, 0, &epyc_succor, VMCE_MCE_STYLE_AMD, &mce);
  g_assert_cmphex (mce.status, ==, G_GUINT64_CONSTANT (0x9c00180000000000));
  g_assert_cmphex (mce.mcg_status, ==, 0x5);
  g_assert_false (mce.broadcast);
  vmce_mce_encode (VMCE_MCE_KIND_AR, 0x2000, 0, &epyc_succor, VMCE_MCE_STYLE_AMD, &mce);
  g_assert_cmphex (mce.status, ==, G_GUINT64_CONSTANT (0xbc00080000000000));
  g_assert_cmphex (mce.mcg_status, ==, 0x7);
  g_assert_cmpstr (vmce_mce_kind_to_mce_name (VMCE_MCE_KIND_AO, VMCE_MCE_STYLE_AMD), ==,
                   "deferred");
}

/* Which guests can recover at all, as Linux 6.1 grades errors */
static void
test_mce_style (void)
{
  const gchar *reason = NULL;

  g_assert_cmpint (vmce_mce_style_for (&skylake, &reason), ==, VMCE_MCE_STYLE_INTEL);
  g_assert_null (reason);
  g_assert_cmpint (vmce_mce_style_for (&epyc_succor, &reason), ==, VMCE_MCE_STYLE_AMD);
  g_assert_cmpint (vmce_mce_style_for (&intel_on_amd_kvm, &reason), ==, VMCE_MCE_STYLE_NONE);
  g_assert_nonnull (strstr (reason, "MCG_SER_P"));
  /* an AMD guest grades by SUCCOR whatever MCG_CAP says */
  g_assert_cmpint (vmce_mce_style_for (&epyc, &reason), ==, VMCE_MCE_STYLE_NONE);
  g_assert_nonnull (strstr (reason, "SUCCOR"));
}

static void
test_mce_broadcast (void)
{
  /* mirrors cpu_x86_support_mca_broadcast() of QEMU 9.1 */
  g_assert_true (vmce_cpu_model_supports_mca_broadcast (&skylake));
  g_assert_false (vmce_cpu_model_supports_mca_broadcast (&core2));
  g_assert_false (vmce_cpu_model_supports_mca_broadcast (&epyc));
  g_assert_true (vmce_cpu_model_supports_mca_broadcast (
      &(VmceCpuModel){ .vendor = "GenuineIntel", .family = 15, .model = 1 }));
}

static void
test_mce_kind_strings (void)
{
  VmceMceKind kind;

  g_assert_true (vmce_mce_kind_from_string ("AR", &kind));
  g_assert_cmpint (kind, ==, VMCE_MCE_KIND_AR);
  g_assert_true (vmce_mce_kind_from_string ("ao", &kind));
  g_assert_cmpint (kind, ==, VMCE_MCE_KIND_AO);
  g_assert_false (vmce_mce_kind_from_string ("srao", &kind));
  g_assert_cmpstr (vmce_mce_kind_to_mce_name (VMCE_MCE_KIND_AR, VMCE_MCE_STYLE_INTEL), ==, "SRAR");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/mce-encode/srao", test_mce_encode_srao);
  g_test_add_func ("/mce-encode/srar", test_mce_encode_srar);
  g_test_add_func ("/mce-encode/amd", test_mce_encode_amd);
  g_test_add_func ("/mce-encode/style", test_mce_style);
  g_test_add_func ("/mce-encode/broadcast", test_mce_broadcast);
  g_test_add_func ("/mce-encode/kind-strings", test_mce_kind_strings);
  return g_test_run ();
}
