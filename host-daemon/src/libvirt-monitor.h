/*
 * QMP through libvirt: libvirt owns a domain's monitor socket, so vmced
 * speaks to QEMU through virDomainQemuMonitorCommand and hears its events
 * through virConnectDomainQemuMonitorEventRegister. This module makes that
 * look like any QMP peer: the socket it hands out speaks QMP (greeting,
 * replies with their ids, events), so VmceQmpClient works unchanged.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <libvirt/libvirt.h>

typedef struct _VmceLibvirtMonitor VmceLibvirtMonitor;

/* @client: the QMP end for VmceQmpClient. The libvirt event loop must run
 * on the default main context (gvir_event_register()). */
VmceLibvirtMonitor *vmce_libvirt_monitor_new (virConnectPtr conn,
                                              virDomainPtr dom,
                                              GSocket **client,
                                              GError **error);
void vmce_libvirt_monitor_free (VmceLibvirtMonitor *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceLibvirtMonitor, vmce_libvirt_monitor_free)
