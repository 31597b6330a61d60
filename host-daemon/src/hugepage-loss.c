/*
 * A huge page of guest RAM lost on the host: the blast radius.
 *
 * Nothing better exists yet anywhere: QEMU (kvm_arch_on_sigbus_vcpu())
 * injects at si_addr alone and ignores si_addr_lsb; Linux's HugeTLB
 * high-granularity mapping work, which would let the host keep the other
 * 511 pages, is not merged. So the guest learns of each neighbour only
 * when it reads it, as an SRAR, and a read in its kernel (a free page being
 * zeroed for an allocation, a slab, a page table) is a panic. Policy `all`
 * tells the guest of every lost page before it reads any: found errors
 * (SRAO), which its memory_failure() handles in process context, taking
 * free pages off the free lists and killing (or, late kill, marking) the
 * processes that map the others.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-hugepage"

#include "forward.h"
#include "hugepage-loss.h"
#include "hugepage-salvage.h"
#include "json-util.h"
#include "log-writer.h"
#include "page.h"
#include "poison-set.h"

/* A page to tell, and the error that showed its loss */
typedef struct {
  guint64 gpa;
  guint64 about_seq;
} VmceTell;

/* The layer's own, per VM */
typedef struct {
  VmceVm *vm; /* not a reference: the layer data goes with the vm */
  VmceHugepagePolicy policy;
  GHashTable *losses; /* base HVAs of the ranges lost, a set of guint64 */
  GArray *to_tell;    /* of VmceTell, not yet handed to the forwarder */
  guint tell_source;
} VmceHugepageLoss;

GQuark vmce_hugepage_loss_quark (void);
G_DEFINE_QUARK (vmce-hugepage-loss, vmce_hugepage_loss)

static void
vmce_hugepage_loss_free (VmceHugepageLoss *h)
{
  g_clear_handle_id (&h->tell_source, g_source_remove);
  g_hash_table_unref (h->losses);
  g_array_unref (h->to_tell);
  g_free (h);
}

static VmceHugepageLoss *
vmce_hugepage_loss_new (void)
{
  VmceHugepageLoss *h = g_new0 (VmceHugepageLoss, 1);

  h->policy = VMCE_HUGEPAGE_DEFAULT;
  h->losses = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  h->to_tell = g_array_new (FALSE, FALSE, sizeof (VmceTell));
  return h;
}

static VmceHugepageLoss *
vmce_hugepage_loss (VmceVm *vm)
{
  VmceHugepageLoss *h = vmce_vm_ensure_layer_data (vm, vmce_hugepage_loss_quark (),
                                                   (VmceLayerNewFunc) vmce_hugepage_loss_new,
                                                   (GDestroyNotify) vmce_hugepage_loss_free);

  h->vm = vm;
  return h;
}

GArray *
vmce_hugepage_loss_pages (VmceRamLayout *layout, guint64 hva, guint lsb)
{
  guint64 size;

  /* 1 GiB is the largest page x86 has; anything else is not a huge page */
  if (layout == NULL || lsb <= VMCE_PAGE_SHIFT || lsb > 30)
    return g_array_new (FALSE, FALSE, sizeof (VmceGuestPage));
  size = G_GUINT64_CONSTANT (1) << lsb;
  return vmce_ram_layout_guest_pages (layout, hva & ~(size - 1), size);
}

VmceHugepagePolicy
vmce_hugepage_loss_get_policy (VmceVm *vm)
{
  return vmce_hugepage_loss (vm)->policy;
}

void
vmce_hugepage_loss_set_policy (VmceVm *vm, VmceHugepagePolicy policy)
{
  vmce_hugepage_loss (vm)->policy = policy;
}

/* Hands every page waiting to the forwarder, which sends them in order, one
 * machine check at a time with its gap between two (forward.c says why) */
static gboolean
vmce_hugepage_loss_tell_cb (gpointer user_data)
{
  VmceHugepageLoss *h = user_data;
  g_autoptr(GArray) pages = g_steal_pointer (&h->to_tell);

  h->tell_source = 0;
  h->to_tell = g_array_new (FALSE, FALSE, sizeof (VmceTell));
  for (guint i = 0; i < pages->len; i++)
    vmce_forward_tell (h->vm, g_array_index (pages, VmceTell, i).gpa, g_array_index (pages, VmceTell, i).about_seq);
  return G_SOURCE_REMOVE;
}

static JsonNode *
vmce_hugepage_loss_record (VmceVm *vm,
                           const VmceMceEvent *ev,
                           GArray *pages,
                           VmceHugepagePolicy policy,
                           guint told,
                           const gchar *why_not,
                           gboolean with_ranges)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  guint64 size = G_GUINT64_CONSTANT (1) << ev->lsb;

  json_builder_begin_object (b);
  vmce_vm_begin_record (vm, b, "huge-page-loss");
  vmce_json_builder_add_hex (b, "hva", ev->hva & ~(size - 1));
  vmce_json_builder_add_int (b, "lsb", ev->lsb);
  vmce_json_builder_add_int (b, "size", (gint64) size);
  vmce_json_builder_add_string (b, "source", ev->source);
  /* the error that showed the loss */
  vmce_json_builder_add_int (b, "about_seq", (gint64) ev->seq);
  vmce_json_builder_add_hex (b, "gpa", ev->gpa);
  vmce_json_builder_add_string (b, "policy", vmce_hugepage_policy_to_string (policy));
  vmce_json_builder_add_int (b, "pages", pages->len);
  /* the guest ranges: with their HVAs, a restarted vmced puts every page
   * back in the poison set from this record alone (poison-index.c). (A
   * salvaged loss has none: its pages are kept, but for the raw ones,
   * which their own records name.) */
  json_builder_set_member_name (b, "ranges");
  vmce_guest_pages_to_json_ranges (with_ranges ? pages : NULL, b);
  vmce_json_builder_add_int (b, "told", told);
  if (why_not != NULL)
    vmce_json_builder_add_string (b, "detail", why_not);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

gboolean
vmce_hugepage_loss_shown_by (guint lsb, gboolean have_gpa, const gchar *source)
{
  return lsb > VMCE_PAGE_SHIFT && lsb <= 30 && have_gpa && g_strcmp0 (source, "huge-page") != 0 &&
         g_strcmp0 (source, "inject") != 0;
}

GArray *
vmce_hugepage_loss_to_tell (VmceHugepagePolicy policy,
                            VmceResult hit,
                            GArray *pages,
                            guint64 hit_gpa,
                            const gchar **why_not)
{
  GArray *gpas = g_array_new (FALSE, FALSE, sizeof (guint64));

  *why_not = NULL;
  if (policy != VMCE_HUGEPAGE_ALL)
    return gpas;
  /* a guest that could not take the first (refused, paused, passed on)
   * cannot take 511 more */
  if (hit != VMCE_RESULT_INJECTED) {
    *why_not = "the machine check for the page hit was not injected: nothing more is told";
    return gpas;
  }
  for (guint i = 0; i < pages->len; i++) {
    guint64 gpa = g_array_index (pages, VmceGuestPage, i).gpa;
    if (gpa != (hit_gpa & VMCE_PAGE_MASK))
      g_array_append_val (gpas, gpa);
  }
  return gpas;
}

void
vmce_hugepage_loss_on_event (VmceVm *vm, const VmceMceEvent *ev)
{
  VmceHugepageLoss *h;
  g_autoptr(GArray) pages = NULL;
  g_autoptr(GArray) tell = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *no_salvage = NULL;
  g_autofree gchar *fallback = NULL;
  g_autofree gchar *detail = NULL;
  const gchar *why_not = NULL;
  VmceHugepagePolicy policy;
  gboolean salvaged;
  guint64 size, base;

  if (!vmce_hugepage_loss_shown_by (ev->lsb, ev->have_gpa, ev->source))
    return;
  h = vmce_hugepage_loss (vm);
  size = G_GUINT64_CONSTANT (1) << ev->lsb;
  base = ev->hva & ~(size - 1);
  /* the guest reading a neighbour it was not told about: the same loss */
  if (g_hash_table_contains (h->losses, &base))
    return;
  pages = vmce_hugepage_loss_pages (vmce_vm_get_layout (vm), ev->hva, ev->lsb);
  if (pages->len == 0)
    return;
  g_hash_table_add (h->losses, g_memdup2 (&base, sizeof base));

  /* salvage where it can work (begun already at the loss's first stop,
   * hugepage-salvage.c, or from here), else `all`, saying why */
  policy = h->policy;
  salvaged = policy == VMCE_HUGEPAGE_SALVAGE && vmce_hugepage_salvage_knows (vm, base);
  if (policy == VMCE_HUGEPAGE_SALVAGE && !salvaged) {
    no_salvage = vmce_hugepage_salvage_check (vm, base, size, g_strcmp0 (ev->source, "simulated") == 0);
    /* (a guest that could not take the page hit is not told more, as
     * under `all`: vmce_hugepage_loss_to_tell()) */
    salvaged = no_salvage == NULL && ev->result == VMCE_RESULT_INJECTED;
    if (no_salvage != NULL) {
      policy = VMCE_HUGEPAGE_ALL;
      fallback = g_strdup_printf ("cannot salvage: %s; handled as all", no_salvage);
    }
  }
  /* every page of it is bad on the host, told or not: a reset must not
   * give the guest any of them back as it was. A salvage leaves only its
   * raw pages bad, which their own errors put in the set (or it does, if
   * it cannot be done after all). */
  for (guint i = 0; i < pages->len && !salvaged; i++) {
    const VmceGuestPage *p = &g_array_index (pages, VmceGuestPage, i);
    (void) vmce_poison_set_add_lost (vmce_vm_get_poisoned (vm), p->gpa, p->hva,
                                     g_strcmp0 (ev->source, "simulated") == 0, ev->seq);
  }
  tell = vmce_hugepage_loss_to_tell (policy, ev->result, pages, ev->gpa, &why_not);
  if (fallback != NULL && why_not != NULL)
    why_not = detail = g_strdup_printf ("%s; %s", fallback, why_not);
  else if (why_not == NULL)
    why_not = fallback;
  for (guint i = 0; i < tell->len; i++) {
    VmceTell t = { .gpa = g_array_index (tell, guint64, i), .about_seq = ev->seq };
    g_array_append_val (h->to_tell, t);
  }
  if (tell->len > 0 && h->tell_source == 0)
    h->tell_source = g_idle_add (vmce_hugepage_loss_tell_cb, h);
  vmce_log_record (VMCE_LOG_HUGE_PAGE_LOSS, vmce_vm_get_name (vm), &ev->gpa, ev->seq,
                   "vm %s: a %" G_GUINT64_FORMAT " KiB host page lost at HVA 0x%" G_GINT64_MODIFIER
                   "x: %u guest page(s); policy %s: %u more to tell%s%s",
                   vmce_vm_get_name (vm), size / 1024, base, pages->len,
                   vmce_hugepage_policy_to_string (h->policy), tell->len, why_not != NULL ? " - " : "",
                   why_not != NULL ? why_not : "");
  record = vmce_hugepage_loss_record (vm, ev, pages, h->policy, tell->len, why_not, !salvaged);
  vmce_vm_emit_record (vm, "HUGE_PAGE_LOSS", record);
  /* after the loss's record: the salvage's names it */
  if (salvaged)
    vmce_hugepage_salvage_start (vm, ev, base, size);
}

void
vmce_hugepage_loss_cancel_all (VmceVm *vm)
{
  VmceHugepageLoss *h = vmce_vm_get_layer_data (vm, vmce_hugepage_loss_quark ());

  if (h == NULL)
    return;
  g_clear_handle_id (&h->tell_source, g_source_remove);
  g_array_set_size (h->to_tell, 0);
}

void
vmce_hugepage_loss_to_json (VmceVm *vm, JsonBuilder *b)
{
  VmceHugepageLoss *h = vmce_hugepage_loss (vm);

  json_builder_set_member_name (b, "hugepage");
  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "policy", vmce_hugepage_policy_to_string (h->policy));
  vmce_json_builder_add_int (b, "losses", g_hash_table_size (h->losses));
  json_builder_end_object (b);
}
