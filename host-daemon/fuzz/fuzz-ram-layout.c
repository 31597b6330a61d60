/*
 * Fuzz the RAM layout parsers: the input is tried as `info mtree -f`
 * output, as a `gpa2hva` answer for a layout recorded from QEMU, and as
 * the answer of query-ram-layout (qemu-patches/).
 * Whatever parses must give translations that agree with each other.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <stdlib.h>

#include "ram-layout.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* the "memory" view of tests/data/mtree-pc-5g.txt, as QEMU 7.2 sent it */
static const gchar pc_5g_memory_view[] =
  "FlatView #2\r\n"
  " AS \"memory\", root: system\r\n"
  " AS \"cpu-memory-0\", root: system\r\n"
  " Root memory region: system\r\n"
  "  0000000000000000-00000000000bffff (prio 0, ram): pc.ram\r\n"
  "  00000000000c0000-00000000000dffff (prio 1, rom): pc.rom\r\n"
  "  00000000000e0000-00000000000fffff (prio 0, rom): pc.bios @0000000000020000\r\n"
  "  0000000000100000-00000000bfffffff (prio 0, ram): pc.ram @0000000000100000\r\n"
  "  00000000fec00000-00000000fec00fff (prio 0, i/o): ioapic\r\n"
  "  00000000fed00000-00000000fed003ff (prio 0, i/o): hpet\r\n"
  "  00000000fee00000-00000000feefffff (prio 4096, i/o): apic-msi\r\n"
  "  00000000fffc0000-00000000ffffffff (prio 0, rom): pc.bios\r\n"
  "  0000000100000000-000000017fffffff (prio 0, ram): pc.ram @00000000c0000000\r\n"
  "\r\n";

static void
check_translations (VmceRamLayout *layout)
{
  guint n = vmce_ram_layout_get_n_ranges (layout);

  for (guint i = 0; i < n; i++) {
    const VmceRamRange *r = vmce_ram_layout_get_range (layout, i);
    const guint64 probes[] = { r->gpa, r->gpa + r->size / 2, r->gpa + r->size - 1 };

    g_assert (r->size > 0);
    g_assert (r->block != NULL);
    g_assert (r->gpa + (r->size - 1) >= r->gpa);
    if (i > 0) {
      const VmceRamRange *prev = vmce_ram_layout_get_range (layout, i - 1);
      g_assert (prev->gpa + (prev->size - 1) < r->gpa);
    }
    for (guint p = 0; p < G_N_ELEMENTS (probes); p++) {
      const VmceRamRange *found = NULL;
      const VmceRamRange *back_range = NULL;
      const gchar *block = NULL;
      guint64 hva = 0, back = 0, back_hva = 0, offset = 0;

      if (!vmce_ram_layout_gpa_to_hva (layout, probes[p], &hva, &found))
        continue;
      g_assert (found == r);
      /* every mapped HVA maps back, to this GPA or a lower alias of it */
      g_assert (vmce_ram_layout_hva_to_gpa (layout, hva, &back, &back_range));
      g_assert (back <= probes[p]);
      g_assert (g_strcmp0 (back_range->block, r->block) == 0);
      g_assert (vmce_ram_layout_gpa_to_hva (layout, back, &back_hva, NULL));
      g_assert (back_hva == hva);
      g_assert (vmce_ram_layout_hva_to_block (layout, hva, &block, &offset));
      g_assert (g_strcmp0 (block, r->block) == 0);
      g_assert (offset == r->offset + (probes[p] - r->gpa));
    }
    /* just past the range: another range or nothing */
    if (r->gpa + (r->size - 1) != G_MAXUINT64) {
      const VmceRamRange *next = NULL;
      if (vmce_ram_layout_gpa_to_hva (layout, r->gpa + r->size, NULL, &next))
        g_assert (next != r);
    }
  }
}

/* answer gpa2hva for every block as QEMU would, with made-up mappings */
static void
resolve_blocks (VmceRamLayout *layout)
{
  g_autoptr(GPtrArray) blocks = vmce_ram_layout_dup_unresolved_blocks (layout);
  guint64 next_hva = G_GUINT64_CONSTANT (0x7f0000000000);

  for (guint i = 0; i < blocks->len; i++) {
    const gchar *block = g_ptr_array_index (blocks, i);
    g_autoptr(GError) error = NULL;
    g_autofree gchar *answer = NULL;
    guint64 gpa = 0, extent = 0, hva = 0;
    const VmceRamRange *r = NULL;

    g_assert (vmce_ram_layout_probe_gpa (layout, block, &gpa));
    g_assert (vmce_ram_layout_get_block_extent (layout, block, &extent));
    /* the probe GPA is in one of the block's ranges */
    for (guint j = 0; j < vmce_ram_layout_get_n_ranges (layout); j++) {
      const VmceRamRange *c = vmce_ram_layout_get_range (layout, j);
      if (gpa >= c->gpa && gpa - c->gpa < c->size)
        r = c;
    }
    g_assert (r != NULL);
    g_assert (g_strcmp0 (r->block, block) == 0);
    answer = g_strdup_printf ("Host virtual address for 0x%" G_GINT64_MODIFIER "x (%s) is 0x%"
                              G_GINT64_MODIFIER "x\r\n", gpa, block,
                              next_hva + r->offset + (gpa - r->gpa));
    if (!vmce_ram_layout_set_hva_from_gpa2hva (layout, gpa, answer, &error)) {
      /* only a mapping that would not fit below 2^64 may fail */
      g_assert (error != NULL);
      break;
    }
    g_assert (vmce_ram_layout_get_block_hva (layout, block, &hva));
    g_assert (hva == next_hva);
    if (extent > G_MAXUINT64 - next_hva - 0x1000)
      break;
    next_hva += extent + 0x1000;
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autofree gchar *text = g_strndup ((const gchar *) data, size);
  g_autoptr(VmceRamLayout) layout = vmce_ram_layout_new ();
  g_autoptr(VmceRamLayout) known = vmce_ram_layout_new ();
  g_autoptr(GError) error = NULL;
  const guint64 gpas[] = { 0x100000, 0xe0000, G_GUINT64_CONSTANT (0x100000000) };

  /* as mtree output */
  if (vmce_ram_layout_parse_mtree (layout, text, &error)) {
    g_assert (vmce_ram_layout_get_n_ranges (layout) > 0);
    resolve_blocks (layout);
    check_translations (layout);
    /* a failed parse must leave all this in place */
    g_clear_error (&error);
    {
      guint n = vmce_ram_layout_get_n_ranges (layout);
      g_assert (!vmce_ram_layout_parse_mtree (layout, "FlatView #0\r\n", &error));
      g_assert (vmce_ram_layout_get_n_ranges (layout) == n);
    }
  } else {
    g_assert (error != NULL);
    g_assert (vmce_ram_layout_get_n_ranges (layout) == 0);
  }
  g_clear_error (&error);

  /* as a query-ram-layout answer */
  {
    g_autoptr(JsonNode) node = json_from_string (text, NULL);
    g_autoptr(VmceRamLayout) qmp = NULL;

    if (node != NULL) {
      qmp = vmce_ram_layout_new_from_qmp (node, &error);
      if (qmp != NULL) {
        g_assert (vmce_ram_layout_is_complete (qmp));
        check_translations (qmp);
      } else {
        g_assert (error != NULL);
      }
      g_clear_error (&error);
    }
  }

  /* as a gpa2hva answer */
  g_assert (vmce_ram_layout_parse_mtree (known, pc_5g_memory_view, &error));
  for (guint i = 0; i < G_N_ELEMENTS (gpas); i++) {
    if (vmce_ram_layout_set_hva_from_gpa2hva (known, gpas[i], text, &error))
      check_translations (known);
    else
      g_assert (error != NULL);
    g_clear_error (&error);
  }
  return 0;
}
