/*
 * vmced's libvirt mode: attach to the domains of a libvirt connection as
 * they run, follow them as they start and stop, and reconnect when the
 * connection is lost.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "config.h"
#include "daemon.h"

typedef struct _VmceLibvirtWatch VmceLibvirtWatch;

/* @domains: the names to watch, or NULL for every domain.
 * Without @wait, fails when the connection cannot be opened. With @wait (a
 * URI from vmced.conf, as installed on a host that may have no libvirt),
 * says so once and tries again every VMCE_WAIT_SECONDS: vmced meanwhile
 * serves the QEMUs attached by hand. */
VmceLibvirtWatch *vmce_libvirt_watch_new (VmceDaemon *daemon,
                                          const gchar *uri,
                                          const gchar *const *domains,
                                          VmcePolicy policy,
                                          gboolean wait,
                                          GError **error);
/* Per-domain policies from now on (for domains attached after); not taken */
void vmce_libvirt_watch_set_config (VmceLibvirtWatch *self, const VmceConfig *config);
void vmce_libvirt_watch_free (VmceLibvirtWatch *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceLibvirtWatch, vmce_libvirt_watch_free)
