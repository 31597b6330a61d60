/*
 * How vmced's log lines reach the operator.
 *
 * Under systemd (stderr is a journal stream: $JOURNAL_STREAM names it),
 * each line goes to journald through its native socket, GLib's
 * g_log_writer_journald(), with its priority and fields: `journalctl -u
 * vmced -p warning` shows what went wrong, and a line about a memory error
 * carries MESSAGE_ID (one per kind an operator alerts on), VMCE_VM and
 * VMCE_GPA, so that an alert can match on fields instead of parsing text.
 * Before, every line reached journald as plain text at priority info
 * (the stream's default), whatever it said.
 *
 * Elsewhere (a terminal, a file, a test) a line is "vmced: warning: ...",
 * as it always was; if journald's socket refuses a line, it goes to the
 * stream with the "<N>" prefix journald reads as its priority.
 *
 * A line is sent from wherever it is logged, the signal path included, as
 * any GLib program's: one datagram to journald (GLib's socket, as
 * sd_journal_send()'s, blocks only when journald's queue is full) or one
 * write to stderr, which is what it cost before.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-log"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log-writer.h"

static gboolean vmce_log_verbose = FALSE;

/* Fixed once shipped: an alert rule names them (vmced(8) lists them) */
static const struct {
  const gchar *name;
  const gchar *message_id;
  gint priority;
} vmce_log_kinds[VMCE_LOG_KIND_COUNT] = {
  [VMCE_LOG_FORWARDED] = { "forwarded", "392752ff4482457c816c965484d97868", 4 },
  [VMCE_LOG_NOT_INJECTED] = { "not-injected", "fdad53f8224b400696699cf90b1ec216", 3 },
  [VMCE_LOG_REFUSED] = { "refused", "bbcffd442bfc40d3b91e3df7fc4aa034", 3 },
  [VMCE_LOG_PAUSED] = { "paused", "6dca20bde5e5490d9d1db54bd8e4fa4a", 3 },
  [VMCE_LOG_PASSED] = { "passed", "77c48944f1124f3997374110f59a29a8", 4 },
  [VMCE_LOG_IGNORED] = { "ignored", "fec0138d4c2f4c2293ba5ef30587b15b", 5 },
  [VMCE_LOG_HUGE_PAGE_LOSS] = { "huge-page-loss", "1cae8ff616e0485393a8decc7245a357", 4 },
  [VMCE_LOG_MIGRATION_REFUSED] = { "migration-refused", "e8b4389d30fd418b9ee2c93a299f91bd",
                                   4 },
  [VMCE_LOG_ATTACH_FAILED] = { "attach-failed", "b93a46fcf4d34ca5a40da1efdbf767bc", 3 },
};

const gchar *
vmce_log_kind_message_id (VmceLogKind kind)
{
  return kind < VMCE_LOG_KIND_COUNT ? vmce_log_kinds[kind].message_id : NULL;
}

gint
vmce_log_kind_priority (VmceLogKind kind)
{
  return kind < VMCE_LOG_KIND_COUNT ? vmce_log_kinds[kind].priority : 7;
}

const gchar *
vmce_log_kind_to_string (VmceLogKind kind)
{
  return kind < VMCE_LOG_KIND_COUNT ? vmce_log_kinds[kind].name : "unknown";
}

/* syslog's: what journald and `journalctl -p` read, as GLib gives it for
 * a level. A record line (vmce_log_record(), vmce_log_error()) says its
 * own in VMCE_PRIORITY and is logged at GLib's message level: GLib's
 * critical is a programming error, and its warning and critical levels
 * abort a program under G_DEBUG=fatal-warnings and in every GTest, where
 * a memory error forwarded is no bug */
gint
vmce_log_level_priority (GLogLevelFlags level)
{
  if (level & G_LOG_LEVEL_ERROR)
    return 3;
  if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    return 4;
  if (level & G_LOG_LEVEL_MESSAGE)
    return 5;
  if (level & G_LOG_LEVEL_INFO)
    return 6;
  return 7;
}

/* A line's own PRIORITY field, where vmce_log_record() or
 * vmce_log_error() gave one, else its level's */
static gint
vmce_log_priority_of (GLogLevelFlags level, const GLogField *fields, gsize n_fields)
{
  for (gsize i = 0; i < n_fields; i++) {
    const gchar *v = fields[i].value;
    if (g_strcmp0 (fields[i].key, "VMCE_PRIORITY") == 0 && v != NULL && v[0] >= '0' && v[0] <= '7' && v[1] == '\0')
      return v[0] - '0';
  }
  return vmce_log_level_priority (level);
}

gchar *
vmce_log_format_line (gint priority, const gchar *domain, const gchar *message, gboolean priority_prefix)
{
  g_autofree gchar *prio = priority_prefix ? g_strdup_printf ("<%d>", priority) : g_strdup ("");
  const gchar *prefix = "";

  if (priority <= 3)
    prefix = "error: ";
  else if (priority == 4)
    prefix = "warning: ";
  else if (priority == 7)
    prefix = "debug: ";
  if (priority == 7 && domain != NULL)
    return g_strdup_printf ("%svmced: %s[%s] %s\n", prio, prefix, domain, message != NULL ? message : "");
  return g_strdup_printf ("%svmced: %s%s\n", prio, prefix, message != NULL ? message : "");
}

/* @fields with vmced's PRIORITY and SYSLOG_IDENTIFIER, for journald */
static GLogWriterOutput
vmce_log_to_journald (GLogLevelFlags level, gint prio, const GLogField *fields, gsize n_fields)
{
  g_autofree GLogField *all = g_new0 (GLogField, n_fields + 2);
  gchar priority[2] = { (gchar) ('0' + prio), '\0' };
  gsize n = 0;

  for (gsize i = 0; i < n_fields; i++)
    if (g_strcmp0 (fields[i].key, "PRIORITY") != 0 && g_strcmp0 (fields[i].key, "SYSLOG_IDENTIFIER") != 0 &&
        g_strcmp0 (fields[i].key, "VMCE_PRIORITY") != 0)
      all[n++] = fields[i];
  all[n++] = (GLogField) { "PRIORITY", priority, -1 };
  all[n++] = (GLogField) { "SYSLOG_IDENTIFIER", "vmced", -1 };
  return g_log_writer_journald (level, all, n, NULL);
}

GLogWriterOutput
vmce_log_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  const gchar *message = NULL;
  const gchar *domain = NULL;
  gboolean journal;
  g_autofree gchar *line = NULL;
  gint priority;

  if (level & G_LOG_LEVEL_DEBUG && !vmce_log_verbose)
    return G_LOG_WRITER_HANDLED;
  priority = vmce_log_priority_of (level, fields, n_fields);
  journal = g_log_writer_is_journald (fileno (stderr));
  if (journal && vmce_log_to_journald (level, priority, fields, n_fields) == G_LOG_WRITER_HANDLED)
    return G_LOG_WRITER_HANDLED;
  for (gsize i = 0; i < n_fields; i++) {
    if (g_strcmp0 (fields[i].key, "MESSAGE") == 0)
      message = fields[i].value;
    else if (g_strcmp0 (fields[i].key, "GLIB_DOMAIN") == 0)
      domain = fields[i].value;
  }
  line = vmce_log_format_line (priority, domain, message, journal);
  fputs (line, stderr);
  return G_LOG_WRITER_HANDLED;
}

void
vmce_log_writer_install (void)
{
  g_log_set_writer_func (vmce_log_writer, NULL, NULL);
}

void
vmce_log_set_verbose (gboolean verbose)
{
  vmce_log_verbose = verbose;
}

void
vmce_log_record (VmceLogKind kind, const gchar *vm, const guint64 *gpa, guint64 seq, const gchar *format, ...)
{
  g_autofree gchar *message = NULL;
  g_autofree gchar *gpa_text = gpa != NULL ? g_strdup_printf ("0x%" G_GINT64_MODIFIER "x", *gpa) : NULL;
  g_autofree gchar *seq_text = seq != 0 ? g_strdup_printf ("%" G_GUINT64_FORMAT, seq) : NULL;
  gchar priority[2] = { (gchar) ('0' + vmce_log_kinds[kind].priority), '\0' };
  GLogField fields[8];
  gsize n = 0;
  va_list args;

  g_return_if_fail (kind < VMCE_LOG_KIND_COUNT);
  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  fields[n++] = (GLogField) { "MESSAGE", message, -1 };
  fields[n++] = (GLogField) { "MESSAGE_ID", vmce_log_kinds[kind].message_id, -1 };
  fields[n++] = (GLogField) { "GLIB_DOMAIN", "vmced", -1 };
  fields[n++] = (GLogField) { "VMCE_EVENT", vmce_log_kinds[kind].name, -1 };
  fields[n++] = (GLogField) { "VMCE_PRIORITY", priority, -1 };
  if (vm != NULL)
    fields[n++] = (GLogField) { "VMCE_VM", vm, -1 };
  if (gpa_text != NULL)
    fields[n++] = (GLogField) { "VMCE_GPA", gpa_text, -1 };
  if (seq_text != NULL)
    fields[n++] = (GLogField) { "VMCE_SEQ", seq_text, -1 };
  g_log_structured_array (G_LOG_LEVEL_MESSAGE, fields, n);
}

void
vmce_log_error (const gchar *format, ...)
{
  g_autofree gchar *message = NULL;
  GLogField fields[3];
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  fields[0] = (GLogField) { "MESSAGE", message, -1 };
  fields[1] = (GLogField) { "GLIB_DOMAIN", "vmced", -1 };
  fields[2] = (GLogField) { "VMCE_PRIORITY", "3", -1 };
  g_log_structured_array (G_LOG_LEVEL_MESSAGE, fields, G_N_ELEMENTS (fields));
}
