/*
 * Guest RAM layout of a QEMU process: which host virtual address (HVA)
 * backs which guest physical address (GPA).
 *
 * QEMU 7.2 has no command that lists RAM blocks with their HVA (a QEMU with
 * qemu-patches/ has query-ram-layout, new_from_qmp()), so the layout is
 * otherwise learned in two steps over HMP: `info mtree -f` gives the flat
 * view of the guest physical address space (GPA range -> RAM block +
 * offset), then one `gpa2hva` per RAM block gives that block's HVA.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

typedef struct {
  guint64 gpa;     /* first guest physical address */
  guint64 size;    /* bytes, never 0 */
  gchar *block;    /* memory region name, e.g. "pc.ram", "ram-node0"; owned by the layout */
  guint64 offset;  /* offset of gpa inside the block */
  gboolean rom;    /* read-only (kind "rom"/"romd"): guest cannot recover such pages */
} VmceRamRange;

typedef struct _VmceRamLayout VmceRamLayout;

/* More RAM/ROM ranges than this in one flat view is refused as not QEMU's
 * output: KVM itself allows at most 32764 memslots per address space. */
#define VMCE_RAM_LAYOUT_MAX_RANGES 32768

VmceRamLayout *vmce_ram_layout_new (void);
void vmce_ram_layout_free (VmceRamLayout *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceRamLayout, vmce_ram_layout_free)

/* Replace the ranges with the RAM/ROM ranges of the flat view of the
 * address space "memory" in @text (the answer to HMP `info mtree -f`,
 * with or without the " KVM" marks QEMU adds under KVM). All block HVAs are
 * forgotten: a block name can come back as a new mapping after hot-unplug.
 * On error the layout is left unchanged. */
gboolean vmce_ram_layout_parse_mtree (VmceRamLayout *self, const gchar *text, GError **error);

/* A complete layout from the answer of QMP `query-ram-layout` (a command
 * qemu-patches/ adds: each RAM block with its HVA, size and GPA ranges), or
 * NULL with @error when the answer is not that. */
VmceRamLayout *vmce_ram_layout_new_from_qmp (JsonNode *answer, GError **error);

/* Names of the blocks that still need a base HVA, in GPA order (of gchar*). */
GPtrArray *vmce_ram_layout_dup_unresolved_blocks (VmceRamLayout *self);
/* The GPA to ask `gpa2hva` about for @block: the start of its largest range. */
gboolean vmce_ram_layout_probe_gpa (VmceRamLayout *self, const gchar *block, guint64 *gpa);
/* Parse a `gpa2hva` answer (as returned by human-monitor-command, trailing
 * CR LF allowed) for @gpa and set the block's base HVA. The GPA and block
 * name in the answer must match the layout. Error answers of QEMU ("... is
 * not RAM") become a GError carrying QEMU's text; G_IO_ERROR_BUSY when the
 * guest remapped the address since the layout was read (read it again). */
gboolean vmce_ram_layout_set_hva_from_gpa2hva (VmceRamLayout *self,
                                               guint64 gpa,
                                               const gchar *answer,
                                               GError **error);
/* Set a block's base HVA directly (what set_hva_from_gpa2hva does after parsing). */
gboolean vmce_ram_layout_set_block_hva (VmceRamLayout *self,
                                        const gchar *block,
                                        guint64 hva,
                                        GError **error);
/* What the last parse_mtree() left out because it is not what vmced knows
 * of QEMU's output (a region type, a view header, a line in a view other
 * than "memory"), in words, each once (of gchar*; empty when nothing was;
 * owned by the layout). */
GPtrArray *vmce_ram_layout_get_skipped (VmceRamLayout *self);
/* TRUE when there is at least one block and every block has an HVA. */
gboolean vmce_ram_layout_is_complete (VmceRamLayout *self);

/* Ranges sorted by GPA, never overlapping. The pointers stay valid until
 * the next successful parse or the free. */
guint vmce_ram_layout_get_n_ranges (VmceRamLayout *self);
const VmceRamRange *vmce_ram_layout_get_range (VmceRamLayout *self, guint idx);
gboolean vmce_ram_layout_get_block_hva (VmceRamLayout *self, const gchar *block, guint64 *hva);
/* Largest offset+size over the block's ranges: mtree gives no block sizes. */
gboolean vmce_ram_layout_get_block_extent (VmceRamLayout *self, const gchar *block, guint64 *extent);

/* Translations, for the signal path: O(log n), no allocation, no locking.
 * Both return FALSE when the address is not guest RAM/ROM of a block whose
 * HVA is known. @range (optional) is set only on success.
 *
 * HVA -> GPA: one HVA can be mapped at several GPAs (aliases, e.g. the BIOS
 * at 0xe0000 and 0xfffe0000); the lowest GPA is returned. QEMU's own KVM
 * forwarding (kvm_physical_memory_addr_from_host) returns the first memslot
 * that contains the HVA, which depends on slot allocation order and cannot
 * be seen from outside; the lowest GPA is deterministic, and is what that
 * first memslot is when the slots were created from the flat view in order. */
gboolean vmce_ram_layout_hva_to_gpa (VmceRamLayout *self,
                                     guint64 hva,
                                     guint64 *gpa,
                                     const VmceRamRange **range);
gboolean vmce_ram_layout_gpa_to_hva (VmceRamLayout *self,
                                     guint64 gpa,
                                     guint64 *hva,
                                     const VmceRamRange **range);
/* A page of guest RAM, where the guest sees it and where QEMU has it */
typedef struct {
  guint64 gpa;
  guint64 hva;
} VmceGuestPage;

/* @pages (VmceGuestPage, GPA order; NULL: none) as a JSON array of runs of
 * pages consecutive in GPA and HVA, [{"gpa", "hva", "pages"}]: what a
 * journal record names a lost range by (poison_set_add_loss_record()) */
void vmce_guest_pages_to_json_ranges (GArray *pages, JsonBuilder *b);

/* The pages of guest RAM (no ROM) among the host pages of [@hva, @hva +
 * @size), in GPA order: an empty array where none is guest RAM */
GArray *vmce_ram_layout_guest_pages (VmceRamLayout *self, guint64 hva, guint64 size);

/* For journals and control replies: is @hva inside a known block (within
 * its extent, even where no GPA maps it), and at which offset. */
gboolean vmce_ram_layout_hva_to_block (VmceRamLayout *self,
                                       guint64 hva,
                                       const gchar **block,
                                       guint64 *offset);
