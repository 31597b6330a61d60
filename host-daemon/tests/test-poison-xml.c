/*
 * poison-xml: the pages a libvirt domain carries in its metadata, there and
 * back (as vmced writes them, and as libvirt gives them back with its
 * namespace prefix), and what is not such a list, refused saying why
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "poison-xml.h"

static void
test_poison_xml_round_trip (void)
{
  g_autoptr(GPtrArray) pages = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) back = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *xml = NULL;
  g_autofree gchar *prefixed = NULL;
  g_autofree gchar *from = NULL;
  VmcePoisonedPage *p;

  p = g_new0 (VmcePoisonedPage, 1);
  p->gpa = 0x29a2000;
  p->kind = VMCE_MCE_KIND_AO;
  p->count = 1;
  p->simulated = TRUE;
  g_ptr_array_add (pages, p);
  p = g_new0 (VmcePoisonedPage, 1);
  p->gpa = 0x140000000; /* above 4 GiB */
  p->kind = VMCE_MCE_KIND_AR;
  p->count = 0;
  p->lost_with = 42; /* a lost huge page's page, never told */
  g_ptr_array_add (pages, p);
  xml = vmce_poison_xml_build ("web<1>", "a&b", pages);
  g_assert_nonnull (strstr (xml, "from=\"web&lt;1&gt;\" by=\"a&amp;b\""));
  back = vmce_poison_xml_parse (xml, &from, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (from, ==, "web<1>");
  g_assert_cmpuint (back->len, ==, 2);
  p = g_ptr_array_index (back, 0);
  g_assert_cmphex (p->gpa, ==, 0x29a2000);
  g_assert_cmpint (p->kind, ==, VMCE_MCE_KIND_AO);
  g_assert_true (p->simulated && p->host_poisoned && vmce_poisoned_page_told (p));
  p = g_ptr_array_index (back, 1);
  g_assert_cmphex (p->gpa, ==, 0x140000000);
  g_assert_cmpint (p->kind, ==, VMCE_MCE_KIND_AR);
  g_assert_false (p->simulated || vmce_poisoned_page_told (p));
  g_assert_cmpuint (p->lost_with, ==, 42);
  g_clear_pointer (&back, g_ptr_array_unref);

  /* what virsh metadata / virDomainGetMetadata give back */
  prefixed = g_strdup ("<vmce:poisoned xmlns:vmce=\"" VMCE_POISON_XML_NS "\" from=\"a\">\n"
                       "  <vmce:page gpa=\"0x1000\"/>\n</vmce:poisoned>\n");
  back = vmce_poison_xml_parse (prefixed, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->len, ==, 1);
  g_assert_cmphex (((VmcePoisonedPage *) g_ptr_array_index (back, 0))->gpa, ==, 0x1000);
}

static void
test_poison_xml_bad (void)
{
  static const struct {
    const gchar *xml, *says;
  } bad[] = {
    { "", "empty" },
    { "<!-- nothing -->", "no <poisoned> element" },
    { "<other/>", "<other> is not <poisoned>" },
    { "<poisoned><page/></poisoned>", "gpa" },
    { "<poisoned><page gpa=\"4096\"/></poisoned>", "not a page address" },
    { "<poisoned><page gpa=\"0x1001\"/></poisoned>", "not a page address" },
    { "<poisoned><page gpa=\"0x1000\" kind=\"maybe\"/></poisoned>", "not ao or ar" },
    { "<poisoned><page gpa=\"0x1000\" count=\"-1\"/></poisoned>", "not a number" },
    { "<poisoned><page gpa=\"0x1000\"><page gpa=\"0x2000\"/></page></poisoned>", "is not a <page> of" },
    { "<poisoned><page gpa=\"0x1000\"", "" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) pages = vmce_poison_xml_parse (bad[i].xml, NULL, &error);

    g_assert_null (pages);
    g_assert_nonnull (error);
    if (strstr (error->message, bad[i].says) == NULL || !g_str_has_prefix (error->message, "the domain's vmce"))
      g_error ("case %u: %s", i, error->message);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/poison-xml/round-trip", test_poison_xml_round_trip);
  g_test_add_func ("/poison-xml/bad", test_poison_xml_bad);
  return g_test_run ();
}
