/*
 * vmced's counters and gauges, and their text for a scraper: OpenMetrics
 * 1.0 (vmced's own endpoint) or Prometheus text 0.0.4 (node_exporter's
 * textfile collector, which reads only that). Pure: no I/O; the daemon
 * counts into it, metrics-export.c delivers the text.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

#include "mce-encode.h"
#include "mce-event.h"

typedef enum {
  VMCE_METRICS_OPENMETRICS, /* application/openmetrics-text; version=1.0.0 */
  VMCE_METRICS_PROMETHEUS,  /* text/plain; version=0.0.4 */
} VmceMetricsFormat;

#define VMCE_METRICS_OPENMETRICS_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define VMCE_METRICS_PROMETHEUS_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct _VmceMetrics VmceMetrics;

/* @start_time_us: wall clock at vmced's start */
VmceMetrics *vmce_metrics_new (gint64 start_time_us, const gchar *version);
void vmce_metrics_free (VmceMetrics *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceMetrics, vmce_metrics_free)

/* A VM attached: its series appear, at 0, so that an alert on their
 * increase sees the first error (a series born at 1 has no increase) */
void vmce_metrics_vm_attached (VmceMetrics *self, const gchar *vm);
/* It went: its series go with it (Prometheus marks them stale) */
void vmce_metrics_vm_gone (VmceMetrics *self, const gchar *vm);

/* The outcome label of a memory error's result: what an operator alerts
 * on, the same classes as its journald MESSAGE_ID */
const gchar *vmce_metrics_outcome (VmceResult result);
void vmce_metrics_count_error (VmceMetrics *self, const gchar *vm, VmceMceKind kind, VmceResult result);
/* A journal record that is not a memory error: the huge-page losses,
 * salvages, refused migrations and failed attaches it tells of */
void vmce_metrics_count_record (VmceMetrics *self, JsonNode *record);
void vmce_metrics_count_journal_error (VmceMetrics *self);

/* Gauges, set by their owner before each render */
void vmce_metrics_set_poisoned (VmceMetrics *self, const gchar *vm, guint pages);
/* Pages of QEMUs vmced does not watch now, known from its journal */
void vmce_metrics_set_poisoned_detached (VmceMetrics *self, guint pages);

/* Times anything counted changed; a writer compares it */
guint64 vmce_metrics_get_generation (VmceMetrics *self);

GBytes *vmce_metrics_render (VmceMetrics *self, VmceMetricsFormat format);
