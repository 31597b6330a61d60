/*
 * vmced.conf (see config.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmced-config"

#include <gio/gio.h>

#include "config.h"

static const gchar *const vmced_keys[] = { "socket", "journal", "inject-gap-ms", "policy",
                                           "migration", "hugepage", "realtime-priority",
                                           "salvage-reserve-mb", NULL };
static const gchar *const libvirt_keys[] = { "uri", "domains", "all-domains", NULL };
static const gchar *const domain_keys[] = { "policy", "migration", "hugepage", NULL };
static const gchar *const metrics_keys[] = { "textfile", "listen", NULL };
static const gchar *const attach_keys[] = { "sockets", "greeting-ms", NULL };

/* GKeyFile keeps no line numbers: find the group's (or its key's) line in
 * the text, for messages. A key given twice is GKeyFile's last value, so
 * its line is the last one (in any of the group's sections). */
static guint
vmce_config_line_of (gchar **lines, const gchar *group, const gchar *key)
{
  g_autofree gchar *want = g_strdup_printf ("[%s]", group);
  gboolean in_group = FALSE;
  guint found = 0;

  for (guint i = 0; lines[i] != NULL; i++) {
    g_autofree gchar *s = g_strstrip (g_strdup (lines[i]));
    if (s[0] == '[') {
      in_group = g_strcmp0 (s, want) == 0;
      if (in_group && key == NULL)
        return i + 1;
      continue;
    }
    if (in_group && key != NULL) {
      gsize n = strlen (key);
      if (strncmp (s, key, n) == 0 && (s[n] == '=' || s[n] == ' ' || s[n] == '\t'))
        found = i + 1;
    }
  }
  return found;
}

/* The first line GKeyFile would not take: not blank, a comment, a group or
 * a key=value */
static guint
vmce_config_bad_line (gchar **lines)
{
  for (guint i = 0; lines[i] != NULL; i++) {
    g_autofree gchar *s = g_strstrip (g_strdup (lines[i]));
    if (s[0] == '\0' || s[0] == '#' || (s[0] == '[' && g_str_has_suffix (s, "]")) ||
        (strchr (s, '=') != NULL && s[0] != '='))
      continue;
    return i + 1;
  }
  return 0;
}

static gboolean
vmce_config_fail (GError **error, const gchar *path, guint line, const gchar *fmt, ...)
    G_GNUC_PRINTF (4, 5);

static gboolean
vmce_config_fail (GError **error, const gchar *path, guint line, const gchar *fmt, ...)
{
  va_list ap;
  g_autofree gchar *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (line > 0)
    g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_PARSE, "%s:%u: %s", path, line, msg);
  else
    g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_PARSE, "%s: %s", path, msg);
  return FALSE;
}

static gboolean
vmce_config_check_keys (GKeyFile *kf,
                        gchar **lines,
                        const gchar *path,
                        const gchar *group,
                        const gchar *const *known,
                        GError **error)
{
  g_auto(GStrv) keys = g_key_file_get_keys (kf, group, NULL, NULL);

  for (guint i = 0; keys != NULL && keys[i] != NULL; i++) {
    if (!g_strv_contains (known, keys[i])) {
      g_autofree gchar *list = g_strjoinv (", ", (gchar **) known);
      return vmce_config_fail (error, path, vmce_config_line_of (lines, group, keys[i]),
                               "unknown key '%s' in [%s] (known: %s)", keys[i], group, list);
    }
  }
  return TRUE;
}

static gboolean
vmce_config_policy (GKeyFile *kf,
                    gchar **lines,
                    const gchar *path,
                    const gchar *group,
                    VmcePolicy *policy,
                    GError **error)
{
  g_autofree gchar *value = g_key_file_get_string (kf, group, "policy", NULL);

  if (!vmce_policy_from_string (g_strstrip (value), policy))
    return vmce_config_fail (error, path, vmce_config_line_of (lines, group, "policy"),
                             "policy must be %s, not '%s'", vmce_policy_choices (),
                             value);
  return TRUE;
}

static gboolean
vmce_config_migration (GKeyFile *kf,
                       gchar **lines,
                       const gchar *path,
                       const gchar *group,
                       VmceMigrationPolicy *migration,
                       GError **error)
{
  g_autofree gchar *value = g_key_file_get_string (kf, group, "migration", NULL);

  if (!vmce_migration_policy_from_string (g_strstrip (value), migration))
    return vmce_config_fail (error, path, vmce_config_line_of (lines, group, "migration"),
                             "migration must be carry or refuse, not '%s'", value);
  return TRUE;
}

static gboolean
vmce_config_hugepage (GKeyFile *kf,
                      gchar **lines,
                      const gchar *path,
                      const gchar *group,
                      VmceHugepagePolicy *hugepage,
                      GError **error)
{
  g_autofree gchar *value = g_key_file_get_string (kf, group, "hugepage", NULL);

  if (!vmce_hugepage_policy_from_string (g_strstrip (value), hugepage))
    return vmce_config_fail (error, path, vmce_config_line_of (lines, group, "hugepage"),
                             "hugepage must be " VMCE_HUGEPAGE_NAMES ", not '%s'", value);
  return TRUE;
}

static gboolean
vmce_config_load_vmced (VmceConfig *self, GKeyFile *kf, gchar **lines, GError **error)
{
  g_autoptr(GError) local = NULL;

  if (!vmce_config_check_keys (kf, lines, self->path, "vmced", vmced_keys, error))
    return FALSE;
  self->socket_path = g_key_file_get_string (kf, "vmced", "socket", NULL);
  self->journal_path = g_key_file_get_string (kf, "vmced", "journal", NULL);
  if (g_key_file_has_key (kf, "vmced", "inject-gap-ms", NULL)) {
    self->inject_gap_ms = g_key_file_get_integer (kf, "vmced", "inject-gap-ms", &local);
    if (local != NULL || self->inject_gap_ms < 0)
      return vmce_config_fail (error, self->path,
                               vmce_config_line_of (lines, "vmced", "inject-gap-ms"),
                               "inject-gap-ms must be a number of milliseconds, 0 or more");
  }
  if (g_key_file_has_key (kf, "vmced", "realtime-priority", NULL)) {
    self->realtime_priority = g_key_file_get_integer (kf, "vmced", "realtime-priority", &local);
    if (local != NULL || self->realtime_priority < 0 || self->realtime_priority > 99)
      return vmce_config_fail (error, self->path,
                               vmce_config_line_of (lines, "vmced", "realtime-priority"),
                               "realtime-priority must be 0 (off) or a SCHED_FIFO priority, 1 to 99");
  }
  if (g_key_file_has_key (kf, "vmced", "salvage-reserve-mb", NULL)) {
    self->salvage_reserve_mb = g_key_file_get_integer (kf, "vmced", "salvage-reserve-mb", &local);
    if (local != NULL || self->salvage_reserve_mb < 0)
      return vmce_config_fail (error, self->path,
                               vmce_config_line_of (lines, "vmced", "salvage-reserve-mb"),
                               "salvage-reserve-mb must be a number of MiB, 0 or more");
  }
  if (g_key_file_has_key (kf, "vmced", "policy", NULL)) {
    if (!vmce_config_policy (kf, lines, self->path, "vmced", &self->policy, error))
      return FALSE;
    self->has_policy = TRUE;
  }
  if (g_key_file_has_key (kf, "vmced", "migration", NULL)) {
    if (!vmce_config_migration (kf, lines, self->path, "vmced", &self->migration, error))
      return FALSE;
    self->has_migration = TRUE;
  }
  if (g_key_file_has_key (kf, "vmced", "hugepage", NULL)) {
    if (!vmce_config_hugepage (kf, lines, self->path, "vmced", &self->hugepage, error))
      return FALSE;
    self->has_hugepage = TRUE;
  }
  return TRUE;
}

static gboolean
vmce_config_load_libvirt (VmceConfig *self, GKeyFile *kf, gchar **lines, GError **error)
{
  g_autoptr(GError) local = NULL;
  guint line = vmce_config_line_of (lines, "libvirt", NULL);

  if (!vmce_config_check_keys (kf, lines, self->path, "libvirt", libvirt_keys, error))
    return FALSE;
  self->uri = g_key_file_get_string (kf, "libvirt", "uri", NULL);
  self->domains = g_key_file_get_string_list (kf, "libvirt", "domains", NULL, NULL);
  if (g_key_file_has_key (kf, "libvirt", "all-domains", NULL)) {
    self->all_domains = g_key_file_get_boolean (kf, "libvirt", "all-domains", &local);
    if (local != NULL)
      return vmce_config_fail (error, self->path,
                               vmce_config_line_of (lines, "libvirt", "all-domains"),
                               "all-domains must be true or false");
  }
  if (self->uri == NULL)
    return vmce_config_fail (error, self->path, line, "[libvirt] needs uri");
  if ((self->domains != NULL) == self->all_domains)
    return vmce_config_fail (error, self->path, line,
                             "[libvirt] needs domains or all-domains = true (one of them)");
  return TRUE;
}

static gboolean
vmce_config_load_domain (VmceConfig *self,
                         GKeyFile *kf,
                         gchar **lines,
                         const gchar *group,
                         GError **error)
{
  VmcePolicy policy = VMCE_POLICY_FORWARD;
  VmceMigrationPolicy migration = VMCE_MIGRATION_CARRY;
  VmceHugepagePolicy hugepage = VMCE_HUGEPAGE_DEFAULT;

  if (!vmce_config_check_keys (kf, lines, self->path, group, domain_keys, error))
    return FALSE;
  if (g_key_file_has_key (kf, group, "policy", NULL)) {
    if (!vmce_config_policy (kf, lines, self->path, group, &policy, error))
      return FALSE;
    g_hash_table_insert (self->domain_policies, g_strdup (group + 7),
                         GINT_TO_POINTER (policy + 1));
  }
  if (g_key_file_has_key (kf, group, "migration", NULL)) {
    if (!vmce_config_migration (kf, lines, self->path, group, &migration, error))
      return FALSE;
    g_hash_table_insert (self->domain_migration, g_strdup (group + 7),
                         GINT_TO_POINTER (migration + 1));
  }
  if (g_key_file_has_key (kf, group, "hugepage", NULL)) {
    if (!vmce_config_hugepage (kf, lines, self->path, group, &hugepage, error))
      return FALSE;
    g_hash_table_insert (self->domain_hugepage, g_strdup (group + 7), GINT_TO_POINTER (hugepage + 1));
  }
  return TRUE;
}

/* --- [metrics] ------------------------------------------------------------ */

GSocketAddress *
vmce_config_parse_address (const gchar *text, GError **error)
{
  g_autoptr(GSocketConnectable) parsed = NULL;
  g_autoptr(GInetAddress) ip = NULL;
  const gchar *colon = strrchr (text, ':');
  GNetworkAddress *na;

  /* the port is not optional (port 0: any free one); an IPv6 address
   * takes its brackets then */
  parsed = g_network_address_parse (text, 0, NULL);
  na = G_NETWORK_ADDRESS (parsed);
  if (parsed != NULL)
    ip = g_inet_address_new_from_string (g_network_address_get_hostname (na));
  if (ip == NULL || colon == NULL || (strchr (text, ':') != colon && colon[-1] != ']')) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "'%s' is not an IP address and port (127.0.0.1:9469, [::1]:9469)", text);
    return NULL;
  }
  return g_inet_socket_address_new (ip, g_network_address_get_port (na));
}

/* Where the metrics go (metrics-export.h): checked here, so that a typo is
 * the file's line and not a quiet scrape of nothing */
static gboolean
vmce_config_load_metrics (VmceConfig *self, GKeyFile *kf, gchar **lines, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autoptr(GSocketAddress) sa = NULL;

  if (!vmce_config_check_keys (kf, lines, self->path, "metrics", metrics_keys, error))
    return FALSE;
  self->metrics_textfile = g_key_file_get_string (kf, "metrics", "textfile", NULL);
  self->metrics_listen = g_key_file_get_string (kf, "metrics", "listen", NULL);
  if (self->metrics_textfile != NULL &&
      (!g_path_is_absolute (g_strstrip (self->metrics_textfile)) ||
       !g_str_has_suffix (self->metrics_textfile, ".prom")))
    return vmce_config_fail (error, self->path, vmce_config_line_of (lines, "metrics", "textfile"),
                             "textfile must be an absolute path ending in .prom (node_exporter reads only "
                             "those), not '%s'", self->metrics_textfile);
  if (self->metrics_listen != NULL) {
    sa = vmce_config_parse_address (g_strstrip (self->metrics_listen), &local);
    if (sa == NULL)
      return vmce_config_fail (error, self->path, vmce_config_line_of (lines, "metrics", "listen"),
                               "listen: %s", local->message);
  }
  return TRUE;
}

/* [attach]: QMP sockets found by pattern. Only the last component may hold
 * wildcards: its directory is the one watched for new sockets */
static gboolean
vmce_config_load_attach (VmceConfig *self, GKeyFile *kf, gchar **lines, GError **error)
{
  g_autoptr(GError) local = NULL;
  guint line = vmce_config_line_of (lines, "attach", "sockets");

  if (!vmce_config_check_keys (kf, lines, self->path, "attach", attach_keys, error))
    return FALSE;
  self->attach_sockets = g_key_file_get_string_list (kf, "attach", "sockets", NULL, NULL);
  if (self->attach_sockets == NULL || self->attach_sockets[0] == NULL)
    return vmce_config_fail (error, self->path, vmce_config_line_of (lines, "attach", NULL),
                             "[attach] needs sockets = PATTERN (e.g. /run/vmce/qmp/*.sock)");
  for (guint i = 0; self->attach_sockets[i] != NULL; i++) {
    gchar *pattern = g_strstrip (self->attach_sockets[i]);
    g_autofree gchar *dir = g_path_get_dirname (pattern);

    if (!g_path_is_absolute (pattern) || g_str_has_suffix (pattern, "/"))
      return vmce_config_fail (error, self->path, line,
                               "sockets: '%s' is not an absolute path to sockets", pattern);
    if (strpbrk (dir, "*?[") != NULL)
      return vmce_config_fail (error, self->path, line,
                               "sockets: '%s': wildcards only in the last part (its directory is "
                               "the one watched)", pattern);
  }
  if (g_key_file_has_key (kf, "attach", "greeting-ms", NULL)) {
    self->attach_greeting_ms = g_key_file_get_integer (kf, "attach", "greeting-ms", &local);
    if (local != NULL || self->attach_greeting_ms < 1 || self->attach_greeting_ms > 60000)
      return vmce_config_fail (error, self->path,
                               vmce_config_line_of (lines, "attach", "greeting-ms"),
                               "greeting-ms must be a number of milliseconds, 1 to 60000");
  }
  return TRUE;
}

VmceConfig *
vmce_config_load (const gchar *path, GError **error)
{
  g_autoptr(VmceConfig) self = g_new0 (VmceConfig, 1);
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GError) local = NULL;
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;
  g_auto(GStrv) groups = NULL;

  self->path = g_strdup (path);
  self->inject_gap_ms = -1;
  self->realtime_priority = -1;
  self->salvage_reserve_mb = -1;
  self->attach_greeting_ms = -1;
  self->domain_policies = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->domain_migration = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->domain_hugepage = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  if (!g_file_get_contents (path, &text, NULL, error)) {
    g_prefix_error (error, "config: ");
    return NULL;
  }
  lines = g_strsplit (text, "\n", -1);
  if (!g_key_file_load_from_data (kf, text, (gsize) -1, G_KEY_FILE_NONE, &local)) {
    vmce_config_fail (error, path, vmce_config_bad_line (lines), "%s", local->message);
    return NULL;
  }
  groups = g_key_file_get_groups (kf, NULL);
  for (guint i = 0; groups[i] != NULL; i++) {
    gboolean ok;

    if (g_strcmp0 (groups[i], "vmced") == 0)
      ok = vmce_config_load_vmced (self, kf, lines, error);
    else if (g_strcmp0 (groups[i], "libvirt") == 0)
      ok = vmce_config_load_libvirt (self, kf, lines, error);
    else if (g_strcmp0 (groups[i], "attach") == 0)
      ok = vmce_config_load_attach (self, kf, lines, error);
    else if (g_str_has_prefix (groups[i], "domain ") && groups[i][7] != '\0')
      ok = vmce_config_load_domain (self, kf, lines, groups[i], error);
    else if (g_strcmp0 (groups[i], "metrics") == 0)
      ok = vmce_config_load_metrics (self, kf, lines, error);
    else
      ok = vmce_config_fail (error, path, vmce_config_line_of (lines, groups[i], NULL),
                             "unknown group [%s] (known: [vmced], [libvirt], [metrics], [attach], [domain NAME])",
                             groups[i]);
    if (!ok)
      return NULL;
  }
  return g_steal_pointer (&self);
}

VmcePolicy
vmce_config_policy_for (const VmceConfig *self, const gchar *name, VmcePolicy fallback)
{
  gpointer p;

  if (self == NULL)
    return fallback;
  p = name != NULL ? g_hash_table_lookup (self->domain_policies, name) : NULL;
  if (p != NULL)
    return (VmcePolicy) (GPOINTER_TO_INT (p) - 1);
  return self->has_policy ? self->policy : fallback;
}

VmceMigrationPolicy
vmce_config_migration_for (const VmceConfig *self, const gchar *name, VmceMigrationPolicy fallback)
{
  gpointer p;

  if (self == NULL)
    return fallback;
  p = name != NULL ? g_hash_table_lookup (self->domain_migration, name) : NULL;
  if (p != NULL)
    return (VmceMigrationPolicy) (GPOINTER_TO_INT (p) - 1);
  return self->has_migration ? self->migration : fallback;
}

VmceHugepagePolicy
vmce_config_hugepage_for (const VmceConfig *self, const gchar *name, VmceHugepagePolicy fallback)
{
  gpointer p;

  if (self == NULL)
    return fallback;
  p = name != NULL ? g_hash_table_lookup (self->domain_hugepage, name) : NULL;
  if (p != NULL)
    return (VmceHugepagePolicy) (GPOINTER_TO_INT (p) - 1);
  return self->has_hugepage ? self->hugepage : fallback;
}

void
vmce_config_free (VmceConfig *self)
{
  if (self == NULL)
    return;
  g_free (self->path);
  g_free (self->socket_path);
  g_free (self->journal_path);
  g_free (self->uri);
  g_strfreev (self->domains);
  g_strfreev (self->attach_sockets);
  g_clear_pointer (&self->domain_policies, g_hash_table_unref);
  g_clear_pointer (&self->domain_migration, g_hash_table_unref);
  g_clear_pointer (&self->domain_hugepage, g_hash_table_unref);
  g_free (self->metrics_textfile);
  g_free (self->metrics_listen);
  g_free (self);
}
