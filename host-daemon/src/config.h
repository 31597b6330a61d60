/*
 * vmced.conf: a GKeyFile (vmced.conf(5) in vmced.8). Errors name the file
 * and the line.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "policy.h"

typedef struct {
  gchar *path;
  gchar *socket_path;  /* [vmced] socket, or NULL */
  gchar *journal_path; /* [vmced] journal, or NULL */
  gint inject_gap_ms;  /* [vmced] inject-gap-ms, or -1 */
  gint realtime_priority; /* [vmced] realtime-priority, or -1 */
  gint salvage_reserve_mb; /* [vmced] salvage-reserve-mb, or -1 */
  gboolean has_policy; /* [vmced] policy */
  VmcePolicy policy;
  gboolean has_migration; /* [vmced] migration */
  VmceMigrationPolicy migration;
  gboolean has_hugepage; /* [vmced] hugepage */
  VmceHugepagePolicy hugepage;
  gchar *uri;          /* [libvirt] uri, or NULL */
  gchar **domains;     /* [libvirt] domains, or NULL */
  gboolean all_domains; /* [libvirt] all-domains */
  GHashTable *domain_policies; /* [domain NAME] policy: name -> VmcePolicy + 1 */
  GHashTable *domain_migration; /* [domain NAME] migration: name -> VmceMigrationPolicy + 1 */
  GHashTable *domain_hugepage;  /* [domain NAME] hugepage: name -> VmceHugepagePolicy + 1 */
  gchar *metrics_textfile; /* [metrics] textfile, or NULL */
  gchar *metrics_listen;   /* [metrics] listen, or NULL */
  gchar **attach_sockets;   /* [attach] sockets: absolute patterns, or NULL */
  gint attach_greeting_ms;  /* [attach] greeting-ms, or -1 */
} VmceConfig;

VmceConfig *vmce_config_load (const gchar *path, GError **error);
void vmce_config_free (VmceConfig *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceConfig, vmce_config_free)

/* The policy for domain @name: its own, else [vmced]'s, else @fallback */
VmcePolicy vmce_config_policy_for (const VmceConfig *self, const gchar *name, VmcePolicy fallback);
/* The same for the migration policy */
VmceMigrationPolicy vmce_config_migration_for (const VmceConfig *self,
                                               const gchar *name,
                                               VmceMigrationPolicy fallback);
/* The same for a lost huge page */
VmceHugepagePolicy vmce_config_hugepage_for (const VmceConfig *self,
                                             const gchar *name,
                                             VmceHugepagePolicy fallback);

/* "HOST:PORT", HOST an IP address (vmced resolves no names; IPv6 in
 * brackets): [metrics] listen, --metrics-listen */
GSocketAddress *vmce_config_parse_address (const gchar *text, GError **error);
