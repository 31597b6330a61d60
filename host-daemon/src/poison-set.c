/*
 * The poisoned pages of one QEMU (see poison-set.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-vm"

#include "json-util.h"
#include "page.h"
#include "poison-set.h"


GHashTable *
vmce_poison_set_new (void)
{
  return g_hash_table_new_full (g_int64_hash, g_int64_equal, NULL, g_free);
}

VmcePoisonedPage *
vmce_poison_set_lookup (GHashTable *set, guint64 gpa)
{
  guint64 page = gpa & VMCE_PAGE_MASK;

  return g_hash_table_lookup (set, &page);
}

static VmcePoisonedPage *
vmce_poison_set_get (GHashTable *set, guint64 gpa)
{
  VmcePoisonedPage *p = vmce_poison_set_lookup (set, gpa);

  if (p == NULL) {
    p = g_new0 (VmcePoisonedPage, 1);
    p->gpa = gpa & VMCE_PAGE_MASK;
    g_hash_table_insert (set, &p->gpa, p);
  }
  return p;
}

/* Whether an event says anything about a page: a host error in guest RAM
 * always does (the host page is bad whatever became of the machine
 * check); a machine check with no host side only if it went in */
static gboolean
vmce_poison_set_keeps (const gchar *source, gboolean have_gpa, VmceResult result)
{
  if (!have_gpa)
    return FALSE;
  if (g_strcmp0 (source, "inject") == 0)
    return result == VMCE_RESULT_INJECTED;
  return g_strcmp0 (source, "kernel") == 0 || g_strcmp0 (source, "simulated") == 0 ||
         g_strcmp0 (source, "huge-page") == 0;
}

VmcePoisonedPage *
vmce_poison_set_add_event (GHashTable *set, const VmceMceEvent *ev)
{
  VmcePoisonedPage *p;

  if (!vmce_poison_set_keeps (ev->source, ev->have_gpa, ev->result))
    return NULL;
  p = vmce_poison_set_get (set, ev->gpa);
  p->hva = ev->hva & VMCE_PAGE_MASK;
  p->last_us = ev->stop_us;
  p->kind = ev->kind;
  p->time_us = ev->time_us;
  p->simulated = g_strcmp0 (ev->source, "simulated") == 0;
  p->host_poisoned = p->host_poisoned || g_strcmp0 (ev->source, "inject") != 0;
  p->result = ev->result;
  p->last_seq = ev->seq;
  p->count++;
  return p;
}

static gboolean
vmce_poison_result_from_string (const gchar *str, VmceResult *result)
{
  for (VmceResult r = VMCE_RESULT_PENDING; r <= VMCE_RESULT_MIGRATED; r++) {
    if (g_strcmp0 (vmce_result_to_string (r), str) == 0) {
      *result = r;
      return TRUE;
    }
  }
  return FALSE;
}

/* "2026-12-03T11:40:30.123456Z" -> microseconds since the epoch, or 0 */
static gint64
vmce_poison_parse_time (const gchar *str)
{
  g_autoptr(GDateTime) dt = str != NULL ? g_date_time_new_from_iso8601 (str, NULL) : NULL;

  return dt != NULL ? g_date_time_to_unix (dt) * G_USEC_PER_SEC +
                          g_date_time_get_microsecond (dt)
                    : 0;
}

gboolean
vmce_poison_set_add_record (GHashTable *set, JsonObject *record)
{
  const gchar *source = vmce_json_object_get_string_opt (record, "source");
  const gchar *result_str = vmce_json_object_get_string_opt (record, "result");
  const gchar *gpa_str = vmce_json_object_get_string_opt (record, "gpa");
  const gchar *hva_str = vmce_json_object_get_string_opt (record, "hva");
  const gchar *si_code = vmce_json_object_get_string_opt (record, "si_code");
  VmceResult result = VMCE_RESULT_PENDING;
  VmcePoisonedPage *p;
  guint64 gpa = 0, hva = 0, seq = 0;

  if (gpa_str == NULL || !vmce_parse_u64 (gpa_str, &gpa, NULL) ||
      !vmce_poison_result_from_string (result_str, &result) ||
      !vmce_poison_set_keeps (source, TRUE, result))
    return FALSE;
  if (hva_str != NULL)
    (void) vmce_parse_u64 (hva_str, &hva, NULL);
  (void) vmce_json_object_get_u64_opt (record, "seq", &seq, NULL, NULL);
  p = vmce_poison_set_get (set, gpa);
  p->hva = hva & VMCE_PAGE_MASK;
  p->kind = g_strcmp0 (si_code, "BUS_MCEERR_AR") == 0 ? VMCE_MCE_KIND_AR : VMCE_MCE_KIND_AO;
  p->time_us = vmce_poison_parse_time (vmce_json_object_get_string_opt (record, "time"));
  p->simulated = g_strcmp0 (source, "simulated") == 0;
  p->host_poisoned = p->host_poisoned || g_strcmp0 (source, "inject") != 0;
  p->result = result;
  p->last_seq = seq;
  p->restored = TRUE;
  p->count++;
  return TRUE;
}

/* A page bad on the host that no error reported to the guest (yet):
 * NULL if the set knows it already */
static VmcePoisonedPage *
vmce_poison_set_add_unreported (GHashTable *set, guint64 gpa, guint64 hva, gboolean simulated)
{
  VmcePoisonedPage *p;

  if (vmce_poison_set_lookup (set, gpa) != NULL)
    return NULL;
  p = vmce_poison_set_get (set, gpa);
  p->hva = hva & VMCE_PAGE_MASK;
  p->kind = VMCE_MCE_KIND_AO;
  p->simulated = simulated;
  p->host_poisoned = TRUE;
  p->result = VMCE_RESULT_PENDING;
  return p;
}

VmcePoisonedPage *
vmce_poison_set_add_pending (GHashTable *set, const VmceMceEvent *ev)
{
  VmcePoisonedPage *p;

  if (g_strcmp0 (ev->source, "inject") == 0 || !vmce_poison_set_keeps (ev->source, ev->have_gpa, ev->result))
    return NULL;
  p = vmce_poison_set_add_unreported (set, ev->gpa, ev->hva, g_strcmp0 (ev->source, "simulated") == 0);
  if (p != NULL) {
    p->kind = ev->kind;
    p->time_us = ev->time_us;
  }
  return p;
}

VmcePoisonedPage *
vmce_poison_set_add_found (GHashTable *set, guint64 gpa, guint64 hva, gboolean simulated)
{
  VmcePoisonedPage *p = vmce_poison_set_add_unreported (set, gpa, hva, simulated);

  if (p != NULL)
    p->found_in_qemu = TRUE;
  return p;
}

VmcePoisonedPage *
vmce_poison_set_add_lost (GHashTable *set, guint64 gpa, guint64 hva, gboolean simulated, guint64 lost_with)
{
  VmcePoisonedPage *p = vmce_poison_set_add_unreported (set, gpa, hva, simulated);

  if (p != NULL)
    p->lost_with = lost_with;
  return p;
}

VmcePoisonedPage *
vmce_poison_set_add_migrated (GHashTable *set, const VmcePoisonedPage *source, guint64 hva)
{
  VmcePoisonedPage *p = vmce_poison_set_add_unreported (set, source->gpa, hva, source->simulated);

  if (p == NULL)
    return NULL;
  p->kind = source->kind;
  p->time_us = source->time_us;
  p->result = source->result;
  p->count = source->count;
  p->lost_with = source->lost_with;
  p->migrated = TRUE;
  return p;
}

guint
vmce_poison_set_add_loss_record (GHashTable *set, JsonObject *record)
{
  JsonNode *ranges = json_object_get_member (record, "ranges");
  gboolean simulated = g_strcmp0 (vmce_json_object_get_string_opt (record, "source"), "simulated") == 0;
  guint64 about_seq = 0;
  guint added = 0;
  JsonArray *arr;

  if (ranges == NULL || !JSON_NODE_HOLDS_ARRAY (ranges) ||
      !vmce_json_object_get_u64_opt (record, "about_seq", &about_seq, NULL, NULL) || about_seq == 0)
    return 0;
  arr = json_node_get_array (ranges);
  for (guint i = 0; i < json_array_get_length (arr); i++) {
    JsonNode *node = json_array_get_element (arr, i);
    JsonObject *range;
    const gchar *gpa_str, *hva_str;
    guint64 gpa = 0, hva = 0, n = 0;

    if (!JSON_NODE_HOLDS_OBJECT (node))
      continue;
    range = json_node_get_object (node);
    gpa_str = vmce_json_object_get_string_opt (range, "gpa");
    hva_str = vmce_json_object_get_string_opt (range, "hva");
    /* at most a 1 GiB page's: a damaged record must not add the world */
    if (gpa_str == NULL || hva_str == NULL || !vmce_parse_u64 (gpa_str, &gpa, NULL) ||
        !vmce_parse_u64 (hva_str, &hva, NULL) ||
        !vmce_json_object_get_u64_opt (range, "pages", &n, NULL, NULL) || n > (G_GUINT64_CONSTANT (1) << 18))
      continue;
    for (guint64 j = 0; j < n; j++)
      added += vmce_poison_set_add_lost (set, gpa + j * VMCE_PAGE_SIZE, hva + j * VMCE_PAGE_SIZE, simulated,
                                         about_seq) != NULL;
  }
  return added;
}

gboolean
vmce_poisoned_page_told (const VmcePoisonedPage *p)
{
  return p->lost_with == 0 || p->count > 0;
}

void
vmce_poison_set_count (GHashTable *set, VmcePoisonCounts *counts)
{
  GHashTableIter iter;
  gpointer value;

  *counts = (VmcePoisonCounts) { 0 };
  g_hash_table_iter_init (&iter, set);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    const VmcePoisonedPage *p = value;

    counts->pages++;
    if (vmce_poisoned_page_told (p))
      counts->told++;
    else
      counts->untold++;
    if (p->host_poisoned)
      counts->host++;
    if (p->restored)
      counts->restored++;
  }
}

static gint
vmce_poisoned_cmp (gconstpointer a, gconstpointer b)
{
  const VmcePoisonedPage *pa = *(VmcePoisonedPage *const *) a;
  const VmcePoisonedPage *pb = *(VmcePoisonedPage *const *) b;

  return pa->gpa < pb->gpa ? -1 : pa->gpa > pb->gpa;
}

static GPtrArray *
vmce_poison_set_collect (GHashTable *set, gboolean host_only)
{
  GPtrArray *pages = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, set);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    const VmcePoisonedPage *p = value;
    if (!host_only || p->host_poisoned)
      g_ptr_array_add (pages, value);
  }
  g_ptr_array_sort (pages, vmce_poisoned_cmp);
  return pages;
}

GPtrArray *
vmce_poison_set_host_pages (GHashTable *set)
{
  return vmce_poison_set_collect (set, TRUE);
}

GPtrArray *
vmce_poison_set_sorted (GHashTable *set)
{
  return vmce_poison_set_collect (set, FALSE);
}

void
vmce_poisoned_page_carried_to_json (const VmcePoisonedPage *p, JsonBuilder *b)
{
  json_builder_begin_object (b);
  vmce_json_builder_add_hex (b, "gpa", p->gpa);
  /* (a machine check went in: not one still in the source's queue) */
  json_builder_set_member_name (b, "told");
  json_builder_add_boolean_value (b, p->count > 0);
  vmce_json_builder_add_string (b, "kind", vmce_mce_kind_to_string (p->kind));
  vmce_json_builder_add_int (b, "count", p->count);
  if (p->lost_with != 0)
    vmce_json_builder_add_int (b, "lost_with", (gint64) p->lost_with);
  vmce_json_builder_add_string (b, "source", p->simulated ? "simulated" : "kernel");
  json_builder_end_object (b);
}

VmcePoisonedPage *
vmce_poisoned_page_carried_from_json (JsonObject *obj)
{
  g_autofree VmcePoisonedPage *p = g_new0 (VmcePoisonedPage, 1);
  const gchar *gpa = vmce_json_object_get_string_opt (obj, "gpa");
  const gchar *kind = vmce_json_object_get_string_opt (obj, "kind");
  gint64 count = json_object_get_int_member_with_default (obj, "count", 1);
  gint64 lost = json_object_get_int_member_with_default (obj, "lost_with", 0);

  if (gpa == NULL || !vmce_parse_u64 (gpa, &p->gpa, NULL))
    return NULL;
  p->gpa &= VMCE_PAGE_MASK;
  if (kind == NULL || !vmce_mce_kind_from_string (kind, &p->kind))
    p->kind = VMCE_MCE_KIND_AO;
  p->count = (guint) CLAMP (count, 0, G_MAXUINT);
  p->lost_with = (guint64) MAX (lost, 0);
  p->simulated = g_strcmp0 (vmce_json_object_get_string_opt (obj, "source"), "simulated") == 0;
  p->host_poisoned = TRUE;
  p->result = p->count > 0 ? VMCE_RESULT_INJECTED : VMCE_RESULT_PENDING;
  return g_steal_pointer (&p);
}

void
vmce_poisoned_page_to_json (const VmcePoisonedPage *p, JsonBuilder *b)
{
  g_autofree gchar *time = vmce_format_time (p->time_us);

  json_builder_begin_object (b);
  vmce_json_builder_add_hex (b, "gpa", p->gpa);
  vmce_json_builder_add_hex (b, "hva", p->hva);
  json_builder_set_member_name (b, "kind");
  json_builder_add_string_value (b, vmce_mce_kind_to_string (p->kind));
  json_builder_set_member_name (b, "time");
  json_builder_add_string_value (b, time);
  json_builder_set_member_name (b, "source");
  json_builder_add_string_value (b, !p->host_poisoned ? "inject"
                                    : p->simulated    ? "simulated"
                                                      : "kernel");
  json_builder_set_member_name (b, "result");
  json_builder_add_string_value (b, vmce_result_to_string (p->result));
  json_builder_set_member_name (b, "count");
  json_builder_add_int_value (b, p->count);
  json_builder_set_member_name (b, "restored");
  json_builder_add_boolean_value (b, p->restored);
  if (p->found_in_qemu) {
    json_builder_set_member_name (b, "found_in_qemu");
    json_builder_add_boolean_value (b, TRUE);
  }
  if (p->lost_with != 0) {
    json_builder_set_member_name (b, "lost_with");
    json_builder_add_int_value (b, (gint64) p->lost_with);
  }
  if (p->lent > 0) {
    json_builder_set_member_name (b, "lent_to_migration");
    json_builder_add_int_value (b, p->lent);
  }
  if (p->migrated) {
    json_builder_set_member_name (b, "migrated");
    json_builder_add_boolean_value (b, TRUE);
  }
  json_builder_end_object (b);
}
