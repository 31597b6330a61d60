/*
 * RAM layout from `info mtree -f` and `gpa2hva`. The inputs in data/ were
 * recorded from QEMU 7.2 (data/mtree-*.cmdline.txt has each command line);
 * the gpa2hva files hold QEMU's answers for the first and last byte of
 * every RAM/ROM range of the "memory" view, so translations are checked
 * against what QEMU itself says.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <string.h>

#include "hugepage-loss.h"
#include "ram-layout.h"

typedef struct {
  guint64 gpa;
  gchar *block;
  guint64 hva;
  gchar *line; /* as QEMU sent it, with "\r\n" */
} Answer;

static void
answer_clear (Answer *a)
{
  g_free (a->block);
  g_free (a->line);
}

static gchar *
load_data (const gchar *name, const gchar *suffix)
{
  g_autofree gchar *base = g_strdup_printf ("mtree-%s%s", name, suffix);
  g_autofree gchar *path = g_test_build_filename (G_TEST_DIST, "data", base, NULL);
  g_autoptr(GError) error = NULL;
  gchar *text = NULL;

  g_file_get_contents (path, &text, NULL, &error);
  g_assert_no_error (error);
  return text;
}

static GArray *
load_answers (const gchar *name)
{
  g_autofree gchar *text = load_data (name, ".gpa2hva.txt");
  g_autoptr(GRegex) re = g_regex_new ("^Host virtual address for 0x([0-9a-f]+) \\((.+)\\) is 0x([0-9a-f]+)\r$",
                                      0, 0, NULL);
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  GArray *answers = g_array_new (FALSE, TRUE, sizeof (Answer));

  g_array_set_clear_func (answers, (GDestroyNotify) answer_clear);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_autoptr(GMatchInfo) m = NULL;
    g_autofree gchar *gpa = NULL;
    g_autofree gchar *hva = NULL;
    Answer a = { 0 };

    if (lines[i][0] == '\0')
      continue;
    g_assert_true (g_regex_match (re, lines[i], 0, &m));
    gpa = g_match_info_fetch (m, 1);
    hva = g_match_info_fetch (m, 3);
    a.gpa = g_ascii_strtoull (gpa, NULL, 16);
    a.hva = g_ascii_strtoull (hva, NULL, 16);
    a.block = g_match_info_fetch (m, 2);
    a.line = g_strdup_printf ("%s\n", lines[i]);
    g_array_append_val (answers, a);
  }
  g_assert_cmpuint (answers->len, >, 0);
  return answers;
}

static const Answer *
find_answer (GArray *answers, guint64 gpa)
{
  for (guint i = 0; i < answers->len; i++) {
    if (g_array_index (answers, Answer, i).gpa == gpa)
      return &g_array_index (answers, Answer, i);
  }
  return NULL;
}

/* what vmced does: one gpa2hva per block, at the GPA the layout asks for */
static void
resolve_blocks (VmceRamLayout *layout, GArray *answers)
{
  g_autoptr(GPtrArray) blocks = vmce_ram_layout_dup_unresolved_blocks (layout);

  g_assert_cmpuint (blocks->len, >, 0);
  g_assert_false (vmce_ram_layout_is_complete (layout));
  for (guint i = 0; i < blocks->len; i++) {
    const gchar *block = g_ptr_array_index (blocks, i);
    g_autoptr(GError) error = NULL;
    const Answer *a;
    guint64 gpa = 0;

    g_assert_true (vmce_ram_layout_probe_gpa (layout, block, &gpa));
    a = find_answer (answers, gpa);
    g_assert_nonnull (a);
    g_assert_cmpstr (a->block, ==, block);
    g_assert_true (vmce_ram_layout_set_hva_from_gpa2hva (layout, gpa, a->line, &error));
    g_assert_no_error (error);
  }
  g_assert_true (vmce_ram_layout_is_complete (layout));
  g_clear_pointer (&blocks, g_ptr_array_unref);
  blocks = vmce_ram_layout_dup_unresolved_blocks (layout);
  g_assert_cmpuint (blocks->len, ==, 0);
}

static VmceRamLayout *
load_layout (const gchar *name, GArray **answers_out)
{
  g_autofree gchar *text = load_data (name, ".txt");
  g_autoptr(VmceRamLayout) layout = vmce_ram_layout_new ();
  g_autoptr(GArray) answers = load_answers (name);
  g_autoptr(GError) error = NULL;

  g_assert_true (vmce_ram_layout_parse_mtree (layout, text, &error));
  g_assert_no_error (error);
  resolve_blocks (layout, answers);
  if (answers_out != NULL)
    *answers_out = g_steal_pointer (&answers);
  return g_steal_pointer (&layout);
}

static void
assert_gpa (VmceRamLayout *layout, guint64 gpa, const gchar *block, guint64 offset, gboolean rom)
{
  const VmceRamRange *r = NULL;
  guint64 hva = 0, base = 0, back = 0;

  g_assert_true (vmce_ram_layout_gpa_to_hva (layout, gpa, &hva, &r));
  g_assert_nonnull (r);
  g_assert_cmpstr (r->block, ==, block);
  g_assert_cmphex (r->offset + (gpa - r->gpa), ==, offset);
  g_assert_cmpint (r->rom, ==, rom);
  g_assert_true (vmce_ram_layout_get_block_hva (layout, block, &base));
  g_assert_cmphex (hva, ==, base + offset);
  /* without aliases the way back gives the same GPA */
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, hva, &back, NULL));
  g_assert_cmphex (back, <=, gpa);
}

static void
assert_not_ram (VmceRamLayout *layout, guint64 gpa)
{
  const VmceRamRange *r = NULL;
  guint64 hva = 0x1234;

  g_assert_false (vmce_ram_layout_gpa_to_hva (layout, gpa, &hva, &r));
  g_assert_null (r);
  g_assert_cmphex (hva, ==, 0x1234);
}

/* ---- every recording: the layout agrees with QEMU's own gpa2hva ---- */

static void
test_ram_layout_recording (gconstpointer data)
{
  const gchar *name = data;
  g_autoptr(GArray) answers = NULL;
  g_autoptr(VmceRamLayout) layout = load_layout (name, &answers);
  g_autofree gchar *text = load_data (name, ".txt");
  g_autofree gchar *errors = load_data (name, ".gpa2hva-errors.txt");
  g_auto(GStrv) error_lines = g_strsplit (errors, "\n", -1);
  g_autoptr(GPtrArray) unresolved = NULL;
  g_autoptr(GError) error = NULL;
  guint n = vmce_ram_layout_get_n_ranges (layout);

  /* sorted, disjoint, each range's bytes translate both ways */
  g_assert_cmpuint (n, >, 0);
  for (guint i = 0; i < n; i++) {
    const VmceRamRange *r = vmce_ram_layout_get_range (layout, i);
    guint64 extent = 0;

    g_assert_cmpuint (r->size, >, 0);
    g_assert_nonnull (r->block);
    if (i > 0) {
      const VmceRamRange *prev = vmce_ram_layout_get_range (layout, i - 1);
      g_assert_cmphex (prev->gpa + prev->size, <=, r->gpa);
    }
    g_assert_true (vmce_ram_layout_get_block_extent (layout, r->block, &extent));
    g_assert_cmphex (r->offset + r->size, <=, extent);
    assert_gpa (layout, r->gpa, r->block, r->offset, r->rom);
    assert_gpa (layout, r->gpa + r->size - 1, r->block, r->offset + r->size - 1, r->rom);
    /* one past the end is the next range or nothing */
    if (i + 1 == n || vmce_ram_layout_get_range (layout, i + 1)->gpa != r->gpa + r->size)
      assert_not_ram (layout, r->gpa + r->size);
    if (r->gpa > 0 && (i == 0 || vmce_ram_layout_get_range (layout, i - 1)->gpa +
                                         vmce_ram_layout_get_range (layout, i - 1)->size != r->gpa))
      assert_not_ram (layout, r->gpa - 1);
  }

  /* QEMU's answers for the first and last byte of every range */
  for (guint i = 0; i < answers->len; i++) {
    const Answer *a = &g_array_index (answers, Answer, i);
    const VmceRamRange *r = NULL;
    const gchar *block = NULL;
    guint64 hva = 0, gpa = 0, lowest = a->gpa, offset = 0;

    g_assert_true (vmce_ram_layout_gpa_to_hva (layout, a->gpa, &hva, &r));
    g_assert_cmphex (hva, ==, a->hva);
    g_assert_cmpstr (r->block, ==, a->block);
    /* an HVA mapped at several GPAs (aliases) gives the lowest */
    for (guint j = 0; j < answers->len; j++) {
      const Answer *b = &g_array_index (answers, Answer, j);
      if (b->hva == a->hva)
        lowest = MIN (lowest, b->gpa);
    }
    r = NULL;
    g_assert_true (vmce_ram_layout_hva_to_gpa (layout, a->hva, &gpa, &r));
    g_assert_cmphex (gpa, ==, lowest);
    g_assert_cmpstr (r->block, ==, a->block);
    g_assert_true (vmce_ram_layout_hva_to_block (layout, a->hva, &block, &offset));
    g_assert_cmpstr (block, ==, a->block);
    /* the same answer again is accepted, it changes nothing */
    g_assert_true (vmce_ram_layout_set_hva_from_gpa2hva (layout, a->gpa, a->line, &error));
    g_assert_no_error (error);
  }

  /* MMIO: QEMU says "not RAM", and so does the layout */
  for (guint i = 0; error_lines[i] != NULL; i++) {
    const gchar *at;
    guint64 gpa;

    if (error_lines[i][0] == '\0')
      continue;
    at = strstr (error_lines[i], "address 0x");
    g_assert_nonnull (at);
    gpa = g_ascii_strtoull (at + strlen ("address 0x"), NULL, 16);
    assert_not_ram (layout, gpa);
    g_assert_false (vmce_ram_layout_set_hva_from_gpa2hva (layout, gpa, error_lines[i], &error));
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
    g_assert_nonnull (strstr (error->message, "is not RAM"));
    g_clear_error (&error);
  }
  g_assert_true (vmce_ram_layout_is_complete (layout));

  /* a new mtree forgets the HVAs: a block name may be a new mapping now */
  g_assert_true (vmce_ram_layout_parse_mtree (layout, text, &error));
  g_assert_no_error (error);
  g_assert_false (vmce_ram_layout_is_complete (layout));
  unresolved = vmce_ram_layout_dup_unresolved_blocks (layout);
  g_assert_cmpuint (unresolved->len, >, 0);
  g_assert_false (vmce_ram_layout_gpa_to_hva (layout, vmce_ram_layout_get_range (layout, 0)->gpa,
                                              NULL, NULL));
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, g_array_index (answers, Answer, 0).hva,
                                              NULL, NULL));
}

/* ---- what each machine looks like ---- */

static void
assert_blocks (VmceRamLayout *layout, const gchar *const *expected)
{
  guint n = 0;

  /* distinct block names in GPA order of their first range */
  for (guint i = 0; i < vmce_ram_layout_get_n_ranges (layout); i++) {
    const gchar *block = vmce_ram_layout_get_range (layout, i)->block;
    gboolean seen = FALSE;
    for (guint j = 0; j < n; j++)
      seen |= g_strcmp0 (expected[j], block) == 0;
    if (!seen) {
      g_assert_cmpstr (block, ==, expected[n]);
      n++;
    }
  }
  g_assert_null (expected[n]);
}

static void
test_ram_layout_pc_512m (void)
{
  g_autoptr(VmceRamLayout) layout = load_layout ("pc-512m", NULL);
  const gchar *blocks[] = { "pc.ram", "pc.rom", "pc.bios", NULL };
  const VmceRamRange *r = NULL;
  guint64 gpa = 0, base = 0, extent = 0, offset = 0, hva = 0;
  const gchar *block = NULL;

  assert_blocks (layout, blocks);
  g_assert_cmpuint (vmce_ram_layout_get_n_ranges (layout), ==, 5);
  /* before the firmware ran, PAM leaves 0xc0000-0xfffff to pc.rom and the BIOS */
  assert_gpa (layout, 0x0, "pc.ram", 0x0, FALSE);
  assert_gpa (layout, 0xbffff, "pc.ram", 0xbffff, FALSE);
  assert_gpa (layout, 0xc0000, "pc.rom", 0x0, TRUE);
  assert_gpa (layout, 0xe0000, "pc.bios", 0x20000, TRUE);
  assert_gpa (layout, 0x100000, "pc.ram", 0x100000, FALSE);
  assert_gpa (layout, 0x1fffffff, "pc.ram", 0x1fffffff, FALSE);
  assert_not_ram (layout, 0x20000000);
  assert_not_ram (layout, 0xfffbffff);
  assert_gpa (layout, 0xfffc0000, "pc.bios", 0x0, TRUE);
  assert_gpa (layout, 0xffffffff, "pc.bios", 0x3ffff, TRUE);
  assert_not_ram (layout, G_GUINT64_CONSTANT (0x100000000));
  assert_not_ram (layout, G_MAXUINT64);

  /* the main range is the one to ask about */
  g_assert_true (vmce_ram_layout_probe_gpa (layout, "pc.ram", &gpa));
  g_assert_cmphex (gpa, ==, 0x100000);
  g_assert_false (vmce_ram_layout_probe_gpa (layout, "nope", &gpa));
  g_assert_true (vmce_ram_layout_get_block_extent (layout, "pc.ram", &extent));
  g_assert_cmphex (extent, ==, 0x20000000);
  g_assert_true (vmce_ram_layout_get_block_extent (layout, "pc.bios", &extent));
  g_assert_cmphex (extent, ==, 0x40000);
  g_assert_false (vmce_ram_layout_get_block_hva (layout, "nope", &base));

  /* pc.ram 0xc0000-0xfffff: part of the block, mapped at no GPA */
  g_assert_true (vmce_ram_layout_get_block_hva (layout, "pc.ram", &base));
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, base + 0xc0000, &gpa, &r));
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, base + 0xfffff, &gpa, &r));
  g_assert_null (r);
  g_assert_true (vmce_ram_layout_hva_to_block (layout, base + 0xc0000, &block, &offset));
  g_assert_cmpstr (block, ==, "pc.ram");
  g_assert_cmphex (offset, ==, 0xc0000);
  /* around the hole */
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + 0xbffff, &gpa, NULL));
  g_assert_cmphex (gpa, ==, 0xbffff);
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + 0x100000, &gpa, NULL));
  g_assert_cmphex (gpa, ==, 0x100000);
  /* past the end of the block */
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + 0x1fffffff, &gpa, NULL));
  g_assert_cmphex (gpa, ==, 0x1fffffff);
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, base + 0x20000000, &gpa, NULL));
  g_assert_false (vmce_ram_layout_hva_to_block (layout, base + 0x20000000, &block, &offset));
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, base - 1, &gpa, NULL));
  g_assert_false (vmce_ram_layout_hva_to_block (layout, base - 1, &block, &offset));
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, 0, &gpa, NULL));
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, G_MAXUINT64, &gpa, NULL));

  /* the BIOS is mapped twice: its last 128 KiB at 0xe0000 and 0xfffe0000 */
  g_assert_true (vmce_ram_layout_get_block_hva (layout, "pc.bios", &base));
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + 0x3ffff, &gpa, &r));
  g_assert_cmphex (gpa, ==, 0xfffff);
  g_assert_true (r->rom);
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + 0x20000, &gpa, NULL));
  g_assert_cmphex (gpa, ==, 0xe0000);
  /* only once below 0x20000 */
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + 0x1ffff, &gpa, NULL));
  g_assert_cmphex (gpa, ==, 0xfffdffff);
  g_assert_true (vmce_ram_layout_gpa_to_hva (layout, 0xfffe0000, &hva, NULL));
  g_assert_cmphex (hva, ==, base + 0x20000);
}

/* What a guest loses with a 2 MiB host page: the first one of pc.ram holds
 * the hole at 0xc0000-0xfffff (ROM, at no GPA of pc.ram), so 448 of its
 * 512 pages are guest RAM; the next is all RAM. A 4 KiB page, or an lsb no
 * x86 page has, is no huge page. */
static void
test_ram_layout_guest_pages (void)
{
  g_autoptr(VmceRamLayout) layout = load_layout ("pc-512m", NULL);
  guint64 base = 0;
  g_autoptr(GArray) first = NULL;
  g_autoptr(GArray) second = NULL;
  g_autoptr(GArray) none = NULL;

  g_assert_true (vmce_ram_layout_get_block_hva (layout, "pc.ram", &base));
  /* from anywhere inside it */
  first = vmce_hugepage_loss_pages (layout, base + 0x123456, 21);
  g_assert_cmpuint (first->len, ==, 448);
  g_assert_cmphex (g_array_index (first, VmceGuestPage, 0).gpa, ==, 0);
  g_assert_cmphex (g_array_index (first, VmceGuestPage, 0).hva, ==, base);
  g_assert_cmphex (g_array_index (first, VmceGuestPage, 191).gpa, ==, 0xbf000);
  g_assert_cmphex (g_array_index (first, VmceGuestPage, 192).gpa, ==, 0x100000);
  g_assert_cmphex (g_array_index (first, VmceGuestPage, 447).gpa, ==, 0x1ff000);
  for (guint i = 1; i < first->len; i++)
    g_assert_cmphex (g_array_index (first, VmceGuestPage, i).gpa, >, g_array_index (first, VmceGuestPage, i - 1).gpa);
  second = vmce_ram_layout_guest_pages (layout, base + 0x200000, 0x200000);
  g_assert_cmpuint (second->len, ==, 512);
  g_assert_cmphex (g_array_index (second, VmceGuestPage, 511).hva, ==, base + 0x3ff000);
  /* past the end of the block: nothing */
  none = vmce_ram_layout_guest_pages (layout, base + 0x20000000, 0x200000);
  g_assert_cmpuint (none->len, ==, 0);
  g_clear_pointer (&none, g_array_unref);
  none = vmce_hugepage_loss_pages (layout, base, 12);
  g_assert_cmpuint (none->len, ==, 0);
  g_clear_pointer (&none, g_array_unref);
  none = vmce_hugepage_loss_pages (layout, base, 31);
  g_assert_cmpuint (none->len, ==, 0);
  g_clear_pointer (&none, g_array_unref);
  none = vmce_hugepage_loss_pages (NULL, base, 21);
  g_assert_cmpuint (none->len, ==, 0);
}

static void
test_ram_layout_pc_512m_fw (void)
{
  g_autoptr(VmceRamLayout) layout = load_layout ("pc-512m-fw", NULL);
  const gchar *blocks[] = { "pc.ram", "pc.bios", NULL };
  guint64 base = 0, gpa = 0;

  /* SeaBIOS has set PAM: below 1 MiB is all pc.ram now, partly read-only */
  assert_blocks (layout, blocks);
  g_assert_cmpuint (vmce_ram_layout_get_n_ranges (layout), ==, 6);
  assert_gpa (layout, 0xc2fff, "pc.ram", 0xc2fff, FALSE);
  assert_gpa (layout, 0xc3000, "pc.ram", 0xc3000, TRUE);
  assert_gpa (layout, 0xe7fff, "pc.ram", 0xe7fff, TRUE);
  assert_gpa (layout, 0xe8000, "pc.ram", 0xe8000, FALSE);
  assert_gpa (layout, 0xf0000, "pc.ram", 0xf0000, TRUE);
  assert_gpa (layout, 0xfffff, "pc.ram", 0xfffff, TRUE);
  assert_gpa (layout, 0x100000, "pc.ram", 0x100000, FALSE);
  g_assert_true (vmce_ram_layout_get_block_hva (layout, "pc.ram", &base));
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + 0xd0000, &gpa, NULL));
  g_assert_cmphex (gpa, ==, 0xd0000);
}

static void
check_5g_split (const gchar *name, const gchar *ram, guint64 below_4g)
{
  g_autoptr(VmceRamLayout) layout = load_layout (name, NULL);
  const gchar *blocks[] = { ram, "pc.rom", "pc.bios", NULL };
  const guint64 above = G_GUINT64_CONSTANT (0x100000000);
  const guint64 above_size = G_GUINT64_CONSTANT (0x140000000) - below_4g;
  guint64 base = 0, extent = 0, gpa = 0, hva = 0;
  const gchar *block = NULL;

  assert_blocks (layout, blocks);
  assert_gpa (layout, below_4g - 1, ram, below_4g - 1, FALSE);
  /* the PCI hole, with the IOAPIC, HPET and MSI MMIO in it */
  assert_not_ram (layout, below_4g);
  assert_not_ram (layout, 0xfec00000);
  assert_not_ram (layout, 0xfed00000);
  assert_not_ram (layout, 0xfee00000);
  assert_not_ram (layout, 0xfffbffff);
  /* above 4 GiB: the rest of the same block, at offset below_4g */
  assert_gpa (layout, above, ram, below_4g, FALSE);
  assert_gpa (layout, above + above_size - 1, ram, below_4g + above_size - 1, FALSE);
  assert_not_ram (layout, above + above_size);
  g_assert_true (vmce_ram_layout_get_block_extent (layout, ram, &extent));
  g_assert_cmphex (extent, ==, G_GUINT64_CONSTANT (0x140000000));

  g_assert_true (vmce_ram_layout_get_block_hva (layout, ram, &base));
  g_assert_true (vmce_ram_layout_gpa_to_hva (layout, above + 0x1234, &hva, NULL));
  g_assert_cmphex (hva, ==, base + below_4g + 0x1234);
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + below_4g, &gpa, NULL));
  g_assert_cmphex (gpa, ==, above);
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + below_4g - 1, &gpa, NULL));
  g_assert_cmphex (gpa, ==, below_4g - 1);
  g_assert_true (vmce_ram_layout_hva_to_block (layout, base + extent - 1, &block, NULL));
  g_assert_false (vmce_ram_layout_hva_to_block (layout, base + extent, &block, NULL));
}

static void
test_ram_layout_pc_5g (void)
{
  /* i440fx: 3 GiB below 4 GiB */
  check_5g_split ("pc-5g", "pc.ram", 0xc0000000);
}

static void
test_ram_layout_kvm_pc_5g (void)
{
  /* the same under KVM, where QEMU marks ranges with a memslot " KVM" */
  check_5g_split ("kvm-pc-5g", "pc.ram", 0xc0000000);
}

static void
test_ram_layout_q35_5g (void)
{
  /* q35: 2 GiB below 4 GiB (MMCONFIG at 0xb0000000) */
  check_5g_split ("q35-5g", "pc.ram", 0x80000000);
}

static void
test_ram_layout_numa (void)
{
  g_autoptr(VmceRamLayout) layout = load_layout ("pc-numa-5g", NULL);
  const gchar *blocks[] = { "m0", "pc.rom", "pc.bios", "m1", NULL };
  const guint64 above = G_GUINT64_CONSTANT (0x100000000);
  guint64 m0 = 0, m1 = 0, extent = 0, gpa = 0, offset = 0;
  const gchar *block = NULL;

  assert_blocks (layout, blocks);
  assert_gpa (layout, 0x3fffffff, "m0", 0x3fffffff, FALSE);
  assert_gpa (layout, 0x40000000, "m1", 0x0, FALSE);
  assert_gpa (layout, 0xbfffffff, "m1", 0x7fffffff, FALSE);
  assert_not_ram (layout, 0xc0000000);
  assert_gpa (layout, above, "m1", 0x80000000, FALSE);
  assert_gpa (layout, G_GUINT64_CONSTANT (0x17fffffff), "m1", 0xffffffff, FALSE);
  assert_not_ram (layout, G_GUINT64_CONSTANT (0x180000000));
  g_assert_true (vmce_ram_layout_get_block_extent (layout, "m0", &extent));
  g_assert_cmphex (extent, ==, 0x40000000);
  g_assert_true (vmce_ram_layout_get_block_extent (layout, "m1", &extent));
  g_assert_cmphex (extent, ==, G_GUINT64_CONSTANT (0x100000000));

  /* two mappings: each HVA belongs to its own block */
  g_assert_true (vmce_ram_layout_get_block_hva (layout, "m0", &m0));
  g_assert_true (vmce_ram_layout_get_block_hva (layout, "m1", &m1));
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, m1 + 0x80000000, &gpa, NULL));
  g_assert_cmphex (gpa, ==, above);
  g_assert_true (vmce_ram_layout_hva_to_block (layout, m0 + 0xc0000, &block, &offset));
  g_assert_cmpstr (block, ==, "m0");
  g_assert_cmphex (offset, ==, 0xc0000);
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, m0 + 0xc0000, &gpa, NULL));
  g_assert_true (vmce_ram_layout_hva_to_block (layout, m1 + 0xffffffff, &block, &offset));
  g_assert_cmpstr (block, ==, "m1");
  g_assert_cmphex (offset, ==, 0xffffffff);
}

static void
test_ram_layout_dimm (void)
{
  g_autoptr(VmceRamLayout) layout = load_layout ("pc-dimm", NULL);
  const gchar *blocks[] = { "pc.ram", "pc.rom", "pc.bios", "d0", NULL };
  const guint64 above = G_GUINT64_CONSTANT (0x100000000);
  guint64 d0 = 0, gpa = 0;

  /* 1 GiB fits below the hole; the DIMM goes to the hotplug area at 4 GiB */
  assert_blocks (layout, blocks);
  assert_gpa (layout, 0x3fffffff, "pc.ram", 0x3fffffff, FALSE);
  assert_not_ram (layout, 0x40000000);
  assert_gpa (layout, above, "d0", 0x0, FALSE);
  assert_gpa (layout, above + 0x1fffffff, "d0", 0x1fffffff, FALSE);
  assert_not_ram (layout, above + 0x20000000);
  g_assert_true (vmce_ram_layout_get_block_hva (layout, "d0", &d0));
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, d0 + 0x1000, &gpa, NULL));
  g_assert_cmphex (gpa, ==, above + 0x1000);
}

static void
check_shm (const gchar *name)
{
  g_autoptr(VmceRamLayout) layout = load_layout (name, NULL);
  const gchar *blocks[] = { "m0", "pc.rom", "pc.bios", NULL };
  guint64 m0 = 0, gpa = 0;

  assert_blocks (layout, blocks);
  assert_gpa (layout, 0x1fffffff, "m0", 0x1fffffff, FALSE);
  assert_not_ram (layout, 0x20000000);
  /* a file mapping is only page aligned */
  g_assert_true (vmce_ram_layout_get_block_hva (layout, "m0", &m0));
  g_assert_cmphex (m0 & 0xfff, ==, 0);
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, m0 + 0x100000, &gpa, NULL));
  g_assert_cmphex (gpa, ==, 0x100000);
}

static void
test_ram_layout_shm (void)
{
  check_shm ("pc-shm");
  check_shm ("kvm-pc-shm");
}

/* ---- bad mtree text ---- */

/* the first @from after @after, so edits can hit the "memory" view and not
 * the identical SMM view before it */
static gchar *
replace_after (const gchar *text, const gchar *after, const gchar *from, const gchar *to)
{
  const gchar *at = strstr (text, after);

  g_assert_nonnull (at);
  at = strstr (at, from);

  g_assert_nonnull (at);
  return g_strdup_printf ("%.*s%s%s", (int) (at - text), text, to, at + strlen (from));
}

static gchar *
replace_once (const gchar *text, const gchar *from, const gchar *to)
{
  return replace_after (text, "", from, to);
}

static void
assert_parse_fails (VmceRamLayout *layout, const gchar *text, gint code, const gchar *what)
{
  g_autoptr(GError) error = NULL;
  guint n = vmce_ram_layout_get_n_ranges (layout);
  gboolean complete = vmce_ram_layout_is_complete (layout);

  if (g_test_verbose ())
    g_test_message ("%s", what);
  g_assert_false (vmce_ram_layout_parse_mtree (layout, text, &error));
  g_assert_error (error, G_IO_ERROR, code);
  if (g_test_verbose ())
    g_test_message ("  -> %s", error->message);
  /* a failed parse leaves the layout alone */
  g_assert_cmpuint (vmce_ram_layout_get_n_ranges (layout), ==, n);
  g_assert_cmpint (vmce_ram_layout_is_complete (layout), ==, complete);
}

static void
test_ram_layout_bad_mtree (void)
{
  g_autoptr(VmceRamLayout) layout = load_layout ("pc-5g", NULL);
  g_autofree gchar *good = load_data ("pc-5g", ".txt");
  const gchar *ram_line = "  0000000100000000-000000017fffffff (prio 0, ram): pc.ram @00000000c0000000\r\n";
  const struct {
    const gchar *from;
    const gchar *to;
    gint code;
    gboolean anywhere; /* else in the "memory" view */
  } edits[] = {
    /* no view of "memory" (only the SMM view looks like it) */
    { " AS \"memory\", root: system\r\n", "", G_IO_ERROR_NOT_FOUND, TRUE },
    { " AS \"memory\", root: system", " AS \"memory2\", root: system", G_IO_ERROR_NOT_FOUND, TRUE },
    /* two views of "memory" */
    { " AS \"cpu-smm-0\", root: memory", " AS \"memory\", root: memory", G_IO_ERROR_INVALID_DATA, TRUE },
    /* end before start */
    { ram_line, "  0000000100000000-00000000ffffffff (prio 0, ram): pc.ram @00000000c0000000\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* 17 digits */
    { ram_line, "  0000000100000000-1000000017fffffff (prio 0, ram): pc.ram @00000000c0000000\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* offset + size past 2^64 */
    { ram_line, "  0000000100000000-000000017fffffff (prio 0, ram): pc.ram @ffffffffc0000000\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* the whole address space as RAM */
    { ram_line, "  0000000000000000-ffffffffffffffff (prio 0, ram): pc.ram\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* overlapping the previous range */
    { ram_line, "  00000000fffff000-000000017fffffff (prio 0, ram): pc.ram @00000000c0000000\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* missing name, missing kind, bad kind, bad priority */
    { ram_line, "  0000000100000000-000000017fffffff (prio 0, ram): \r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    { ram_line, "  0000000100000000-000000017fffffff (prio 0, ram):\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    { ram_line, "  0000000100000000-000000017fffffff (prio 0): pc.ram\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    { ram_line, "  0000000100000000-000000017fffffff (prio 9999999999, ram): pc.ram\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* a short offset would end up in the name */
    { ram_line, "  0000000100000000-000000017fffffff (prio 0, ram): pc.ram @c0000000\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* upper case is not what QEMU prints */
    { ram_line, "  0000000100000000-000000017FFFFFFF (prio 0, ram): pc.ram @00000000c0000000\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* a line cut short in the middle of the view */
    { ram_line, "  0000000100000000-0000\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* a tab, a NUL-free control character */
    { ram_line, "  0000000100000000-000000017fffffff (prio 0, ram): pc\t.ram\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* a view without its blank line */
    { "  No rendered FlatView\r\n", "  No rendered FlatView\r\nFlatView #9\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* an unknown line */
    { " Root memory region: system\r\n", " Root memory region: system\r\nhello\r\n", G_IO_ERROR_INVALID_DATA, FALSE },
    /* invalid UTF-8 */
    { "pc.ram @00000000c0000000", "pc.r\xff\xfem @00000000c0000000", G_IO_ERROR_INVALID_DATA, FALSE },
  };
  g_autofree gchar *no_ram = NULL;
  g_autofree gchar *truncated = NULL;
  g_autofree gchar *cut = NULL;
  gsize len = strlen (good);

  for (guint i = 0; i < G_N_ELEMENTS (edits); i++) {
    g_autofree gchar *bad = replace_after (good, edits[i].anywhere ? "" : "AS \"memory\"",
                                           edits[i].from, edits[i].to);
    g_autofree gchar *what = g_strdup_printf ("edit %u: '%s'", i, edits[i].to);
    assert_parse_fails (layout, bad, edits[i].code, what);
  }
  assert_parse_fails (layout, "", G_IO_ERROR_INVALID_DATA, "empty");
  assert_parse_fails (layout, "\r\n", G_IO_ERROR_INVALID_DATA, "one newline");
  assert_parse_fails (layout, "unknown command: 'mtree'\r\n", G_IO_ERROR_INVALID_DATA, "HMP error");
  assert_parse_fails (layout, "FlatView #0\r\n", G_IO_ERROR_INVALID_DATA, "title only");
  assert_parse_fails (layout, "FlatView #0\r\n AS \"memory\", root: system\r\n Root memory region: system\r\n"
                      "  No rendered FlatView\r\n\r\n", G_IO_ERROR_NOT_FOUND, "memory not rendered");
  assert_parse_fails (layout, "FlatView #0\r\n AS \"memory\", root: system\r\n Root memory region: system\r\n"
                      "  00000000fec00000-00000000fec00fff (prio 0, i/o): ioapic\r\n\r\n",
                      G_IO_ERROR_NOT_FOUND, "memory without RAM");
  assert_parse_fails (layout, "FlatView #0\r\n AS \"memory\", root: system\r\n Root memory region: system\r\n"
                      "  0000000000000000-ffffffffffffffff (prio 0, ram): pc.ram\r\n\r\n",
                      G_IO_ERROR_INVALID_DATA, "RAM over all 2^64 bytes");
  assert_parse_fails (layout, "FlatView #0\r\n Root memory region: system\r\n\r\n",
                      G_IO_ERROR_INVALID_DATA, "view without address space");
  {
    g_autofree gchar *tail = g_strconcat (good, "\r\n", NULL);
    g_autofree gchar *junk = g_strconcat (good, "info mtree -f\r\n", NULL);
    g_autofree gchar *twice = replace_once (good, "\r\n\r\n", "\r\n\r\n\r\n");
    assert_parse_fails (layout, tail, G_IO_ERROR_INVALID_DATA, "extra blank line at the end");
    assert_parse_fails (layout, junk, G_IO_ERROR_INVALID_DATA, "text after the last view");
    assert_parse_fails (layout, twice, G_IO_ERROR_INVALID_DATA, "two blank lines");
  }
  /* only the I/O view, as the text would be cut after the first view */
  no_ram = g_strndup (good, strstr (good, "\r\n\r\n") - good + 4);
  assert_parse_fails (layout, no_ram, G_IO_ERROR_NOT_FOUND, "first view only");
  /* every truncation of real output fails cleanly, or, when cut exactly
   * between views after "memory", gives the full layout */
  for (gsize cut_len = 0; cut_len < len; cut_len++) {
    g_autoptr(VmceRamLayout) other = vmce_ram_layout_new ();
    g_autoptr(GError) error = NULL;
    g_free (truncated);
    truncated = g_strndup (good, cut_len);
    if (vmce_ram_layout_parse_mtree (other, truncated, &error)) {
      g_assert_cmpuint (vmce_ram_layout_get_n_ranges (other), ==, vmce_ram_layout_get_n_ranges (layout));
      g_assert_true (g_str_has_suffix (truncated, "\r\n\r\n"));
    } else {
      g_assert_nonnull (error);
    }
  }
  /* without the final newline */
  cut = g_strndup (good, len - 1);
  assert_parse_fails (layout, cut, G_IO_ERROR_INVALID_DATA, "no final newline");

  /* "\n" alone (a monitor on a plain pipe) is fine too */
  {
    g_autoptr(VmceRamLayout) other = vmce_ram_layout_new ();
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) parts = g_strsplit (good, "\r\n", -1);
    g_autofree gchar *lf = g_strjoinv ("\n", parts);
    g_assert_true (vmce_ram_layout_parse_mtree (other, lf, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (vmce_ram_layout_get_n_ranges (other), ==, vmce_ram_layout_get_n_ranges (layout));
  }
}

static void
test_ram_layout_kinds (void)
{
  g_autoptr(VmceRamLayout) layout = vmce_ram_layout_new ();
  g_autoptr(GError) error = NULL;
  const VmceRamRange *r;
  /* kinds the recordings do not have: romd (pflash), ramd (VFIO BAR),
   * nv-ram (NVDIMM), a name with spaces, several " KVM" */
  const gchar *text =
    "FlatView #0\r\n"
    " AS \"memory\", root: system\r\n"
    " AS \"cpu-memory-0\", root: system\r\n"
    " Root memory region: system\r\n"
    "  0000000000000000-000000000009ffff (prio 0, ram): pc.ram KVM KVM\r\n"
    "  0000000100000000-000000013fffffff (prio 0, nv-ram): nv0 @0000000000001000 KVM\r\n"
    "  00000001c0000000-00000001c0000fff (prio 1, ramd): 0000:01:00.0 BAR 0 mmaps[0] KVM\r\n"
    "  00000001d0000000-00000001d0000fff (prio 0, i/o): 0000:01:00.0 BAR 0\r\n"
    "  00000001e0000000-00000001e0000fff (prio 0, ram): my ram\r\n"
    "  00000000ffc00000-00000000ffffffff (prio 0, romd): system.flash0\r\n"
    "\r\n";

  /* not sorted: the flash line is out of order */
  g_assert_false (vmce_ram_layout_parse_mtree (layout, text, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  {
    g_autofree gchar *flash = g_strdup ("  00000000ffc00000-00000000ffffffff (prio 0, romd): system.flash0\r\n");
    g_autofree gchar *tmp = replace_once (text, flash, "");
    g_autofree gchar *sorted = replace_once (tmp, "  0000000100000000", "  00000000ffc00000-00000000ffffffff (prio 0, romd): system.flash0\r\n  0000000100000000");
    g_assert_true (vmce_ram_layout_parse_mtree (layout, sorted, &error));
    g_assert_no_error (error);
  }
  g_assert_cmpuint (vmce_ram_layout_get_n_ranges (layout), ==, 4);
  r = vmce_ram_layout_get_range (layout, 0);
  g_assert_cmpstr (r->block, ==, "pc.ram");
  g_assert_false (r->rom);
  r = vmce_ram_layout_get_range (layout, 1);
  g_assert_cmpstr (r->block, ==, "system.flash0");
  g_assert_true (r->rom);
  r = vmce_ram_layout_get_range (layout, 2);
  g_assert_cmpstr (r->block, ==, "nv0");
  g_assert_cmphex (r->offset, ==, 0x1000);
  g_assert_false (r->rom);
  r = vmce_ram_layout_get_range (layout, 3);
  g_assert_cmpstr (r->block, ==, "my ram");

  /* blocks resolved directly */
  g_assert_true (vmce_ram_layout_set_block_hva (layout, "pc.ram", 0x7f0000000000, &error));
  g_assert_no_error (error);
  g_assert_false (vmce_ram_layout_set_block_hva (layout, "nope", 0x7f0000000000, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_clear_error (&error);
  /* overlapping another block's mapping */
  g_assert_false (vmce_ram_layout_set_block_hva (layout, "nv0", 0x7f0000000000 - 0x1000, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  /* a block that would end past 2^64 */
  g_assert_false (vmce_ram_layout_set_block_hva (layout, "nv0", G_MAXUINT64 - 0x1000, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  /* ending exactly at the top is allowed */
  g_assert_true (vmce_ram_layout_set_block_hva (layout, "my ram", G_MAXUINT64 - 0xfff, &error));
  g_assert_no_error (error);
  {
    guint64 gpa = 0, hva = 0;
    g_assert_true (vmce_ram_layout_hva_to_gpa (layout, G_MAXUINT64, &gpa, NULL));
    g_assert_cmphex (gpa, ==, G_GUINT64_CONSTANT (0x1e0000fff));
    g_assert_true (vmce_ram_layout_gpa_to_hva (layout, G_GUINT64_CONSTANT (0x1e0000000), &hva, NULL));
    g_assert_cmphex (hva, ==, G_MAXUINT64 - 0xfff);
  }
  g_assert_false (vmce_ram_layout_is_complete (layout));
}

/* the most ranges a layout takes, and lookups still work among them */
static void
test_ram_layout_many_ranges (void)
{
  g_autoptr(VmceRamLayout) layout = vmce_ram_layout_new ();
  g_autoptr(GString) text = g_string_new ("FlatView #0\r\n AS \"memory\", root: system\r\n"
                                          " Root memory region: system\r\n");
  g_autoptr(GError) error = NULL;
  g_autofree gchar *too_many = NULL;
  guint64 gpa = 0, hva = 0;
  const guint64 base = G_GUINT64_CONSTANT (0x7f0000000000);

  /* every other page of the guest, every page of block "ram" */
  for (guint i = 0; i < VMCE_RAM_LAYOUT_MAX_RANGES; i++) {
    g_string_append_printf (text, "  %016" G_GINT64_MODIFIER "x-%016" G_GINT64_MODIFIER "x "
                            "(prio 0, ram): ram @%016" G_GINT64_MODIFIER "x\r\n",
                            (guint64) i * 0x2000, (guint64) i * 0x2000 + 0xfff, (guint64) i * 0x1000);
  }
  too_many = g_strdup_printf ("%s  %016" G_GINT64_MODIFIER "x-%016" G_GINT64_MODIFIER "x "
                              "(prio 0, ram): ram2\r\n\r\n", text->str,
                              (guint64) VMCE_RAM_LAYOUT_MAX_RANGES * 0x2000,
                              (guint64) VMCE_RAM_LAYOUT_MAX_RANGES * 0x2000 + 0xfff);
  g_string_append (text, "\r\n");

  g_assert_false (vmce_ram_layout_parse_mtree (layout, too_many, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  g_assert_true (vmce_ram_layout_parse_mtree (layout, text->str, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (vmce_ram_layout_get_n_ranges (layout), ==, VMCE_RAM_LAYOUT_MAX_RANGES);
  g_assert_true (vmce_ram_layout_set_block_hva (layout, "ram", base, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < VMCE_RAM_LAYOUT_MAX_RANGES; i += 997) {
    g_assert_true (vmce_ram_layout_hva_to_gpa (layout, base + (guint64) i * 0x1000 + 0xfff, &gpa, NULL));
    g_assert_cmphex (gpa, ==, (guint64) i * 0x2000 + 0xfff);
    g_assert_true (vmce_ram_layout_gpa_to_hva (layout, (guint64) i * 0x2000 + 0x10, &hva, NULL));
    g_assert_cmphex (hva, ==, base + (guint64) i * 0x1000 + 0x10);
    g_assert_false (vmce_ram_layout_gpa_to_hva (layout, (guint64) i * 0x2000 + 0x1000, &hva, NULL));
  }
}

/* The message of every way mtree text can fail: it is what a user sees in
 * the log when vmced cannot read the layout */
static void
test_ram_layout_mtree_messages (void)
{
#define HEAD "FlatView #0\r\n AS \"memory\", root: system\r\n Root memory region: system\r\n"
#define RANGE(first, last, rest) "  " first "-" last " (prio 0, " rest "\r\n"
#define RAM0 RANGE ("0000000000000000", "0000000000000fff", "ram): r")
  const struct {
    const gchar *text;
    gint code;
    const gchar *message;
  } bad[] = {
    { "FlatView #0\r\n\xff\r\n", G_IO_ERROR_INVALID_DATA, "mtree output is not UTF-8" },
    { "Flatview #0\r\n", G_IO_ERROR_INVALID_DATA, "not the output of 'info mtree -f'" },
    { HEAD "  0000000000000000-0000000000000fff (prio 0, ram): r", G_IO_ERROR_INVALID_DATA,
      "mtree output is truncated (no final newline)" },
    { "FlatView #0\r\n AS \"mem\001\", root: system\r\n", G_IO_ERROR_INVALID_DATA,
      "line 2: control character in mtree output" },
    { HEAD RAM0 "\r\nFlatView\r\n", G_IO_ERROR_INVALID_DATA, "line 6: expected 'FlatView #n'" },
    { "FlatView #0\r\n Root memory region: system\r\n", G_IO_ERROR_INVALID_DATA,
      "line 2: expected an address space line" },
    { HEAD RAM0 "\r\n" HEAD, G_IO_ERROR_INVALID_DATA,
      "line 7: a second flat view of address space \"memory\"" },
    { HEAD "  garbage\r\n\r\n", G_IO_ERROR_INVALID_DATA, "line 4: not a flat view range" },
    { HEAD "  0000000000000000-0000000000000fff (prio 9999999999, ram): r\r\n\r\n",
      G_IO_ERROR_INVALID_DATA, "line 4: priority 9999999999 is out of range" },
    { HEAD RANGE ("0000000000002000", "0000000000001fff", "ram): r") "\r\n",
      G_IO_ERROR_INVALID_DATA, "line 4: range ends at 0x1fff before it starts" },
    { HEAD RANGE ("0000000000001000", "0000000000002fff", "ram): r")
      RANGE ("0000000000001000", "0000000000001fff", "ram): s") "\r\n",
      G_IO_ERROR_INVALID_DATA, "line 5: range at 0x1000 overlaps or precedes the previous one" },
    { HEAD RANGE ("0000000000000000", "ffffffffffffffff", "ram): r") "\r\n",
      G_IO_ERROR_INVALID_DATA, "line 4: RAM range covers the whole address space" },
    { HEAD RANGE ("0000000000000000", "0000000000000fff", "ram): r @fffffffffffff000") "\r\n",
      G_IO_ERROR_INVALID_DATA, "line 4: offset 0xfffffffffffff000 + size overflows" },
    { HEAD RANGE ("0000000000000000", "0000000000000fff", "ram):  r") "\r\n",
      G_IO_ERROR_INVALID_DATA, "line 4: malformed memory region name ' r'" },
    { HEAD RANGE ("0000000000000000", "0000000000000fff", "ram): r @x") "\r\n",
      G_IO_ERROR_INVALID_DATA, "line 4: malformed memory region name 'r @x'" },
    { HEAD "  No rendered FlatView\r\njunk\r\n", G_IO_ERROR_INVALID_DATA,
      "line 5: text after 'No rendered FlatView'" },
    { HEAD RAM0, G_IO_ERROR_INVALID_DATA, "mtree output is truncated (flat view not terminated)" },
    { "FlatView #0\r\n AS \"I/O\", root: io\r\n Root memory region: io\r\n" RAM0 "\r\n",
      G_IO_ERROR_NOT_FOUND, "no flat view of address space \"memory\"" },
    { HEAD RANGE ("0000000000000000", "0000000000000fff", "i/o): r") "\r\n", G_IO_ERROR_NOT_FOUND,
      "the flat view of address space \"memory\" has no RAM" },
  };
#undef RAM0
#undef RANGE
#undef HEAD

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(VmceRamLayout) layout = vmce_ram_layout_new ();
    g_autoptr(GError) error = NULL;

    g_assert_false (vmce_ram_layout_parse_mtree (layout, bad[i].text, &error));
    g_assert_error (error, G_IO_ERROR, bad[i].code);
    g_assert_cmpstr (error->message, ==, bad[i].message);
  }
}

/* What a newer QEMU may print is skipped and said, each once, and what
 * vmced knows of the system view is read as before; the system view
 * itself stays strict */
static void
test_ram_layout_mtree_newer (void)
{
  g_autoptr(VmceRamLayout) layout = load_layout ("pc-5g", NULL);
  g_autofree gchar *good = load_data ("pc-5g", ".txt");
  g_autofree gchar *a = replace_after (good, "AS \"memory\"", " Root memory region: system\r\n",
                                       " Dispatch: 5 sections, 3 nodes\r\n Root memory region: system\r\n");
  g_autofree gchar *b = replace_after (a, "AS \"memory\"",
                                       "  0000000100000000-000000017fffffff (prio 0, ram): pc.ram @00000000c0000000\r\n",
                                       "  0000000100000000-000000017fffffff (prio 0, ram): pc.ram @00000000c0000000\r\n"
                                       "  0000000180000000-00000001800fffff (prio 0, container): bus\r\n"
                                       "  0000000180100000-00000001801fffff (prio 0, container): bus2\r\n");
  /* the I/O view (address space "I/O") is not used: a line there it cannot read is skipped */
  g_autofree gchar *text = replace_after (b, "AS \"I/O\"", "  ", "  something new\r\n  ");
  g_autoptr(GError) error = NULL;
  GPtrArray *skipped;
  guint n;

  g_assert_cmpuint (vmce_ram_layout_get_skipped (layout)->len, ==, 0);
  n = vmce_ram_layout_get_n_ranges (layout);
  g_assert_true (vmce_ram_layout_parse_mtree (layout, text, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (vmce_ram_layout_get_n_ranges (layout), ==, n);
  /* the RAM above 4 GiB is there, the container is not (the parse
   * forgets the blocks' host addresses: only the ranges are compared) */
  for (guint i = 0; i < n; i++) {
    const VmceRamRange *r = vmce_ram_layout_get_range (layout, i);
    g_assert_cmphex (r->gpa + r->size, <=, 0x180000000);
    if (r->gpa == 0x100000000)
      g_assert_cmpstr (r->block, ==, "pc.ram");
  }
  skipped = vmce_ram_layout_get_skipped (layout);
  g_assert_cmpuint (skipped->len, ==, 3);
  /* in the order of the text: the I/O view comes first */
  g_assert_true (g_str_has_prefix (g_ptr_array_index (skipped, 0),
                                   "lines it does not read in the view of address space \"I/O\" "
                                   "(first: line "));
  g_assert_true (g_str_has_prefix (g_ptr_array_index (skipped, 1),
                                   "view header lines ' Dispatch...', which it does not know"));
  g_assert_true (g_str_has_prefix (g_ptr_array_index (skipped, 2),
                                   "ranges of region type 'container', which it does not know"));
  /* a parse with nothing unknown says nothing */
  g_assert_true (vmce_ram_layout_parse_mtree (layout, good, &error));
  g_assert_cmpuint (vmce_ram_layout_get_skipped (layout)->len, ==, 0);
  /* in the system view a line it cannot read still fails the parse */
  {
    g_autofree gchar *bad = replace_after (good, "AS \"memory\"", "(prio 0, ram): pc.ram @00000000c0000000",
                                           "(prio 0 ram): pc.ram @00000000c0000000");
    assert_parse_fails (layout, bad, G_IO_ERROR_INVALID_DATA, "a range line without its comma");
  }
}

/* ---- bad gpa2hva answers ---- */

static void
test_ram_layout_bad_gpa2hva (void)
{
  g_autoptr(VmceRamLayout) layout = vmce_ram_layout_new ();
  g_autofree gchar *text = load_data ("pc-5g", ".txt");
  g_autoptr(GError) error = NULL;
  const struct {
    guint64 gpa;
    const gchar *answer;
    gint code;
  } bad[] = {
    { 0x100000, "", G_IO_ERROR_INVALID_DATA },
    { 0x100000, "\r\n", G_IO_ERROR_INVALID_DATA },
    /* RAM in the layout, not mapped now: remapped since (PAM) */
    { 0x100000, "No memory is mapped at address 0x100000\r\n", G_IO_ERROR_BUSY },
    { 0x100000, "Memory at address 0x100000 is not RAM\r\n", G_IO_ERROR_BUSY },
    { 0x100000, "Host virtual address for 0x100000 (pc.ram) is (nil)\r\n", G_IO_ERROR_INVALID_DATA },
    { 0x100000, "Host virtual address for 0x100000 (pc.ram) is 0x\r\n", G_IO_ERROR_INVALID_DATA },
    { 0x100000, "Host virtual address for 0x100000 (pc.ram) is 0x17f00000000000000\r\n", G_IO_ERROR_INVALID_DATA },
    { 0x100000, "Host virtual address for 0x100000 (pc.ram) is 0x7f0000000000 \r\n", G_IO_ERROR_INVALID_DATA },
    { 0x100000, "Host virtual address for 0x100000 (pc.ram) is 0x7f0000000000\r\nmore\r\n", G_IO_ERROR_INVALID_DATA },
    { 0x100000, "Host virtual address for 0x100000 (pc.ram) is 0x7F0000000000\r\n", G_IO_ERROR_INVALID_DATA },
    { 0x100000, "Host virtual address for 0x100000 () is 0x7f0000000000\r\n", G_IO_ERROR_INVALID_DATA },
    /* the answer is for another GPA */
    { 0x100000, "Host virtual address for 0x100001 (pc.ram) is 0x7f0000000000\r\n", G_IO_ERROR_INVALID_DATA },
    /* the guest remapped the address between mtree and gpa2hva */
    { 0x100000, "Host virtual address for 0x100000 (pc.rom) is 0x7f0000000000\r\n", G_IO_ERROR_BUSY },
    /* not RAM in the layout */
    { 0xc0000000, "Host virtual address for 0xc0000000 (pc.ram) is 0x7f0000000000\r\n", G_IO_ERROR_NOT_FOUND },
    /* base would be below 0 */
    { 0x100000, "Host virtual address for 0x100000 (pc.ram) is 0xfffff\r\n", G_IO_ERROR_INVALID_DATA },
    /* block end past 2^64 */
    { 0x100000, "Host virtual address for 0x100000 (pc.ram) is 0xffffffffffff0000\r\n", G_IO_ERROR_INVALID_DATA },
  };
  guint64 hva = 0;

  g_assert_true (vmce_ram_layout_parse_mtree (layout, text, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    if (g_test_verbose ())
      g_test_message ("answer %u: %s", i, bad[i].answer);
    g_assert_false (vmce_ram_layout_set_hva_from_gpa2hva (layout, bad[i].gpa, bad[i].answer, &error));
    g_assert_error (error, G_IO_ERROR, bad[i].code);
    if (g_test_verbose ())
      g_test_message ("  -> %s", error->message);
    g_clear_error (&error);
    g_assert_false (vmce_ram_layout_get_block_hva (layout, "pc.ram", &hva));
  }
  /* QEMU's text is in the error */
  g_assert_false (vmce_ram_layout_set_hva_from_gpa2hva (layout, 0x100000,
                                                        "No memory is mapped at address 0x100000\r\n",
                                                        &error));
  g_assert_cmpstr (error->message, ==, "unexpected gpa2hva answer: 'No memory is mapped at address 0x100000'");
  g_clear_error (&error);

  /* without "\r\n" is fine; again with a different HVA is not */
  g_assert_true (vmce_ram_layout_set_hva_from_gpa2hva (
      layout, 0x100000, "Host virtual address for 0x100000 (pc.ram) is 0x7f0000100000", &error));
  g_assert_no_error (error);
  g_assert_true (vmce_ram_layout_get_block_hva (layout, "pc.ram", &hva));
  g_assert_cmphex (hva, ==, 0x7f0000000000);
  g_assert_false (vmce_ram_layout_set_hva_from_gpa2hva (
      layout, 0x100000, "Host virtual address for 0x100000 (pc.ram) is 0x7f0000200000\r\n", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  /* the BIOS cannot land inside pc.ram's mapping */
  g_assert_false (vmce_ram_layout_set_hva_from_gpa2hva (
      layout, 0xfffc0000, "Host virtual address for 0xfffc0000 (pc.bios) is 0x7f0100000000\r\n", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  g_assert_true (vmce_ram_layout_set_hva_from_gpa2hva (
      layout, 0xfffc0000, "Host virtual address for 0xfffc0000 (pc.bios) is 0x7f0140000000\r\n", &error));
  g_assert_no_error (error);
}

static void
test_ram_layout_empty (void)
{
  g_autoptr(VmceRamLayout) layout = vmce_ram_layout_new ();
  g_autoptr(GPtrArray) blocks = vmce_ram_layout_dup_unresolved_blocks (layout);
  g_autoptr(GError) error = NULL;
  guint64 v = 0;
  const gchar *block = NULL;

  g_assert_cmpuint (blocks->len, ==, 0);
  g_assert_false (vmce_ram_layout_is_complete (layout));
  g_assert_cmpuint (vmce_ram_layout_get_n_ranges (layout), ==, 0);
  g_assert_false (vmce_ram_layout_gpa_to_hva (layout, 0, &v, NULL));
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, 0, &v, NULL));
  g_assert_false (vmce_ram_layout_hva_to_block (layout, 0, &block, &v));
  g_assert_false (vmce_ram_layout_probe_gpa (layout, "pc.ram", &v));
  g_assert_false (vmce_ram_layout_set_hva_from_gpa2hva (
      layout, 0, "Host virtual address for 0x0 (pc.ram) is 0x7f0000000000\r\n", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  vmce_ram_layout_free (NULL);
}

/* The answer of query-ram-layout (qemu-patches/), recorded from the
 * patched QEMU with -m 512: the same guest as mtree-pc-512m */
static void
test_ram_layout_qmp (void)
{
  g_autofree gchar *path = g_test_build_filename (G_TEST_DIST, "data", "query-ram-layout-pc-512m.json",
                                                  NULL);
  g_autofree gchar *text = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(VmceRamLayout) layout = NULL;
  const VmceRamRange *r = NULL;
  const gchar *block = NULL;
  guint64 v = 0, off = 0;
  const guint64 ram = G_GUINT64_CONSTANT (140046600503296);
  const guint64 bios = G_GUINT64_CONSTANT (140048416636928);

  g_file_get_contents (path, &text, NULL, &error);
  g_assert_no_error (error);
  node = json_from_string (text, &error);
  g_assert_no_error (error);
  layout = vmce_ram_layout_new_from_qmp (node, &error);
  g_assert_no_error (error);
  g_assert_nonnull (layout);
  g_assert_true (vmce_ram_layout_is_complete (layout));
  /* unmapped blocks (vga.vram before the guest maps it, fw_cfg files) are left out */
  g_assert_cmpuint (vmce_ram_layout_get_n_ranges (layout), ==, 5);
  g_assert_true (vmce_ram_layout_gpa_to_hva (layout, 0x100000, &v, &r));
  g_assert_cmphex (v, ==, ram + 0x100000);
  g_assert_cmpstr (r->block, ==, "pc.ram");
  g_assert_false (r->rom);
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, ram + 0x1fffffff, &v, NULL));
  g_assert_cmphex (v, ==, 0x1fffffff);
  /* the hole at 0xa0000 is not RAM */
  g_assert_false (vmce_ram_layout_gpa_to_hva (layout, 0xa0000, &v, NULL));
  /* the BIOS alias: the lowest GPA wins, and it is ROM */
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, bios + 0x20000, &v, &r));
  g_assert_cmphex (v, ==, 0xe0000);
  g_assert_true (r->rom);
  g_assert_true (vmce_ram_layout_hva_to_block (layout, bios + 0x30000, &block, &off));
  g_assert_cmpstr (block, ==, "pc.bios");
  g_assert_cmphex (off, ==, 0x30000);
  g_assert_true (vmce_ram_layout_get_block_extent (layout, "pc.ram", &v));
  g_assert_cmphex (v, ==, 512 << 20);
}

/* After device_del of a pc-dimm QEMU clears the name of its RAM block,
 * which its memory backend keeps, mapped nowhere: no part of the layout */
static void
test_ram_layout_qmp_unplugged (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = json_from_string (
      "[{\"name\": \"pc.ram\", \"hva\": 4096, \"size\": 8192, \"ranges\": ["
      "{\"gpa\": 0, \"size\": 8192, \"offset\": 0, \"readonly\": false}]},"
      " {\"name\": \"\", \"hva\": 65536, \"size\": 8192, \"ranges\": []}]", &error);
  g_autoptr(VmceRamLayout) layout = NULL;
  guint64 gpa = 0;

  g_assert_no_error (error);
  layout = vmce_ram_layout_new_from_qmp (node, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vmce_ram_layout_get_n_ranges (layout), ==, 1);
  g_assert_false (vmce_ram_layout_hva_to_gpa (layout, 65536 + 4096, &gpa, NULL));
  g_assert_true (vmce_ram_layout_hva_to_gpa (layout, 4096 + 4096, &gpa, NULL));
}

static void
test_ram_layout_qmp_bad (void)
{
  static const struct {
    const gchar *json;
    const gchar *message;
  } bad[] = {
    { "{}", "did not return a list" },
    { "[]", "no RAM mapped" },
    { "[1]", "block 0 is not an object" },
    { "[{\"name\": \"a\", \"hva\": 4096, \"size\": 8192}]", "no list of ranges" },
    { "[{\"name\": \"a\", \"hva\": -1, \"size\": 8192, \"ranges\": []}]", "block a: " },
    { "[{\"name\": \"a\", \"hva\": 4096, \"size\": 8192, \"ranges\": ["
      "{\"gpa\": 0, \"size\": 8192, \"offset\": 4096, \"readonly\": false}]}]", "ends past its block" },
    { "[{\"name\": \"a\", \"hva\": 4096, \"size\": 8192, \"ranges\": ["
      "{\"gpa\": 0, \"size\": 0, \"offset\": 0, \"readonly\": false}]}]", "has size 0x0" },
    { "[{\"name\": \"a\", \"hva\": 4096, \"size\": 8192, \"ranges\": ["
      "{\"gpa\": 0, \"size\": 4096, \"offset\": 0}]}]", "'readonly' is not a boolean" },
    { "[{\"name\": \"a\", \"hva\": 4096, \"size\": 8192, \"ranges\": ["
      "{\"gpa\": 0, \"size\": 8192, \"offset\": 0, \"readonly\": false}]},"
      " {\"name\": \"b\", \"hva\": 65536, \"size\": 8192, \"ranges\": ["
      "{\"gpa\": 4096, \"size\": 4096, \"offset\": 0, \"readonly\": false}]}]", "overlaps the one of a" },
    { "[{\"name\": \"a\", \"hva\": 4096, \"size\": 8192, \"ranges\": ["
      "{\"gpa\": 0, \"size\": 8192, \"offset\": 0, \"readonly\": false}]},"
      " {\"name\": \"b\", \"hva\": 8192, \"size\": 8192, \"ranges\": ["
      "{\"gpa\": 65536, \"size\": 4096, \"offset\": 0, \"readonly\": false}]}]", "overlaps RAM block a" },
    { "[{\"name\": \"a\", \"hva\": 4096, \"size\": 8192, \"ranges\": []},"
      " {\"name\": \"a\", \"hva\": 65536, \"size\": 8192, \"ranges\": []}]", "listed twice" },
    /* nameless is fine only for a block nothing maps (an unplugged DIMM's) */
    { "[{\"name\": \"\", \"hva\": 4096, \"size\": 8192, \"ranges\": ["
      "{\"gpa\": 0, \"size\": 4096, \"offset\": 0, \"readonly\": false}]}]", "has no name" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = json_from_string (bad[i].json, &error);
    g_autoptr(VmceRamLayout) layout = NULL;

    g_assert_no_error (error);
    layout = vmce_ram_layout_new_from_qmp (node, &error);
    g_assert_null (layout);
    g_assert_nonnull (error);
    if (strstr (error->message, bad[i].message) == NULL)
      g_error ("%s: '%s' does not say '%s'", bad[i].json, error->message, bad[i].message);
  }
}

int
main (int argc, char **argv)
{
  static const gchar *recordings[] = {
    "pc-512m", "pc-512m-fw", "pc-5g", "q35-5g", "pc-numa-5g", "pc-dimm", "pc-shm",
    "kvm-pc-5g", "kvm-pc-shm",
    /* QEMU 10.0 (Debian 12 bookworm-backports), data/record-mtree */
    "10.0-pc-5g", "10.0-q35-dimm",
  };

  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (recordings); i++) {
    g_autofree gchar *path = g_strdup_printf ("/ram-layout/recording/%s", recordings[i]);
    g_test_add_data_func (path, recordings[i], test_ram_layout_recording);
  }
  g_test_add_func ("/ram-layout/pc-512m", test_ram_layout_pc_512m);
  g_test_add_func ("/ram-layout/pc-512m-fw", test_ram_layout_pc_512m_fw);
  g_test_add_func ("/ram-layout/guest-pages", test_ram_layout_guest_pages);
  g_test_add_func ("/ram-layout/pc-5g", test_ram_layout_pc_5g);
  g_test_add_func ("/ram-layout/kvm-pc-5g", test_ram_layout_kvm_pc_5g);
  g_test_add_func ("/ram-layout/q35-5g", test_ram_layout_q35_5g);
  g_test_add_func ("/ram-layout/numa", test_ram_layout_numa);
  g_test_add_func ("/ram-layout/dimm", test_ram_layout_dimm);
  g_test_add_func ("/ram-layout/shm", test_ram_layout_shm);
  g_test_add_func ("/ram-layout/kinds", test_ram_layout_kinds);
  g_test_add_func ("/ram-layout/many-ranges", test_ram_layout_many_ranges);
  g_test_add_func ("/ram-layout/bad-mtree", test_ram_layout_bad_mtree);
  g_test_add_func ("/ram-layout/mtree-messages", test_ram_layout_mtree_messages);
  g_test_add_func ("/ram-layout/mtree-newer", test_ram_layout_mtree_newer);
  g_test_add_func ("/ram-layout/bad-gpa2hva", test_ram_layout_bad_gpa2hva);
  g_test_add_func ("/ram-layout/empty", test_ram_layout_empty);
  g_test_add_func ("/ram-layout/qmp", test_ram_layout_qmp);
  g_test_add_func ("/ram-layout/qmp-bad", test_ram_layout_qmp_bad);
  g_test_add_func ("/ram-layout/qmp-unplugged", test_ram_layout_qmp_unplugged);
  return g_test_run ();
}
