/*
 * vmced.conf: what it sets, and errors that name the file and the line.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib/gstdio.h>
#include <unistd.h>

#include "config.h"

static gchar *
write_config (const gchar *text)
{
  g_autoptr(GError) error = NULL;
  gchar *path = NULL;
  gint fd = g_file_open_tmp ("vmced-XXXXXX.conf", &path, &error);

  g_assert_no_error (error);
  close (fd);
  g_assert_true (g_file_set_contents (path, text, -1, &error));
  return path;
}

static void
test_config_good (void)
{
  g_autofree gchar *path = write_config ("# vmced.conf\n"
                                         "[vmced]\n"
                                         "journal = /var/lib/vmce/j.jsonl\n"
                                         "inject-gap-ms = 5\n"
                                         "realtime-priority = 1\n"
                                         "salvage-reserve-mb = 512\n"
                                         "policy = ignore-ao\n"
                                         "migration = refuse\n"
                                         "hugepage = all\n"
                                         "\n"
                                         "[libvirt]\n"
                                         "uri = qemu:///system\n"
                                         "domains = web1;web2\n"
                                         "\n"
                                         "[domain web2]\n"
                                         "policy = stop\n"
                                         "migration = carry\n"
                                         "hugepage = one\n");
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceConfig) config = vmce_config_load (path, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (config->journal_path, ==, "/var/lib/vmce/j.jsonl");
  g_assert_null (config->socket_path);
  g_assert_cmpint (config->inject_gap_ms, ==, 5);
  g_assert_cmpint (config->realtime_priority, ==, 1);
  g_assert_cmpint (config->salvage_reserve_mb, ==, 512);
  g_assert_cmpstr (config->uri, ==, "qemu:///system");
  g_assert_cmpuint (g_strv_length (config->domains), ==, 2);
  g_assert_false (config->all_domains);
  g_assert_cmpint (vmce_config_policy_for (config, "web2", VMCE_POLICY_FORWARD), ==, VMCE_POLICY_STOP);
  g_assert_cmpint (vmce_config_policy_for (config, "web1", VMCE_POLICY_FORWARD), ==,
                   VMCE_POLICY_IGNORE_AO);
  g_assert_cmpint (vmce_config_policy_for (NULL, "web1", VMCE_POLICY_PASS), ==, VMCE_POLICY_PASS);
  g_assert_cmpint (vmce_config_migration_for (config, "web1", VMCE_MIGRATION_CARRY), ==,
                   VMCE_MIGRATION_REFUSE);
  g_assert_cmpint (vmce_config_migration_for (config, "web2", VMCE_MIGRATION_REFUSE), ==,
                   VMCE_MIGRATION_CARRY);
  g_assert_cmpint (vmce_config_hugepage_for (config, "web1", VMCE_HUGEPAGE_ONE), ==, VMCE_HUGEPAGE_ALL);
  g_assert_cmpint (vmce_config_hugepage_for (config, "web2", VMCE_HUGEPAGE_ALL), ==, VMCE_HUGEPAGE_ONE);
  g_assert_cmpint (vmce_config_hugepage_for (NULL, "web1", VMCE_HUGEPAGE_ONE), ==, VMCE_HUGEPAGE_ONE);
  g_assert_cmpint (vmce_config_hugepage_for (NULL, "web1", VMCE_HUGEPAGE_DEFAULT), ==, VMCE_HUGEPAGE_SALVAGE);
  g_unlink (path);
}

static void
expect_error (const gchar *text, const gchar *want)
{
  g_autofree gchar *path = write_config (text);
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceConfig) config = vmce_config_load (path, &error);
  g_autofree gchar *full = g_strdup_printf ("%s:%s", path, want);

  g_assert_null (config);
  g_assert_nonnull (error);
  if (!g_str_has_prefix (error->message, full))
    g_error ("got \"%s\", want it to start with \"%s\"", error->message, full);
  g_assert_null (strchr (error->message, '\n'));
  g_unlink (path);
}

static void
test_config_errors (void)
{
  expect_error ("[vmced]\njournal = /j\ncolour = red\n", "3: unknown key 'colour' in [vmced]");
  expect_error ("[vmced]\n\npolicy = sometimes\n", "3: policy must be forward");
  expect_error ("[vmced]\ninject-gap-ms = soon\n", "2: inject-gap-ms must be");
  expect_error ("[vmced]\nrealtime-priority = 100\n", "2: realtime-priority must be 0 (off)");
  expect_error ("[vmced]\nsalvage-reserve-mb = -1\n", "2: salvage-reserve-mb must be a number of MiB");
  expect_error ("[vmced]\nsalvage-reserve-mb = lots\n", "2: salvage-reserve-mb must be a number of MiB");
  expect_error ("[vmced]\n\nrealtime-priority = high\n", "3: realtime-priority must be");
  expect_error ("[libvirt]\nuri = qemu:///system\n", "1: [libvirt] needs domains or all-domains");
  expect_error ("[libvirt]\nall-domains = true\n", "1: [libvirt] needs uri");
  expect_error ("[vmced]\npolicy = forward\n[domain web]\npolicy = maybe\n", "4: policy must be");
  expect_error ("[vmced]\nthis line is not a key\n", "2: ");
  expect_error ("[vmced]\nmigration = zero\n", "2: migration must be carry or refuse");
  expect_error ("[domain web]\n\nmigration = yes\n", "3: migration must be");
  expect_error ("[vmced]\nhugepage = every\n", "2: hugepage must be one, all or salvage, not 'every'");
  expect_error ("[domain web]\n\n\nhugepage = 2M\n", "4: hugepage must be one, all or salvage");
  expect_error ("[hosts]\nuri = x\n", "1: unknown group [hosts]");
  /* a key given twice: GKeyFile takes the last, and so does the message */
  expect_error ("[vmced]\npolicy = stop\npolicy = sometimes\n", "3: policy must be");
  expect_error ("[domain web]\npolicy = maybe\n[vmced]\n[domain web]\npolicy = never\n",
                "5: policy must be");
}

/* [metrics]: where the metrics go, checked at load (a typo is a line of
 * the file, not a scrape that finds nothing) */
static void
test_config_metrics (void)
{
  g_autofree gchar *path = write_config ("[metrics]\n"
                                         "textfile = /var/lib/prometheus/node-exporter/vmce.prom\n"
                                         "listen = [::1]:9469\n");
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceConfig) config = vmce_config_load (path, &error);
  g_autoptr(GSocketAddress) sa = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (config->metrics_textfile, ==, "/var/lib/prometheus/node-exporter/vmce.prom");
  g_assert_cmpstr (config->metrics_listen, ==, "[::1]:9469");
  sa = vmce_config_parse_address ("127.0.0.1:9469", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (sa)), ==, 9469);
  g_unlink (path);
  expect_error ("[metrics]\nport = 9469\n", "2: unknown key 'port' in [metrics] (known: textfile, listen)");
  expect_error ("[metrics]\n\ntextfile = vmce.prom\n", "3: textfile must be an absolute path ending in .prom");
  expect_error ("[metrics]\ntextfile = /var/lib/vmce/metrics.txt\n", "2: textfile must be an absolute path");
  expect_error ("[metrics]\nlisten = localhost:9469\n", "2: listen: 'localhost:9469' is not an IP address");
  expect_error ("[metrics]\nlisten = 127.0.0.1\n", "2: listen: '127.0.0.1' is not an IP address and port");
  expect_error ("[metrics]\nlisten = ::1\n", "2: listen: '::1' is not");
}

/* [attach]: socket patterns, their errors */
static void
test_config_attach (void)
{
  g_autofree gchar *path = write_config ("[attach]\n"
                                         "sockets = /run/vmce/qmp/*.sock; /srv/vm/qmp-[0-9]*.sock\n"
                                         "greeting-ms = 250\n");
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceConfig) config = vmce_config_load (path, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (config->attach_sockets), ==, 2);
  g_assert_cmpstr (config->attach_sockets[0], ==, "/run/vmce/qmp/*.sock");
  g_assert_cmpstr (config->attach_sockets[1], ==, "/srv/vm/qmp-[0-9]*.sock");
  g_assert_cmpint (config->attach_greeting_ms, ==, 250);
  g_unlink (path);
  expect_error ("[attach]\ngreeting-ms = 100\n", "1: [attach] needs sockets = PATTERN");
  expect_error ("[attach]\n\nsockets = qmp/*.sock\n", "3: sockets: 'qmp/*.sock' is not an absolute path");
  expect_error ("[attach]\nsockets = /run/*/qmp.sock\n", "2: sockets: '/run/*/qmp.sock': wildcards only in the last part");
  expect_error ("[attach]\nsockets = /run/vmce/qmp/\n", "2: sockets: '/run/vmce/qmp/' is not an absolute path to sockets");
  expect_error ("[attach]\nsockets = /q/*.sock\ngreeting-ms = 0\n", "3: greeting-ms must be");
  expect_error ("[attach]\nsockets = /q/*.sock\npidfile = /q/x.pid\n", "3: unknown key 'pidfile' in [attach]");
}

static void
test_config_missing (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceConfig) config = vmce_config_load ("/nonexistent/vmced.conf", &error);

  g_assert_null (config);
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  g_assert_nonnull (strstr (error->message, "/nonexistent/vmced.conf"));
}

/* The vmced.conf that is installed loads, and says what the unit expects */
static void
test_config_shipped (void)
{
  g_autofree gchar *path = g_test_build_filename (G_TEST_DIST, "..", "data", "vmced.conf", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceConfig) config = vmce_config_load (path, &error);

  g_assert_no_error (error);
  g_assert_cmpint (config->realtime_priority, ==, 1); /* vmced.service: LimitRTPRIO=1 */
  g_assert_true (config->all_domains);
  /* what the package installs is what vmced does with no file: a key set
   * to an old default would quietly override a new one on every host */
  g_assert_true (config->has_policy);
  g_assert_cmpint (config->policy, ==, VMCE_POLICY_FORWARD);
  g_assert_true (config->has_migration);
  g_assert_cmpint (config->migration, ==, VMCE_MIGRATION_CARRY);
  g_assert_true (config->has_hugepage);
  g_assert_cmpint (config->hugepage, ==, VMCE_HUGEPAGE_DEFAULT);
  /* [attach] is there, commented out: no socket is watched by default */
  g_assert_null (config->attach_sockets);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/config/good", test_config_good);
  g_test_add_func ("/config/errors", test_config_errors);
  g_test_add_func ("/config/metrics", test_config_metrics);
  g_test_add_func ("/config/attach", test_config_attach);
  g_test_add_func ("/config/missing", test_config_missing);
  g_test_add_func ("/config/shipped", test_config_shipped);
  return g_test_run ();
}
