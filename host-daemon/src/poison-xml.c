/*
 * A VM's poisoned pages as XML (see poison-xml.h).
 *
 * What a page needs on the destination is what the guest was told of it
 * and how: its GPA, the kind of its last error, how many errors reported
 * it (0 for a page of a lost huge page never reported: told on its first
 * read, as on the source) and the loss it belongs to, and whether the
 * error was simulated. GMarkup reads it: a plain element of a few
 * attributes, which an operator can also read with `virsh metadata`.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-vm"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "mce-encode.h"
#include "page.h"
#include "poison-xml.h"

gchar *
vmce_poison_xml_build (const gchar *from, const gchar *by, GPtrArray *pages)
{
  GString *xml = g_string_new (NULL);
  g_autofree gchar *head = by != NULL ? g_markup_printf_escaped ("<poisoned from=\"%s\" by=\"%s\">", from, by)
                                      : g_markup_printf_escaped ("<poisoned from=\"%s\">", from);

  g_string_append (xml, head);
  for (guint i = 0; i < pages->len; i++) {
    const VmcePoisonedPage *p = g_ptr_array_index (pages, i);
    g_string_append_printf (xml,
                            "<page gpa=\"0x%" G_GINT64_MODIFIER "x\" kind=\"%s\" count=\"%u\" lost-with=\"%"
                            G_GUINT64_FORMAT "\" source=\"%s\"/>",
                            p->gpa, vmce_mce_kind_to_string (p->kind), p->count, p->lost_with,
                            p->simulated ? "simulated" : "kernel");
  }
  g_string_append (xml, "</poisoned>");
  return g_string_free (xml, FALSE);
}

typedef struct {
  GPtrArray *pages;
  gchar *from;
  gboolean root_seen;
} VmcePoisonXmlParse;

static const gchar *
vmce_poison_xml_local (const gchar *name)
{
  const gchar *colon = strchr (name, ':');

  return colon != NULL ? colon + 1 : name;
}

static gboolean
vmce_poison_xml_u64 (const gchar *str, guint base, guint64 *out)
{
  gchar *end = NULL;

  if (str == NULL || *str == '\0' || *str == '-')
    return FALSE;
  *out = g_ascii_strtoull (str, &end, base);
  return end != NULL && *end == '\0';
}

static gboolean
vmce_poison_xml_page (VmcePoisonXmlParse *st, const gchar **names, const gchar **values, GError **error)
{
  g_autofree VmcePoisonedPage *p = g_new0 (VmcePoisonedPage, 1);
  const gchar *gpa = NULL, *kind = NULL, *count = NULL, *lost = NULL, *source = NULL;
  guint64 n = 0;

  if (!g_markup_collect_attributes ("page", names, values, error,
                                    G_MARKUP_COLLECT_STRING, "gpa", &gpa,
                                    G_MARKUP_COLLECT_STRING | G_MARKUP_COLLECT_OPTIONAL, "kind", &kind,
                                    G_MARKUP_COLLECT_STRING | G_MARKUP_COLLECT_OPTIONAL, "count", &count,
                                    G_MARKUP_COLLECT_STRING | G_MARKUP_COLLECT_OPTIONAL, "lost-with", &lost,
                                    G_MARKUP_COLLECT_STRING | G_MARKUP_COLLECT_OPTIONAL, "source", &source,
                                    G_MARKUP_COLLECT_INVALID))
    return FALSE;
  /* (an optional attribute left out is NULL) */
  kind = kind != NULL ? kind : "ao";
  count = count != NULL ? count : "1";
  lost = lost != NULL ? lost : "0";
  if (!g_str_has_prefix (gpa, "0x") || !vmce_poison_xml_u64 (gpa + 2, 16, &p->gpa) ||
      (p->gpa & ~VMCE_PAGE_MASK) != 0) {
    g_set_error (error, G_MARKUP_ERROR, G_MARKUP_ERROR_INVALID_CONTENT, "gpa=\"%s\" is not a page address", gpa);
    return FALSE;
  }
  if (!vmce_mce_kind_from_string (kind, &p->kind)) {
    g_set_error (error, G_MARKUP_ERROR, G_MARKUP_ERROR_INVALID_CONTENT, "kind=\"%s\" is not ao or ar", kind);
    return FALSE;
  }
  if (!vmce_poison_xml_u64 (count, 10, &n) || n > G_MAXUINT || !vmce_poison_xml_u64 (lost, 10, &p->lost_with)) {
    g_set_error (error, G_MARKUP_ERROR, G_MARKUP_ERROR_INVALID_CONTENT, "count=\"%s\" or lost-with=\"%s\" is not a "
                 "number", count, lost);
    return FALSE;
  }
  p->count = (guint) n;
  p->simulated = g_strcmp0 (source, "simulated") == 0;
  p->host_poisoned = TRUE;
  p->result = p->count > 0 ? VMCE_RESULT_INJECTED : VMCE_RESULT_PENDING;
  g_ptr_array_add (st->pages, g_steal_pointer (&p));
  return TRUE;
}

static void
vmce_poison_xml_start (GMarkupParseContext *ctx, const gchar *element, const gchar **names, const gchar **values,
                       gpointer user_data, GError **error)
{
  VmcePoisonXmlParse *st = user_data;
  const gchar *local = vmce_poison_xml_local (element);
  const GSList *stack = g_markup_parse_context_get_element_stack (ctx);

  if (stack->next == NULL) {
    const gchar *from = NULL;

    if (g_strcmp0 (local, "poisoned") != 0) {
      g_set_error (error, G_MARKUP_ERROR, G_MARKUP_ERROR_UNKNOWN_ELEMENT, "<%s> is not <poisoned>", element);
      return;
    }
    for (guint i = 0; names[i] != NULL; i++)
      if (g_strcmp0 (names[i], "from") == 0)
        from = values[i];
    st->from = g_strdup (from != NULL ? from : "");
    st->root_seen = TRUE;
    return;
  }
  if (g_strcmp0 (local, "page") != 0 || stack->next->next != NULL) {
    g_set_error (error, G_MARKUP_ERROR, G_MARKUP_ERROR_UNKNOWN_ELEMENT, "<%s> is not a <page> of <poisoned>",
                 element);
    return;
  }
  vmce_poison_xml_page (st, names, values, error);
}

GPtrArray *
vmce_poison_xml_parse (const gchar *xml, gchar **from, GError **error)
{
  static const GMarkupParser parser = { .start_element = vmce_poison_xml_start };
  VmcePoisonXmlParse st = { .pages = g_ptr_array_new_with_free_func (g_free) };
  GMarkupParseContext *ctx = g_markup_parse_context_new (&parser, G_MARKUP_PREFIX_ERROR_POSITION, &st, NULL);
  gboolean ok = g_markup_parse_context_parse (ctx, xml, -1, error) && g_markup_parse_context_end_parse (ctx, error);

  g_markup_parse_context_free (ctx);
  if (ok && !st.root_seen) {
    g_set_error_literal (error, G_MARKUP_ERROR, G_MARKUP_ERROR_EMPTY, "no <poisoned> element");
    ok = FALSE;
  }
  if (!ok) {
    g_prefix_error (error, "the domain's vmce metadata: ");
    g_ptr_array_unref (st.pages);
    g_free (st.from);
    return NULL;
  }
  if (from != NULL)
    *from = g_steal_pointer (&st.from);
  g_free (st.from);
  return st.pages;
}
