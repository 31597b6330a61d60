/*
 * Guest RAM layout of a QEMU process, learned from HMP `info mtree -f` and
 * `gpa2hva` (QEMU 7.2: softmmu/memory.c mtree_print_flatview(),
 * monitor/misc.c hmp_gpa2hva()).
 *
 * The text comes from the process vmced is about to ptrace, so the view of
 * address space "memory" (the system view, where guest RAM is) is parsed
 * strictly: every range line must have the shape QEMU prints, and a
 * malformed one fails the whole parse rather than giving a layout that
 * would send a machine check to the wrong guest page. What a newer QEMU may
 * add is skipped instead, and said (vmce_ram_layout_get_skipped()): a
 * region type vmced does not know (QEMU 7.2 to 10.0 print ram, rom, romd,
 * ramd and i/o; a queued change names containers), a view header line it
 * does not know, and anything it cannot read in the views of other
 * address spaces, which it does not use. The structure (views, their
 * blank lines) is strict everywhere: without it no line is where vmced
 * thinks.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-layout"

#include <gio/gio.h>

#include "json-util.h"
#include "page.h"
#include "ram-layout.h"

typedef struct {
  gchar *name;
  guint64 extent;     /* max offset+size over the block's ranges */
  guint64 hva;        /* valid when has_hva */
  gboolean has_hva;
  guint64 probe_gpa;  /* start of the block's largest range */
  guint64 probe_size;
} VmceRamBlock;

typedef struct {
  VmceRamRange pub;   /* first: get_range() hands out &entry->pub */
  VmceRamBlock *blk;
} VmceRamRangeEntry;

/* A piece of the HVA axis where one range gives the lowest GPA. */
typedef struct {
  guint64 hva;
  guint64 last;       /* inclusive, so a piece may end at G_MAXUINT64 */
  guint idx;          /* into ranges */
} VmceHvaPiece;

struct _VmceRamLayout {
  GArray *ranges;           /* of VmceRamRangeEntry, sorted by gpa, disjoint */
  GPtrArray *blocks;        /* of VmceRamBlock*, in order of their first range */
  GHashTable *blocks_by_name; /* name (borrowed) -> VmceRamBlock* */
  GArray *hva_pieces;       /* of VmceHvaPiece, sorted by hva, disjoint */
  GPtrArray *blocks_by_hva; /* of VmceRamBlock* (borrowed) with an HVA, sorted by hva */
  GPtrArray *skipped;       /* of gchar*: what the last mtree parse skipped, each said once */
};

static void
vmce_ram_block_free (VmceRamBlock *blk)
{
  g_free (blk->name);
  g_free (blk);
}

VmceRamLayout *
vmce_ram_layout_new (void)
{
  VmceRamLayout *self = g_new0 (VmceRamLayout, 1);

  self->ranges = g_array_new (FALSE, TRUE, sizeof (VmceRamRangeEntry));
  self->blocks = g_ptr_array_new_with_free_func ((GDestroyNotify) vmce_ram_block_free);
  self->blocks_by_name = g_hash_table_new (g_str_hash, g_str_equal);
  self->hva_pieces = g_array_new (FALSE, TRUE, sizeof (VmceHvaPiece));
  self->blocks_by_hva = g_ptr_array_new ();
  self->skipped = g_ptr_array_new_with_free_func (g_free);
  return self;
}

void
vmce_ram_layout_free (VmceRamLayout *self)
{
  if (self == NULL)
    return;
  g_array_unref (self->ranges);
  g_hash_table_unref (self->blocks_by_name);
  g_ptr_array_unref (self->blocks_by_hva);
  g_ptr_array_unref (self->blocks);
  g_array_unref (self->hva_pieces);
  g_ptr_array_unref (self->skipped);
  g_free (self);
}

/* One RAM/ROM range of block @name (created on first sight) */
static void
vmce_ram_layout_add_range (GArray *ranges,
                           GPtrArray *blocks,
                           GHashTable *blocks_by_name,
                           const gchar *name,
                           guint64 gpa,
                           guint64 size,
                           guint64 offset,
                           gboolean rom)
{
  VmceRamRangeEntry entry = { 0 };
  VmceRamBlock *blk = g_hash_table_lookup (blocks_by_name, name);

  if (blk == NULL) {
    blk = g_new0 (VmceRamBlock, 1);
    blk->name = g_strdup (name);
    g_ptr_array_add (blocks, blk);
    g_hash_table_insert (blocks_by_name, blk->name, blk);
  }
  blk->extent = MAX (blk->extent, offset + size);
  /* probe in the largest range: small ones (PAM, SMRAM) are the ones the
   * guest remaps between our two commands */
  if (size > blk->probe_size) {
    blk->probe_size = size;
    blk->probe_gpa = gpa;
  }

  entry.pub.gpa = gpa;
  entry.pub.size = size;
  entry.pub.block = blk->name;
  entry.pub.offset = offset;
  entry.pub.rom = rom;
  entry.blk = blk;
  g_array_append_val (ranges, entry);
}

/* ---- parsing `info mtree -f` ---- */

typedef enum {
  VMCE_MTREE_OUTSIDE,  /* after a view's blank line: expect "FlatView #n" */
  VMCE_MTREE_AS,       /* after the title: expect the first " AS" line */
  VMCE_MTREE_HEADER,   /* more " AS" lines or " Root memory region" */
  VMCE_MTREE_RANGES,   /* range lines, "No rendered FlatView", or the blank end */
  VMCE_MTREE_EMPTY,    /* after "No rendered FlatView": only the blank end */
} VmceMtreeState;

typedef struct {
  GRegex *re_title;
  GRegex *re_as;
  GRegex *re_root;
  GRegex *re_header;
  GRegex *re_range;
} VmceMtreeRegexes;

static const VmceMtreeRegexes *
vmce_mtree_regexes (void)
{
  static gsize once = 0;
  static VmceMtreeRegexes re;

  if (g_once_init_enter (&once)) {
    /* The patterns are constants: failing to compile them is a programming
     * error, which g_regex_new() reports as a critical. */
    re.re_title = g_regex_new ("^FlatView #[0-9]{1,10}$", G_REGEX_OPTIMIZE, 0, NULL);
    re.re_as = g_regex_new ("^ AS \"([^\"]*)\", root: .+$", G_REGEX_OPTIMIZE, 0, NULL);
    re.re_root = g_regex_new ("^ Root memory region: .+$", G_REGEX_OPTIMIZE, 0, NULL);
    /* any other view header: one space, then its own words */
    re.re_header = g_regex_new ("^ ([^ ][^:]{0,40})", G_REGEX_OPTIMIZE, 0, NULL);
    /* TARGET_FMT_plx is %016 PRIx64, so exactly 16 digits; " KVM" is added
     * per address space that has a KVM memslot for the range. */
    re.re_range = g_regex_new ("^  ([0-9a-f]{16})-([0-9a-f]{16}) "
                               "\\(prio (-?[0-9]{1,10}), (nv-)?([a-z][a-z0-9/_-]{0,31})\\): "
                               "(.+?)(?: @([0-9a-f]{16}))?(?: KVM)*$",
                               G_REGEX_OPTIMIZE, 0, NULL);
    g_once_init_leave (&once, 1);
  }
  return &re;
}

static guint64
vmce_mtree_hex16 (const GMatchInfo *match, gint group)
{
  g_autofree gchar *str = g_match_info_fetch (match, group);
  guint64 value = 0;

  /* the regex guarantees 16 hex digits, which always fit */
  g_ascii_string_to_unsigned (str, 16, 0, G_MAXUINT64, &value, NULL);
  return value;
}

typedef struct {
  GArray *ranges;
  GPtrArray *blocks;
  GHashTable *blocks_by_name;
  guint64 prev_last;      /* last address of the previous range of this view */
  gboolean have_prev;
  gboolean in_memory;     /* this view lists AS "memory" */
  gboolean memory_seen;
  gboolean memory_rendered;
  gchar *view_as;         /* the first address space of this view */
  GPtrArray *skipped;     /* what was skipped, each said once */
} VmceMtreeParse;

/* Something a newer QEMU may print that vmced leaves out: said once, with
 * the line where it was first seen */
static void
vmce_mtree_skip (VmceMtreeParse *p, guint lineno, gchar *what)
{
  for (guint i = 0; i < p->skipped->len; i++) {
    if (g_str_has_prefix (g_ptr_array_index (p->skipped, i), what)) {
      g_free (what);
      return;
    }
  }
  g_ptr_array_add (p->skipped, g_strdup_printf ("%s (first: line %u)", what, lineno));
  g_free (what);
}

/* What every range line must satisfy, in any view, RAM or not */
static gboolean
vmce_mtree_check_range_line (VmceMtreeParse *p,
                             guint lineno,
                             const GMatchInfo *match,
                             guint64 first,
                             guint64 last,
                             GError **error)
{
  g_autofree gchar *prio = g_match_info_fetch (match, 3);
  gint64 prio_value;

  if (!g_ascii_string_to_signed (prio, 10, G_MININT, G_MAXINT, &prio_value, NULL)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: priority %s is out of range", lineno, prio);
    return FALSE;
  }
  if (last < first) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: range ends at 0x%" G_GINT64_MODIFIER "x before it starts", lineno,
                 last);
    return FALSE;
  }
  /* QEMU renders a flat view sorted and without overlaps; anything else
   * would make the binary searches wrong */
  if (p->have_prev && first <= p->prev_last) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: range at 0x%" G_GINT64_MODIFIER "x overlaps or precedes the previous one",
                 lineno, first);
    return FALSE;
  }
  p->have_prev = TRUE;
  p->prev_last = last;
  return TRUE;
}

/* the name is free text in QEMU; a space before '@' or at either end
 * means the line was not cut where we think */
static gboolean
vmce_mtree_region_name_is_sane (const gchar *name)
{
  return !g_ascii_isspace (name[0]) && !g_ascii_isspace (name[strlen (name) - 1]) &&
         strstr (name, " @") == NULL;
}

/* A range of the "memory" view that holds guest RAM or ROM */
static gboolean
vmce_mtree_add_ram_range (VmceMtreeParse *p,
                          guint lineno,
                          const GMatchInfo *match,
                          guint64 first,
                          guint64 last,
                          gboolean rom,
                          GError **error)
{
  g_autofree gchar *name = g_match_info_fetch (match, 6);
  g_autofree gchar *offset_str = g_match_info_fetch (match, 7);
  guint64 offset = 0, size;

  if (first == 0 && last == G_MAXUINT64) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: RAM range covers the whole address space", lineno);
    return FALSE;
  }
  size = last - first + 1;
  if (offset_str != NULL && offset_str[0] != '\0')
    offset = vmce_mtree_hex16 (match, 7);
  if (offset > G_MAXUINT64 - size) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: offset 0x%" G_GINT64_MODIFIER "x + size overflows", lineno, offset);
    return FALSE;
  }
  if (!vmce_mtree_region_name_is_sane (name)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: malformed memory region name '%s'", lineno, name);
    return FALSE;
  }
  if (p->ranges->len >= VMCE_RAM_LAYOUT_MAX_RANGES) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: more than %u RAM ranges", lineno, (guint) VMCE_RAM_LAYOUT_MAX_RANGES);
    return FALSE;
  }

  vmce_ram_layout_add_range (p->ranges, p->blocks, p->blocks_by_name, name, first, size, offset, rom);
  return TRUE;
}

static gboolean
vmce_mtree_parse_range (VmceMtreeParse *p, guint lineno, const gchar *line, GError **error)
{
  const VmceMtreeRegexes *re = vmce_mtree_regexes ();
  g_autoptr(GMatchInfo) match = NULL;
  g_autofree gchar *kind = NULL;
  guint64 first, last;
  gboolean rom;

  /* the other views hold no guest RAM vmced uses: what it cannot read
   * there is skipped */
  if (!p->in_memory) {
    g_autoptr(GError) local = NULL;

    if (g_regex_match (re->re_range, line, 0, &match)) {
      first = vmce_mtree_hex16 (match, 1);
      last = vmce_mtree_hex16 (match, 2);
      if (vmce_mtree_check_range_line (p, lineno, match, first, last, &local))
        return TRUE;
    }
    vmce_mtree_skip (p, lineno, g_strdup_printf ("lines it does not read in the view of address "
                                                 "space \"%s\"", p->view_as));
    return TRUE;
  }
  if (!g_regex_match (re->re_range, line, 0, &match)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: not a flat view range", lineno);
    return FALSE;
  }
  first = vmce_mtree_hex16 (match, 1);
  last = vmce_mtree_hex16 (match, 2);
  if (!vmce_mtree_check_range_line (p, lineno, match, first, last, error))
    return FALSE;

  /* i/o is MMIO; ramd is device memory (e.g. a VFIO BAR) that no memory
   * error of guest RAM can be in */
  kind = g_match_info_fetch (match, 5);
  if (g_strcmp0 (kind, "i/o") == 0 || g_strcmp0 (kind, "ramd") == 0)
    return TRUE;
  rom = g_strcmp0 (kind, "rom") == 0 || g_strcmp0 (kind, "romd") == 0;
  if (!rom && g_strcmp0 (kind, "ram") != 0) {
    vmce_mtree_skip (p, lineno, g_strdup_printf ("ranges of region type '%s', which it does not "
                                                 "know", kind));
    return TRUE;
  }
  return vmce_mtree_add_ram_range (p, lineno, match, first, last, rom, error);
}

static gboolean
vmce_mtree_parse_header (VmceMtreeParse *p, guint lineno, const gchar *line, GError **error)
{
  const VmceMtreeRegexes *re = vmce_mtree_regexes ();
  g_autoptr(GMatchInfo) match = NULL;
  g_autofree gchar *as = NULL;

  if (!g_regex_match (re->re_as, line, 0, &match)) {
    g_autoptr(GMatchInfo) other = NULL;

    /* a header line of a newer QEMU; the root line is not one */
    if (!g_regex_match (re->re_root, line, 0, NULL) && g_regex_match (re->re_header, line, 0, &other)) {
      g_autofree gchar *head = g_match_info_fetch (other, 1);
      vmce_mtree_skip (p, lineno, g_strdup_printf ("view header lines ' %s...', which it does not "
                                                   "know", head));
      return TRUE;
    }
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: expected an address space line", lineno);
    return FALSE;
  }
  as = g_match_info_fetch (match, 1);
  if (p->view_as == NULL)
    p->view_as = g_strdup (as);
  if (g_strcmp0 (as, "memory") != 0)
    return TRUE;
  /* QEMU's views are per root region; two views of "memory" would mean
   * this is not one snapshot of one QEMU */
  if (p->memory_seen) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "line %u: a second flat view of address space \"memory\"", lineno);
    return FALSE;
  }
  p->memory_seen = TRUE;
  p->in_memory = TRUE;
  return TRUE;
}

static gboolean
vmce_mtree_parse_line (VmceMtreeParse *p,
                       VmceMtreeState *state,
                       guint lineno,
                       const gchar *line,
                       GError **error)
{
  const VmceMtreeRegexes *re = vmce_mtree_regexes ();

  switch (*state) {
  case VMCE_MTREE_OUTSIDE:
    if (!g_regex_match (re->re_title, line, 0, NULL)) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "line %u: expected 'FlatView #n'", lineno);
      return FALSE;
    }
    p->in_memory = FALSE;
    p->have_prev = FALSE;
    g_clear_pointer (&p->view_as, g_free);
    *state = VMCE_MTREE_AS;
    return TRUE;
  case VMCE_MTREE_AS:
    if (!vmce_mtree_parse_header (p, lineno, line, error))
      return FALSE;
    /* a view needs its address space before its root */
    if (p->view_as != NULL)
      *state = VMCE_MTREE_HEADER;
    return TRUE;
  case VMCE_MTREE_HEADER:
    if (g_regex_match (re->re_root, line, 0, NULL)) {
      *state = VMCE_MTREE_RANGES;
      return TRUE;
    }
    return vmce_mtree_parse_header (p, lineno, line, error);
  case VMCE_MTREE_RANGES:
    if (line[0] == '\0') {
      if (p->in_memory && p->have_prev)
        p->memory_rendered = TRUE;
      *state = VMCE_MTREE_OUTSIDE;
      return TRUE;
    }
    if (!p->have_prev && g_strcmp0 (line, "  No rendered FlatView") == 0) {
      *state = VMCE_MTREE_EMPTY;
      return TRUE;
    }
    return vmce_mtree_parse_range (p, lineno, line, error);
  case VMCE_MTREE_EMPTY:
    if (line[0] != '\0') {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "line %u: text after 'No rendered FlatView'", lineno);
      return FALSE;
    }
    *state = VMCE_MTREE_OUTSIDE;
    return TRUE;
  default:
    g_assert_not_reached ();
  }
}

static gboolean
vmce_mtree_line_is_clean (const gchar *line)
{
  for (const guchar *c = (const guchar *) line; *c != '\0'; c++) {
    if (*c < 0x20 || *c == 0x7f)
      return FALSE;
  }
  return TRUE;
}

static void vmce_ram_layout_rebuild_hva_index (VmceRamLayout *self);

/* What can be told of the text before reading it line by line */
static gboolean
vmce_mtree_check_text (const gchar *text, GError **error)
{
  if (!g_utf8_validate (text, -1, NULL)) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                         "mtree output is not UTF-8");
    return FALSE;
  }
  if (!g_str_has_prefix (text, "FlatView #")) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                         "not the output of 'info mtree -f'");
    return FALSE;
  }
  /* every line QEMU prints ends in a newline: without one the text was cut */
  if (!g_str_has_suffix (text, "\n")) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                         "mtree output is truncated (no final newline)");
    return FALSE;
  }
  return TRUE;
}

static gboolean
vmce_mtree_parse_lines (VmceMtreeParse *p, const gchar *text, GError **error)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  guint n_lines = g_strv_length (lines);
  VmceMtreeState state = VMCE_MTREE_OUTSIDE;

  /* the element after the final newline is empty and not a line */
  for (guint i = 0; i + 1 < n_lines; i++) {
    gchar *line = lines[i];
    gsize len = strlen (line);

    /* the monitor turns "\n" into "\r\n" (monitor_puts_locked) */
    if (len > 0 && line[len - 1] == '\r')
      line[len - 1] = '\0';
    if (!vmce_mtree_line_is_clean (line)) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "line %u: control character in mtree output", i + 1);
      return FALSE;
    }
    if (!vmce_mtree_parse_line (p, &state, i + 1, line, error))
      return FALSE;
  }
  if (state != VMCE_MTREE_OUTSIDE) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                         "mtree output is truncated (flat view not terminated)");
    return FALSE;
  }
  return TRUE;
}

/* A well-formed text may still lack what vmced needs: the guest's RAM */
static gboolean
vmce_mtree_check_memory_view (const VmceMtreeParse *p, GError **error)
{
  if (!p->memory_seen) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                         "no flat view of address space \"memory\"");
    return FALSE;
  }
  if (!p->memory_rendered || p->ranges->len == 0) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                         "the flat view of address space \"memory\" has no RAM");
    return FALSE;
  }
  return TRUE;
}

gboolean
vmce_ram_layout_parse_mtree (VmceRamLayout *self, const gchar *text, GError **error)
{
  g_autoptr(GArray) ranges = NULL;
  g_autoptr(GPtrArray) blocks = NULL;
  g_autoptr(GHashTable) blocks_by_name = NULL;
  g_autoptr(GPtrArray) skipped = g_ptr_array_new_with_free_func (g_free);
  VmceMtreeParse p = { 0 };
  gboolean ok;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (text != NULL, FALSE);

  if (!vmce_mtree_check_text (text, error))
    return FALSE;

  /* built aside: a failed parse leaves the layout as it was */
  ranges = g_array_new (FALSE, TRUE, sizeof (VmceRamRangeEntry));
  blocks = g_ptr_array_new_with_free_func ((GDestroyNotify) vmce_ram_block_free);
  blocks_by_name = g_hash_table_new (g_str_hash, g_str_equal);
  p.ranges = ranges;
  p.blocks = blocks;
  p.blocks_by_name = blocks_by_name;
  p.skipped = skipped;
  ok = vmce_mtree_parse_lines (&p, text, error) && vmce_mtree_check_memory_view (&p, error);
  g_free (p.view_as);
  if (!ok)
    return FALSE;

  g_array_unref (self->ranges);
  self->ranges = g_steal_pointer (&ranges);
  g_hash_table_unref (self->blocks_by_name);
  self->blocks_by_name = g_steal_pointer (&blocks_by_name);
  g_ptr_array_set_size (self->blocks_by_hva, 0);
  g_ptr_array_unref (self->blocks);
  self->blocks = g_steal_pointer (&blocks);
  g_ptr_array_unref (self->skipped);
  self->skipped = g_steal_pointer (&skipped);
  vmce_ram_layout_rebuild_hva_index (self);
  g_debug ("%u RAM ranges in %u blocks", self->ranges->len, self->blocks->len);
  return TRUE;
}

/* ---- query-ram-layout (qemu-patches/) ---- */

typedef struct {
  const gchar *name; /* borrowed from the answer */
  guint64 hva;
} VmceQmpBlock;

static gint
vmce_ram_range_entry_cmp_gpa (gconstpointer a, gconstpointer b)
{
  const VmceRamRangeEntry *x = a;
  const VmceRamRangeEntry *y = b;

  if (x->pub.gpa != y->pub.gpa)
    return x->pub.gpa < y->pub.gpa ? -1 : 1;
  return 0;
}

static gboolean
vmce_ram_layout_qmp_range (JsonObject *obj,
                           guint64 block_size,
                           guint64 *gpa,
                           guint64 *size,
                           guint64 *offset,
                           gboolean *rom,
                           GError **error)
{
  JsonNode *ro = json_object_get_member (obj, "readonly");

  if (!vmce_json_object_get_u64 (obj, "gpa", gpa, error) ||
      !vmce_json_object_get_u64 (obj, "size", size, error) ||
      !vmce_json_object_get_u64 (obj, "offset", offset, error))
    return FALSE;
  if (ro == NULL || json_node_get_value_type (ro) != G_TYPE_BOOLEAN) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "'readonly' is not a boolean");
    return FALSE;
  }
  *rom = json_node_get_boolean (ro);
  if (*size == 0 || *gpa > G_MAXUINT64 - (*size - 1)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "range at 0x%" G_GINT64_MODIFIER "x has size 0x%" G_GINT64_MODIFIER "x",
                 *gpa, *size);
    return FALSE;
  }
  /* a range past its block's end would translate into another mapping */
  if (*offset > block_size || *size > block_size - *offset) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "range at 0x%" G_GINT64_MODIFIER "x ends past its block (offset 0x%"
                 G_GINT64_MODIFIER "x, size 0x%" G_GINT64_MODIFIER "x)", *gpa, *offset, *size);
    return FALSE;
  }
  return TRUE;
}

/* an unplugged DIMM's RAM block: QEMU clears its name as the device
 * goes, the memory backend keeps the block, nothing maps it */
static gboolean
vmce_qmp_block_is_unplugged (const gchar *name, JsonNode *ranges_node)
{
  return name != NULL && name[0] == '\0' && ranges_node != NULL && JSON_NODE_HOLDS_ARRAY (ranges_node) &&
         json_array_get_length (json_node_get_array (ranges_node)) == 0;
}

static gboolean
vmce_ram_layout_add_qmp_ranges (VmceRamLayout *self,
                                const gchar *name,
                                guint64 block_size,
                                JsonArray *ranges,
                                GError **error)
{
  for (guint j = 0; j < json_array_get_length (ranges); j++) {
    JsonNode *rnode = json_array_get_element (ranges, j);
    guint64 gpa, rsize, offset;
    gboolean rom;

    if (!JSON_NODE_HOLDS_OBJECT (rnode)) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "block %s: range %u is not an object", name, j);
      return FALSE;
    }
    if (!vmce_ram_layout_qmp_range (json_node_get_object (rnode), block_size, &gpa, &rsize, &offset,
                                    &rom, error)) {
      g_prefix_error (error, "block %s: ", name);
      return FALSE;
    }
    if (self->ranges->len >= VMCE_RAM_LAYOUT_MAX_RANGES) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "more than %u RAM ranges",
                   (guint) VMCE_RAM_LAYOUT_MAX_RANGES);
      return FALSE;
    }
    vmce_ram_layout_add_range (self->ranges, self->blocks, self->blocks_by_name, name, gpa,
                               rsize, offset, rom);
  }
  return TRUE;
}

/* Element @i of the answer: its ranges go into @self at once, its HVA into
 * @mapped, to be set when every block's extent is known */
static gboolean
vmce_ram_layout_add_qmp_block (VmceRamLayout *self,
                               JsonNode *node,
                               guint i,
                               GHashTable *seen,
                               GArray *mapped,
                               GError **error)
{
  JsonObject *blk;
  JsonNode *ranges_node;
  JsonArray *ranges;
  const gchar *name;
  guint64 hva, size;

  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "block %u is not an object", i);
    return FALSE;
  }
  blk = json_node_get_object (node);
  name = vmce_json_object_get_string_opt (blk, "name");
  ranges_node = json_object_get_member (blk, "ranges");
  if (vmce_qmp_block_is_unplugged (name, ranges_node))
    return TRUE;
  if (name == NULL || name[0] == '\0' || ranges_node == NULL || !JSON_NODE_HOLDS_ARRAY (ranges_node)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "block %u has no name or no list of ranges", i);
    return FALSE;
  }
  if (!vmce_json_object_get_u64 (blk, "hva", &hva, error) ||
      !vmce_json_object_get_u64 (blk, "size", &size, error)) {
    g_prefix_error (error, "block %s: ", name);
    return FALSE;
  }
  if (!g_hash_table_add (seen, (gpointer) name)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "block %s is listed twice", name);
    return FALSE;
  }
  ranges = json_node_get_array (ranges_node);
  if (!vmce_ram_layout_add_qmp_ranges (self, name, size, ranges, error))
    return FALSE;
  /* an unmapped block (no range) has no guest address to forward to */
  if (json_array_get_length (ranges) > 0) {
    VmceQmpBlock m = { name, hva };
    VmceRamBlock *b = g_hash_table_lookup (self->blocks_by_name, name);
    b->extent = size; /* known here: the mapping's true length */
    g_array_append_val (mapped, m);
  }
  return TRUE;
}

/* QEMU lists the ranges block by block; the binary searches by GPA need
 * them sorted and without overlaps */
static gboolean
vmce_ram_layout_sort_ranges (VmceRamLayout *self, GError **error)
{
  g_array_sort (self->ranges, vmce_ram_range_entry_cmp_gpa);
  for (guint i = 1; i < self->ranges->len; i++) {
    const VmceRamRangeEntry *prev = &g_array_index (self->ranges, VmceRamRangeEntry, i - 1);
    const VmceRamRangeEntry *cur = &g_array_index (self->ranges, VmceRamRangeEntry, i);
    if (cur->pub.gpa <= prev->pub.gpa + (prev->pub.size - 1)) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "range at 0x%" G_GINT64_MODIFIER "x (%s) overlaps the one of %s", cur->pub.gpa,
                   cur->pub.block, prev->pub.block);
      return FALSE;
    }
  }
  return TRUE;
}

VmceRamLayout *
vmce_ram_layout_new_from_qmp (JsonNode *answer, GError **error)
{
  g_autoptr(VmceRamLayout) self = vmce_ram_layout_new ();
  g_autoptr(GArray) mapped = g_array_new (FALSE, FALSE, sizeof (VmceQmpBlock));
  g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  JsonArray *blocks;

  g_return_val_if_fail (answer != NULL, NULL);

  if (!JSON_NODE_HOLDS_ARRAY (answer)) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                         "query-ram-layout did not return a list");
    return NULL;
  }
  blocks = json_node_get_array (answer);
  for (guint i = 0; i < json_array_get_length (blocks); i++) {
    if (!vmce_ram_layout_add_qmp_block (self, json_array_get_element (blocks, i), i, seen, mapped,
                                        error))
      return NULL;
  }
  if (self->ranges->len == 0) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "the guest has no RAM mapped");
    return NULL;
  }
  if (!vmce_ram_layout_sort_ranges (self, error))
    return NULL;
  /* after the ranges: the overlap checks need every block's extent */
  for (guint i = 0; i < mapped->len; i++) {
    const VmceQmpBlock *m = &g_array_index (mapped, VmceQmpBlock, i);
    if (!vmce_ram_layout_set_block_hva (self, m->name, m->hva, error))
      return NULL;
  }
  g_debug ("%u RAM ranges in %u blocks (query-ram-layout)", self->ranges->len, self->blocks->len);
  return g_steal_pointer (&self);
}

/* ---- block HVAs ---- */

GPtrArray *
vmce_ram_layout_dup_unresolved_blocks (VmceRamLayout *self)
{
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);

  g_return_val_if_fail (self != NULL, names);
  for (guint i = 0; i < self->blocks->len; i++) {
    VmceRamBlock *blk = g_ptr_array_index (self->blocks, i);
    if (!blk->has_hva)
      g_ptr_array_add (names, g_strdup (blk->name));
  }
  return names;
}

gboolean
vmce_ram_layout_probe_gpa (VmceRamLayout *self, const gchar *block, guint64 *gpa)
{
  VmceRamBlock *blk;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (block != NULL, FALSE);

  blk = g_hash_table_lookup (self->blocks_by_name, block);
  if (blk == NULL)
    return FALSE;
  if (gpa != NULL)
    *gpa = blk->probe_gpa;
  return TRUE;
}

static gint
vmce_ram_block_cmp_hva (gconstpointer a, gconstpointer b)
{
  const VmceRamBlock *x = *(VmceRamBlock *const *) a;
  const VmceRamBlock *y = *(VmceRamBlock *const *) b;

  if (x->hva != y->hva)
    return x->hva < y->hva ? -1 : 1;
  return 0;
}

gboolean
vmce_ram_layout_set_block_hva (VmceRamLayout *self,
                               const gchar *block,
                               guint64 hva,
                               GError **error)
{
  VmceRamBlock *blk;
  guint64 last;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (block != NULL, FALSE);

  blk = g_hash_table_lookup (self->blocks_by_name, block);
  if (blk == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                 "no RAM block %s in the layout", block);
    return FALSE;
  }
  if (blk->has_hva) {
    if (blk->hva == hva)
      return TRUE;
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "RAM block %s is already at HVA 0x%" G_GINT64_MODIFIER "x, not 0x%"
                 G_GINT64_MODIFIER "x", block, blk->hva, hva);
    return FALSE;
  }
  if (hva > G_MAXUINT64 - (blk->extent - 1)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "RAM block %s at HVA 0x%" G_GINT64_MODIFIER "x would end past the address space",
                 block, hva);
    return FALSE;
  }
  last = hva + (blk->extent - 1);
  /* separate RAM blocks are separate mappings; an overlap means one of
   * the answers is wrong, and lookups by HVA would be ambiguous */
  for (guint i = 0; i < self->blocks_by_hva->len; i++) {
    VmceRamBlock *other = g_ptr_array_index (self->blocks_by_hva, i);
    guint64 other_last = other->hva + (other->extent - 1);
    if (hva <= other_last && other->hva <= last) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "RAM block %s at HVA 0x%" G_GINT64_MODIFIER "x overlaps RAM block %s at 0x%"
                   G_GINT64_MODIFIER "x", block, hva, other->name, other->hva);
      return FALSE;
    }
  }

  blk->hva = hva;
  blk->has_hva = TRUE;
  g_ptr_array_add (self->blocks_by_hva, blk);
  g_ptr_array_sort (self->blocks_by_hva, vmce_ram_block_cmp_hva);
  vmce_ram_layout_rebuild_hva_index (self);
  g_debug ("RAM block %s is at HVA 0x%" G_GINT64_MODIFIER "x (extent 0x%" G_GINT64_MODIFIER "x)",
           block, hva, blk->extent);
  return TRUE;
}

static const GRegex *
vmce_gpa2hva_regex (void)
{
  static gsize once = 0;
  static GRegex *re = NULL;

  if (g_once_init_enter (&once)) {
    /* "Host virtual address for 0x%" HWADDR_PRIx " (%s) is %p"; %p of a
     * NULL pointer would print "(nil)", which no RAM block has */
    re = g_regex_new ("\\AHost virtual address for 0x([0-9a-f]{1,16}) \\((.+)\\) "
                      "is 0x([0-9a-f]{1,16})\\z", G_REGEX_OPTIMIZE, 0, NULL);
    g_once_init_leave (&once, 1);
  }
  return re;
}

static gboolean
vmce_gpa2hva_fetch_hex (const GMatchInfo *match, gint group, guint64 *value)
{
  g_autofree gchar *str = g_match_info_fetch (match, group);

  return g_ascii_string_to_unsigned (str, 16, 0, G_MAXUINT64, value, NULL);
}

/* index of the range containing @gpa, or -1; binary search, no allocation */
static gint
vmce_ram_layout_find_gpa (VmceRamLayout *self, guint64 gpa)
{
  guint lo = 0, hi = self->ranges->len;

  /* find the last range starting at or below @gpa */
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (g_array_index (self->ranges, VmceRamRangeEntry, mid).pub.gpa <= gpa)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return -1;
  {
    const VmceRamRangeEntry *e = &g_array_index (self->ranges, VmceRamRangeEntry, lo - 1);
    if (gpa - e->pub.gpa >= e->pub.size)
      return -1;
  }
  return (gint) (lo - 1);
}

gboolean
vmce_ram_layout_set_hva_from_gpa2hva (VmceRamLayout *self,
                                      guint64 gpa,
                                      const gchar *answer,
                                      GError **error)
{
  g_autoptr(GMatchInfo) match = NULL;
  g_autofree gchar *line = NULL;
  g_autofree gchar *name = NULL;
  const VmceRamRangeEntry *e;
  guint64 answer_gpa = 0, hva = 0, offset;
  gsize len;
  gint idx;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (answer != NULL, FALSE);

  /* one line, as human-monitor-command returns it: with "\r\n" */
  len = strlen (answer);
  if (len > 0 && answer[len - 1] == '\n')
    len--;
  if (len > 0 && answer[len - 1] == '\r')
    len--;
  line = g_utf8_make_valid (answer, len);
  if (!g_regex_match (vmce_gpa2hva_regex (), line, 0, &match)) {
    /* QEMU's error ("... is not RAM") is the most useful thing to show:
     * its first line, and not all of it if it is garbage */
    g_autofree gchar *first = g_strndup (line, strcspn (line, "\r\n"));
    g_autofree gchar *shown = g_utf8_substring (first, 0, MIN (g_utf8_strlen (first, -1), 200));
    /* RAM in the layout read a moment ago, not RAM now: the firmware
     * programs the PAM registers early in a boot, and a range PAM sends
     * to PCI is nothing or not RAM (QEMU 7.2 to 11.1 say these two); BUSY:
     * read it all again */
    gboolean moved = vmce_ram_layout_find_gpa (self, gpa) >= 0 &&
                     (g_str_has_prefix (first, "No memory is mapped at address") ||
                      (g_str_has_prefix (first, "Memory at address") && g_str_has_suffix (first, "is not RAM")));

    g_set_error (error, G_IO_ERROR, moved ? G_IO_ERROR_BUSY : G_IO_ERROR_INVALID_DATA,
                 "unexpected gpa2hva answer: '%s'", g_strstrip (shown));
    return FALSE;
  }
  name = g_match_info_fetch (match, 2);
  if (!vmce_gpa2hva_fetch_hex (match, 1, &answer_gpa) ||
      !vmce_gpa2hva_fetch_hex (match, 3, &hva)) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                         "gpa2hva answer has a malformed number");
    return FALSE;
  }
  if (answer_gpa != gpa) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "gpa2hva answered for 0x%" G_GINT64_MODIFIER "x, not 0x%" G_GINT64_MODIFIER "x",
                 answer_gpa, gpa);
    return FALSE;
  }
  idx = vmce_ram_layout_find_gpa (self, gpa);
  if (idx < 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                 "GPA 0x%" G_GINT64_MODIFIER "x is not RAM in the layout", gpa);
    return FALSE;
  }
  e = &g_array_index (self->ranges, VmceRamRangeEntry, idx);
  if (g_strcmp0 (name, e->blk->name) != 0) {
    /* the guest remapped it between the two reads (SeaBIOS's PAM setup
     * turns 0xc0000 from pc.rom into pc.ram early in every boot): BUSY */
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_BUSY,
                 "gpa2hva says 0x%" G_GINT64_MODIFIER "x is in %s, the layout says %s "
                 "(the guest remapped it)", gpa, name, e->blk->name);
    return FALSE;
  }
  offset = e->pub.offset + (gpa - e->pub.gpa);
  if (hva < offset) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "gpa2hva answer HVA 0x%" G_GINT64_MODIFIER "x is below the block offset 0x%"
                 G_GINT64_MODIFIER "x", hva, offset);
    return FALSE;
  }
  return vmce_ram_layout_set_block_hva (self, e->blk->name, hva - offset, error);
}

GPtrArray *
vmce_ram_layout_get_skipped (VmceRamLayout *self)
{
  return self->skipped;
}

gboolean
vmce_ram_layout_is_complete (VmceRamLayout *self)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return self->blocks->len > 0 && self->blocks_by_hva->len == self->blocks->len;
}

guint
vmce_ram_layout_get_n_ranges (VmceRamLayout *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->ranges->len;
}

const VmceRamRange *
vmce_ram_layout_get_range (VmceRamLayout *self, guint idx)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (idx < self->ranges->len, NULL);
  return &g_array_index (self->ranges, VmceRamRangeEntry, idx).pub;
}

gboolean
vmce_ram_layout_get_block_hva (VmceRamLayout *self, const gchar *block, guint64 *hva)
{
  VmceRamBlock *blk;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (block != NULL, FALSE);

  blk = g_hash_table_lookup (self->blocks_by_name, block);
  if (blk == NULL || !blk->has_hva)
    return FALSE;
  if (hva != NULL)
    *hva = blk->hva;
  return TRUE;
}

gboolean
vmce_ram_layout_get_block_extent (VmceRamLayout *self, const gchar *block, guint64 *extent)
{
  VmceRamBlock *blk;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (block != NULL, FALSE);

  blk = g_hash_table_lookup (self->blocks_by_name, block);
  if (blk == NULL)
    return FALSE;
  if (extent != NULL)
    *extent = blk->extent;
  return TRUE;
}

/* ---- HVA index ---- */

static inline guint64
vmce_ram_range_entry_hva (const VmceRamRangeEntry *e)
{
  return e->blk->hva + e->pub.offset;
}

static gint
vmce_guint64_cmp (gconstpointer a, gconstpointer b)
{
  guint64 x = *(const guint64 *) a, y = *(const guint64 *) b;

  return x < y ? -1 : x > y ? 1 : 0;
}

typedef struct {
  guint64 hva;
  guint idx;
} VmceHvaStart;

static gint
vmce_hva_start_cmp (gconstpointer a, gconstpointer b)
{
  const VmceHvaStart *x = a, *y = b;

  if (x->hva != y->hva)
    return x->hva < y->hva ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx ? 1 : 0;
}

/* Where each mapped range starts (@starts, sorted) and where the HVA axis
 * is cut: at every start and just past every end (@cuts, sorted) */
static void
vmce_ram_layout_collect_hva_cuts (VmceRamLayout *self, GArray *starts, GArray *cuts)
{
  for (guint i = 0; i < self->ranges->len; i++) {
    const VmceRamRangeEntry *e = &g_array_index (self->ranges, VmceRamRangeEntry, i);
    VmceHvaStart s;
    guint64 first, last;

    if (!e->blk->has_hva)
      continue;
    /* set_block_hva checked that hva + extent - 1 fits */
    first = vmce_ram_range_entry_hva (e);
    last = first + (e->pub.size - 1);
    s.hva = first;
    s.idx = i;
    g_array_append_val (starts, s);
    g_array_append_val (cuts, first);
    if (last != G_MAXUINT64) {
      guint64 after = last + 1;
      g_array_append_val (cuts, after);
    }
  }
  g_array_sort (starts, vmce_hva_start_cmp);
  g_array_sort (cuts, vmce_guint64_cmp);
}

/* Of the ranges in @active (indexes into ranges), the one with the lowest
 * GPA at HVA @at; ranges that end before @at leave @active */
static gboolean
vmce_ram_layout_lowest_at (VmceRamLayout *self, GArray *active, guint64 at, guint *best_idx)
{
  const VmceRamRangeEntry *best = NULL;

  for (guint a = 0; a < active->len;) {
    guint idx = g_array_index (active, guint, a);
    const VmceRamRangeEntry *e = &g_array_index (self->ranges, VmceRamRangeEntry, idx);
    guint64 last = vmce_ram_range_entry_hva (e) + (e->pub.size - 1);
    if (last < at) {
      g_array_remove_index_fast (active, a);
      continue;
    }
    if (best == NULL ||
        e->pub.gpa + (at - vmce_ram_range_entry_hva (e)) <
            best->pub.gpa + (at - vmce_ram_range_entry_hva (best))) {
      best = e;
      *best_idx = idx;
    }
    a++;
  }
  return best != NULL;
}

/* the last HVA of the piece starting at cut @c: before the next distinct
 * cut, or the end of the address space */
static guint64
vmce_hva_piece_last (GArray *cuts, guint c)
{
  guint64 at = g_array_index (cuts, guint64, c);

  for (guint n = c + 1; n < cuts->len; n++) {
    guint64 cut = g_array_index (cuts, guint64, n);
    if (cut != at)
      return cut - 1;
  }
  return G_MAXUINT64;
}

/* a piece that goes on where the previous one with the same range ends
 * only makes that one longer */
static void
vmce_ram_layout_add_hva_piece (VmceRamLayout *self, guint64 hva, guint64 last, guint idx)
{
  VmceHvaPiece piece = { .hva = hva, .last = last, .idx = idx };

  if (self->hva_pieces->len > 0) {
    VmceHvaPiece *prev = &g_array_index (self->hva_pieces, VmceHvaPiece,
                                         self->hva_pieces->len - 1);
    if (prev->idx == idx && prev->last + 1 == hva) {
      prev->last = last;
      return;
    }
  }
  g_array_append_val (self->hva_pieces, piece);
}

/*
 * Cut the HVA axis at every start and end of a mapped range, and give each
 * piece the range with the lowest GPA there. Ranges overlap in HVA only
 * where one block is mapped at several GPAs (aliases); every range has the
 * same slope (gpa = hva + constant), so which one is lowest does not change
 * inside a piece. This runs when the layout changes, never on the signal path.
 */
static void
vmce_ram_layout_rebuild_hva_index (VmceRamLayout *self)
{
  g_autoptr(GArray) starts = g_array_new (FALSE, FALSE, sizeof (VmceHvaStart));
  g_autoptr(GArray) cuts = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr(GArray) active = g_array_new (FALSE, FALSE, sizeof (guint));
  guint next = 0;

  g_array_set_size (self->hva_pieces, 0);
  vmce_ram_layout_collect_hva_cuts (self, starts, cuts);
  for (guint c = 0; c < cuts->len; c++) {
    guint64 at = g_array_index (cuts, guint64, c);
    guint best_idx = 0;

    if (c > 0 && g_array_index (cuts, guint64, c - 1) == at)
      continue;
    while (next < starts->len && g_array_index (starts, VmceHvaStart, next).hva <= at) {
      g_array_append_val (active, g_array_index (starts, VmceHvaStart, next).idx);
      next++;
    }
    if (!vmce_ram_layout_lowest_at (self, active, at, &best_idx))
      continue;
    vmce_ram_layout_add_hva_piece (self, at, vmce_hva_piece_last (cuts, c), best_idx);
  }
}

/* ---- lookups: signal path ---- */

gboolean
vmce_ram_layout_hva_to_gpa (VmceRamLayout *self,
                            guint64 hva,
                            guint64 *gpa,
                            const VmceRamRange **range)
{
  const VmceHvaPiece *piece;
  const VmceRamRangeEntry *e;
  guint lo = 0, hi;

  g_return_val_if_fail (self != NULL, FALSE);

  hi = self->hva_pieces->len;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (g_array_index (self->hva_pieces, VmceHvaPiece, mid).hva <= hva)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return FALSE;
  piece = &g_array_index (self->hva_pieces, VmceHvaPiece, lo - 1);
  if (hva > piece->last)
    return FALSE;
  e = &g_array_index (self->ranges, VmceRamRangeEntry, piece->idx);
  if (gpa != NULL)
    *gpa = e->pub.gpa + (hva - vmce_ram_range_entry_hva (e));
  if (range != NULL)
    *range = &e->pub;
  return TRUE;
}

gboolean
vmce_ram_layout_gpa_to_hva (VmceRamLayout *self,
                            guint64 gpa,
                            guint64 *hva,
                            const VmceRamRange **range)
{
  const VmceRamRangeEntry *e;
  gint idx;

  g_return_val_if_fail (self != NULL, FALSE);

  idx = vmce_ram_layout_find_gpa (self, gpa);
  if (idx < 0)
    return FALSE;
  e = &g_array_index (self->ranges, VmceRamRangeEntry, idx);
  if (!e->blk->has_hva)
    return FALSE;
  if (hva != NULL)
    *hva = vmce_ram_range_entry_hva (e) + (gpa - e->pub.gpa);
  if (range != NULL)
    *range = &e->pub;
  return TRUE;
}

gboolean
vmce_ram_layout_hva_to_block (VmceRamLayout *self,
                              guint64 hva,
                              const gchar **block,
                              guint64 *offset)
{
  const VmceRamBlock *blk;
  guint lo = 0, hi;

  g_return_val_if_fail (self != NULL, FALSE);

  hi = self->blocks_by_hva->len;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (((const VmceRamBlock *) g_ptr_array_index (self->blocks_by_hva, mid))->hva <= hva)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return FALSE;
  blk = g_ptr_array_index (self->blocks_by_hva, lo - 1);
  if (hva - blk->hva >= blk->extent)
    return FALSE;
  if (block != NULL)
    *block = blk->name;
  if (offset != NULL)
    *offset = hva - blk->hva;
  return TRUE;
}

static gint
vmce_guest_page_cmp (gconstpointer a, gconstpointer b)
{
  const VmceGuestPage *pa = a, *pb = b;

  return pa->gpa < pb->gpa ? -1 : pa->gpa > pb->gpa;
}

GArray *
vmce_ram_layout_guest_pages (VmceRamLayout *self, guint64 hva, guint64 size)
{
  GArray *pages = g_array_new (FALSE, FALSE, sizeof (VmceGuestPage));

  g_return_val_if_fail (self != NULL, pages);

  /* page by page: a range may hold a hole (the legacy VGA window of
   * pc.ram) or ROM, which is no page a guest can be told about */
  for (guint64 off = 0; off < size; off += VMCE_PAGE_SIZE) {
    const VmceRamRange *range = NULL;
    VmceGuestPage p = { .hva = (hva & VMCE_PAGE_MASK) + off };

    if (vmce_ram_layout_hva_to_gpa (self, p.hva, &p.gpa, &range) && !range->rom)
      g_array_append_val (pages, p);
  }
  g_array_sort (pages, vmce_guest_page_cmp);
  return pages;
}

void
vmce_guest_pages_to_json_ranges (GArray *pages, JsonBuilder *b)
{
  json_builder_begin_array (b);
  for (guint i = 0; pages != NULL && i < pages->len;) {
    guint j = i + 1;
    const VmceGuestPage *first = &g_array_index (pages, VmceGuestPage, i);

    while (j < pages->len &&
           g_array_index (pages, VmceGuestPage, j).gpa == first->gpa + (guint64) (j - i) * VMCE_PAGE_SIZE &&
           g_array_index (pages, VmceGuestPage, j).hva == first->hva + (guint64) (j - i) * VMCE_PAGE_SIZE)
      j++;
    json_builder_begin_object (b);
    vmce_json_builder_add_hex (b, "gpa", first->gpa);
    vmce_json_builder_add_hex (b, "hva", first->hva);
    vmce_json_builder_add_int (b, "pages", j - i);
    json_builder_end_object (b);
    i = j;
  }
  json_builder_end_array (b);
}
