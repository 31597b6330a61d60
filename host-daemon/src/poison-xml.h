/*
 * A VM's poisoned pages as a small XML element: what a libvirt domain
 * carries in its metadata, so that the list goes wherever the domain goes
 * (a migration to another host, its own vmced).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "poison-set.h"

/* libvirt's key and namespace for it (virDomainSetMetadata) */
#define VMCE_POISON_XML_KEY "vmce"
#define VMCE_POISON_XML_NS "https://vmce.dev/xmlns/poisoned/1"

/* <poisoned from="VM" by="ID"><page gpa="0x..." kind="ao" count="1" .../>...
 * </poisoned> of @pages (of VmcePoisonedPage), without a namespace: libvirt
 * puts its own. @by (or NULL: left out) says which vmced run wrote it and
 * so holds the pages poisoned in the domain's QEMU now: after a migration,
 * a list by another than the source's is the destination's word that its
 * pages are in (run/virsh/drain waits for it before the guest runs). */
gchar *vmce_poison_xml_build (const gchar *from, const gchar *by, GPtrArray *pages);
/* The pages of such an element (with or without a namespace prefix), as
 * VmcePoisonedPage with their hva unknown (0); @from where they came from.
 * NULL and @error for anything else, saying where. */
GPtrArray *vmce_poison_xml_parse (const gchar *xml, gchar **from, GError **error);
