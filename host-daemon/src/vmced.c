/*
 * vmced: forwards host memory errors into the guests of the QEMU processes
 * it watches.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmced"

#include <errno.h>
#include <glib-unix.h>
#include <locale.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "attach-watch.h"
#include "commands.h"
#include "config.h"
#include "daemon.h"
#include "libvirt-watch.h"
#include "log-writer.h"
#include "metrics-export.h"
#include "hugepage-loss.h"
#include "hugepage-salvage.h"
#include "migration-guard.h"
#include "ptrace-watch.h"

#define VMCE_DEFAULT_SOCKET "/run/vmce/vmced.sock"
#define VMCE_DEFAULT_JOURNAL "/var/lib/vmce/journal.jsonl"
#define VMCE_DEFAULT_INJECT_GAP_MS 20

typedef struct {
  GMainLoop *loop;
  VmceDaemon *daemon;
  int exit_status;
  gboolean attach_required;
  const gchar *config_path;
  VmceConfig *config;
  VmcePolicy cli_policy; /* --policy, or the default */
  VmceMigrationPolicy cli_migration;
  VmceHugepagePolicy cli_hugepage;
  VmceLibvirtWatch *libvirt_watch;
  VmceAttachWatch *attach_watch; /* [attach], or NULL */
} VmcedContext;

/* SIGHUP: the config file again. A file with errors is refused whole (one
 * line says where); the VMs go on with what they have. */
static void
vmced_reload (VmcedContext *ctx)
{
  g_autoptr(GError) error = NULL;
  VmceConfig *config;
  GPtrArray *vms;

  if (ctx->config_path == NULL)
    return;
  config = vmce_config_load (ctx->config_path, &error);
  if (config == NULL) {
    g_warning ("%s; keeping the configuration in use", error->message);
    return;
  }
  vmce_config_free (ctx->config);
  ctx->config = config;
  vmce_daemon_set_config (ctx->daemon, config);
  if (ctx->libvirt_watch != NULL)
    vmce_libvirt_watch_set_config (ctx->libvirt_watch, config);
  vms = vmce_daemon_get_vms (ctx->daemon);
  for (guint i = 0; i < vms->len; i++) {
    VmceVm *vm = g_ptr_array_index (vms, i);
    const gchar *name = vmce_vm_get_name (vm);

    vmce_vm_set_policy (vm, vmce_config_policy_for (config, name, ctx->cli_policy));
    vmce_migration_guard_set_policy (vm, vmce_config_migration_for (config, name,
                                                                    ctx->cli_migration));
    vmce_hugepage_loss_set_policy (vm, vmce_config_hugepage_for (config, name, ctx->cli_hugepage));
  }
  g_message ("reloaded %s", ctx->config_path);
}

static gboolean vmced_verbose = FALSE;

static gboolean
vmced_signal_cb (gint fd, GIOCondition condition, gpointer user_data)
{
  VmcedContext *ctx = user_data;
  struct signalfd_siginfo si;

  while (read (fd, &si, sizeof si) == sizeof si) {
    switch (si.ssi_signo) {
    case SIGCHLD:
      /* reaped below, once for all coalesced SIGCHLDs */
      break;
    case SIGTERM:
    case SIGINT:
      g_message ("stopping (signal %u)", si.ssi_signo);
      g_main_loop_quit (ctx->loop);
      break;
    case SIGHUP:
      vmced_reload (ctx);
      break;
    default:
      break;
    }
  }
  vmce_ptrace_dispatch ();
  return G_SOURCE_CONTINUE;
}

static void
vmced_attach_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmcedContext *ctx = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceVm) vm = vmce_daemon_attach_finish (ctx->daemon, res, &error);

  /* the daemon logged why (attach-failed) */
  if (vm == NULL) {
    if (ctx->attach_required) {
      ctx->exit_status = EXIT_FAILURE;
      g_main_loop_quit (ctx->loop);
    }
  }
}

/* An [attach] socket's QEMU attached: its policy by the name QEMU gave */
static void
vmced_attach_found_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmcedContext *ctx = user_data;
  g_autoptr(VmceVm) vm = vmce_daemon_attach_finish (ctx->daemon, res, NULL);

  /* (if not, the daemon journaled and said why) */
  if (vm != NULL)
    vmce_vm_set_policy (vm, vmce_config_policy_for (ctx->config, vmce_vm_get_name (vm), ctx->cli_policy));
}

static void
vmced_attach_found (const gchar *path, GSocket *socket, pid_t pid, const GError *error, gpointer user_data)
{
  VmcedContext *ctx = user_data;

  if (error != NULL) {
    vmce_daemon_attach_failed (ctx->daemon, pid, "[attach]", error);
    return;
  }
  vmce_daemon_attach_socket_async (ctx->daemon, pid, socket, path, NULL, NULL, ctx->cli_policy,
                                   vmced_attach_found_cb, ctx);
}

/* [attach]'s sockets: those there now, and each one made from now on. A
 * restarted vmced finds its QEMUs again this way. */
static void
vmced_start_attach_watch (VmcedContext *ctx)
{
  g_autoptr(GError) error = NULL;
  guint greeting_ms;

  if (ctx->config == NULL || ctx->config->attach_sockets == NULL)
    return;
  greeting_ms = ctx->config->attach_greeting_ms > 0 ? (guint) ctx->config->attach_greeting_ms
                                                    : VMCE_ATTACH_GREETING_MS;
  ctx->attach_watch = vmce_attach_watch_new ((const gchar *const *) ctx->config->attach_sockets,
                                             greeting_ms, VMCE_ATTACH_STARTUP_MS, vmced_attach_found, ctx,
                                             &error);
  if (ctx->attach_watch == NULL)
    g_warning ("%s", error->message);
}

/* What the command line (and, where it says nothing, the config file) asks */
typedef struct {
  gchar *config_path;
  gchar *socket_path;
  gchar *journal_path;
  gint pid;
  gchar *qmp_path;
  gchar *name;
  gchar *agent_path;
  gchar *connect_uri;
  /* the URI is vmced.conf's, not --connect's: an installed vmced on a host
   * without libvirt waits for it rather than fail */
  gboolean connect_from_config;
  GStrv domains;
  gboolean all_domains;
  gchar *policy_str;
  gchar *migration_str;
  gchar *hugepage_str;
  gint inject_gap_ms; /* G_MININT: not given */
  gint realtime_priority; /* G_MININT: not given */
  gint salvage_reserve_mb; /* G_MININT: not given */
  gchar *metrics_textfile;
  gchar *metrics_listen;
  gboolean version;
  VmceConfig *config;
  VmcePolicy policy;
  VmceMigrationPolicy migration;
  VmceHugepagePolicy hugepage;
} VmcedArgs;

static void
vmced_args_clear (VmcedArgs *a)
{
  g_free (a->config_path);
  g_free (a->socket_path);
  g_free (a->journal_path);
  g_free (a->qmp_path);
  g_free (a->name);
  g_free (a->agent_path);
  g_free (a->connect_uri);
  g_strfreev (a->domains);
  g_free (a->policy_str);
  g_free (a->migration_str);
  g_free (a->hugepage_str);
  g_free (a->metrics_textfile);
  g_free (a->metrics_listen);
  g_clear_pointer (&a->config, vmce_config_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VmcedArgs, vmced_args_clear)

static gboolean
vmced_parse_command_line (VmcedArgs *a, int *argc, char ***argv, GError **error)
{
  g_autoptr(GOptionContext) context = NULL;
  const GOptionEntry entries[] = {
    { "config", 'C', 0, G_OPTION_ARG_FILENAME, &a->config_path,
      "Settings, libvirt domains and per-domain policies (vmced(8)); SIGHUP rereads it", "FILE" },
    { "socket", 's', 0, G_OPTION_ARG_FILENAME, &a->socket_path,
      "Control socket (default " VMCE_DEFAULT_SOCKET ")", "PATH" },
    { "journal", 'j', 0, G_OPTION_ARG_FILENAME, &a->journal_path,
      "Event journal, JSON lines (default " VMCE_DEFAULT_JOURNAL ")", "PATH" },
    { "pid", 'p', 0, G_OPTION_ARG_INT, &a->pid, "Attach to this QEMU process at start", "PID" },
    { "qmp", 'q', 0, G_OPTION_ARG_FILENAME, &a->qmp_path, "Its QMP socket (with --pid)", "PATH" },
    { "name", 'n', 0, G_OPTION_ARG_STRING, &a->name, "Its name (default: QEMU's -name)", "NAME" },
    { "agent", 'a', 0, G_OPTION_ARG_FILENAME, &a->agent_path,
      "Its vmce guest agent socket, for vmcectl", "PATH" },
    { "connect", 'c', 0, G_OPTION_ARG_STRING, &a->connect_uri,
      "Watch the domains of this libvirt URI (with --domain or --all-domains)", "URI" },
    { "domain", 'd', 0, G_OPTION_ARG_STRING_ARRAY, &a->domains,
      "A libvirt domain to watch while it runs (repeatable)", "NAME" },
    { "all-domains", 0, 0, G_OPTION_ARG_NONE, &a->all_domains,
      "Watch every domain of --connect as it runs", NULL },
    { "policy", 0, 0, G_OPTION_ARG_STRING, &a->policy_str,
      "What to do with its memory errors: forward (default), ignore-ao, pass, stop or force", "POLICY" },
    { "migration", 0, 0, G_OPTION_ARG_STRING, &a->migration_str,
      "A migration of a VM with poisoned memory: carry (default) or refuse", "POLICY" },
    { "hugepage", 0, 0, G_OPTION_ARG_STRING, &a->hugepage_str,
      "A huge page of guest RAM lost on the host: keep its healthy 4 KiB pieces and tell the "
      "guest the raw poisoned page (salvage, default; all where it cannot), tell the page hit "
      "(one) or every page of it (all)", "POLICY" },
    { "inject-gap-ms", 0, 0, G_OPTION_ARG_INT, &a->inject_gap_ms,
      "Least time between two machine checks into one VM through HMP mce (default 20; "
      "inject-mce needs none)", "MS" },
    { "salvage-reserve-mb", 0, 0, G_OPTION_ARG_INT, &a->salvage_reserve_mb,
      "Memory to keep free on the host, MiB: a huge page's salvage that would leave less is handled "
      "as hugepage all (default 256)", "MIB" },
    { "realtime-priority", 0, 0, G_OPTION_ARG_INT, &a->realtime_priority,
      "Run at this SCHED_FIFO priority, 1 to 99 (default 0: normal)", "N" },
    { "metrics-textfile", 0, 0, G_OPTION_ARG_FILENAME, &a->metrics_textfile,
      "Write metrics for node_exporter's textfile collector to this *.prom file", "PATH" },
    { "metrics-listen", 0, 0, G_OPTION_ARG_STRING, &a->metrics_listen,
      "Serve metrics (GET /metrics) on this IP address and port, e.g. 127.0.0.1:9469", "ADDR:PORT" },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &vmced_verbose, "Log debug messages", NULL },
    { "version", 0, 0, G_OPTION_ARG_NONE, &a->version, "Print the version and exit", NULL },
    { NULL },
  };

  context = g_option_context_new ("- forward host memory errors into QEMU guests");
  g_option_context_set_summary (context,
                                "vmced watches QEMU processes with ptrace. When the host kernel "
                                "reports a memory error\nin guest RAM (SIGBUS BUS_MCEERR_AO/AR), "
                                "it injects the machine check the guest\nwould have seen on real "
                                "hardware, at the guest physical address.");
  g_option_context_set_description (context, "Control it with vmcectl(1).");
  g_option_context_add_main_entries (context, entries, NULL);
  return g_option_context_parse (context, argc, argv, error);
}

/* The command line wins over the file */
static gboolean
vmced_apply_config_file (VmcedArgs *a, GError **error)
{
  VmceConfig *config;

  if (a->config_path == NULL)
    return TRUE;
  config = a->config = vmce_config_load (a->config_path, error);
  if (config == NULL)
    return FALSE;
  if (a->socket_path == NULL)
    a->socket_path = g_strdup (config->socket_path);
  if (a->journal_path == NULL)
    a->journal_path = g_strdup (config->journal_path);
  if (a->inject_gap_ms == G_MININT && config->inject_gap_ms >= 0)
    a->inject_gap_ms = config->inject_gap_ms;
  if (a->realtime_priority == G_MININT && config->realtime_priority >= 0)
    a->realtime_priority = config->realtime_priority;
  if (a->salvage_reserve_mb == G_MININT && config->salvage_reserve_mb >= 0)
    a->salvage_reserve_mb = config->salvage_reserve_mb;
  if (a->policy_str == NULL && config->has_policy)
    a->policy_str = g_strdup (vmce_policy_to_string (config->policy));
  if (a->migration_str == NULL && config->has_migration)
    a->migration_str = g_strdup (vmce_migration_policy_to_string (config->migration));
  if (a->hugepage_str == NULL && config->has_hugepage)
    a->hugepage_str = g_strdup (vmce_hugepage_policy_to_string (config->hugepage));
  if (a->metrics_textfile == NULL)
    a->metrics_textfile = g_strdup (config->metrics_textfile);
  if (a->metrics_listen == NULL)
    a->metrics_listen = g_strdup (config->metrics_listen);
  if (a->connect_uri == NULL && config->uri != NULL) {
    a->connect_uri = g_strdup (config->uri);
    a->connect_from_config = TRUE;
    if (a->domains == NULL && !a->all_domains) {
      a->domains = g_strdupv (config->domains);
      a->all_domains = config->all_domains;
    }
  }
  return TRUE;
}

/* The metrics' places, as vmced.conf's are checked (config.c) */
static gboolean
vmced_check_metrics_args (VmcedArgs *a, GError **error)
{
  g_autoptr(GSocketAddress) sa = NULL;

  if (a->metrics_textfile != NULL &&
      (!g_path_is_absolute (a->metrics_textfile) || !g_str_has_suffix (a->metrics_textfile, ".prom"))) {
    g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                         "--metrics-textfile must be an absolute path ending in .prom (node_exporter reads "
                         "only those)");
    return FALSE;
  }
  if (a->metrics_listen != NULL) {
    sa = vmce_config_parse_address (a->metrics_listen, error);
    if (sa == NULL) {
      g_prefix_error (error, "--metrics-listen: ");
      return FALSE;
    }
  }
  return TRUE;
}

/* One line for what does not go together */
static gboolean
vmced_check_args (VmcedArgs *a, GError **error)
{
  const gchar *why = NULL;

  if ((a->pid != 0) != (a->qmp_path != NULL))
    why = "--pid and --qmp go together";
  else if (a->connect_uri != NULL && (a->domains == NULL) == !a->all_domains)
    why = "--connect needs --domain NAME or --all-domains (one of them)";
  else if (a->connect_uri == NULL && (a->domains != NULL || a->all_domains))
    why = "--domain and --all-domains need --connect URI";
  else if (a->migration_str != NULL &&
           !vmce_migration_policy_from_string (a->migration_str, &a->migration))
    why = "--migration must be carry or refuse";
  else if (a->hugepage_str != NULL && !vmce_hugepage_policy_from_string (a->hugepage_str, &a->hugepage))
    why = "--hugepage must be " VMCE_HUGEPAGE_NAMES;
  if (why != NULL) {
    g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, why);
    return FALSE;
  }
  if (a->policy_str != NULL && !vmce_policy_from_string (a->policy_str, &a->policy)) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--policy must be %s",
                 vmce_policy_choices ());
    return FALSE;
  }
  if (a->realtime_priority == G_MININT)
    a->realtime_priority = 0;
  if (a->salvage_reserve_mb == G_MININT)
    a->salvage_reserve_mb = 256;
  if (a->salvage_reserve_mb < 0) {
    g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--salvage-reserve-mb must be 0 or more");
    return FALSE;
  }
  if (a->realtime_priority < 0 || a->realtime_priority > 99) {
    g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                         "--realtime-priority must be 0 (off) or 1 to 99");
    return FALSE;
  }
  if (!vmced_check_metrics_args (a, error))
    return FALSE;
  if (a->inject_gap_ms == G_MININT)
    a->inject_gap_ms = VMCE_DEFAULT_INJECT_GAP_MS;
  if (a->inject_gap_ms < 0) {
    g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                         "--inject-gap-ms must not be negative");
    return FALSE;
  }
  return TRUE;
}

/* While a QEMU thread waits stopped for vmced, vmced's CPU time is the
 * guest's: on a host whose CPUs QEMU keeps busy, a vmced of normal priority
 * waits for a time slice with the thread stopped (run/bench --only tail, 2
 * cores and a TCG guest: vmced's part p99 1.6 to 1.8 ms, against 0.2 to
 * 0.5 ms at SCHED_FIFO 1). vmced sleeps in poll() between events, so the
 * priority costs nothing idle. Before any thread is made: they inherit it.
 * Refused (no CAP_SYS_NICE nor RLIMIT_RTPRIO): a warning, and on as before */
static void
vmced_set_realtime (gint priority)
{
  struct sched_param sp = { .sched_priority = priority };

  if (priority == 0)
    return;
  if (sched_setscheduler (0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) < 0)
    g_warning ("cannot run at SCHED_FIFO priority %d (%s): at normal priority",
                priority, g_strerror (errno));
}

/* Each attached VM holds a few descriptors (its monitor, its agent, a
 * pidfd, /proc files while it is read), and systemd starts services with
 * a soft limit of 1024 (and a hard one far above) so that select() users
 * do not break: a host of a few hundred VMs would run out. vmced polls
 * through GLib, never select(): take the hard limit, as systemd advises
 * such programs to do */
static void
vmced_raise_nofile (void)
{
  struct rlimit rl;

  if (getrlimit (RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
    return;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit (RLIMIT_NOFILE, &rl) < 0)
    g_warning ("cannot raise the open files limit: %s", g_strerror (errno));
}

/* Tells systemd (Type=notify) how vmced is: READY=1 once its control socket
 * listens, so that `systemctl start` and an `apt install` that starts it
 * return when vmcectl can reach it, not before. The protocol is one
 * datagram to $NOTIFY_SOCKET; a whole libsystemd for it is not needed. */
static void
vmced_notify (const gchar *state)
{
  const gchar *path = g_getenv ("NOTIFY_SOCKET");
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  socklen_t len;
  int fd;

  if (path == NULL || (path[0] != '/' && path[0] != '@') || strlen (path) >= sizeof sa.sun_path)
    return;
  memcpy (sa.sun_path, path, strlen (path));
  if (path[0] == '@')
    sa.sun_path[0] = '\0'; /* an abstract socket */
  len = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + strlen (path));
  fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return;
  if (sendto (fd, state, strlen (state), MSG_NOSIGNAL, (struct sockaddr *) &sa, len) < 0)
    g_warning ("cannot tell systemd %s: %s", state, g_strerror (errno));
  close (fd);
}

/* Metrics, if asked for (the daemon takes them): neither way stops vmced from starting (an
 * address in use, a directory missing: one line, and vmced forwards) */
static VmceMetricsExport *
vmced_start_metrics (VmcedArgs *a, VmceDaemon *daemon)
{
  g_autoptr(VmceMetricsExport) export = NULL;
  g_autoptr(GError) error = NULL;

  if (a->metrics_textfile == NULL && a->metrics_listen == NULL)
    return NULL;
  export = vmce_metrics_export_new (vmce_daemon_render_metrics, daemon);
  if (a->metrics_textfile != NULL && !vmce_metrics_export_set_textfile (export, a->metrics_textfile, &error)) {
    g_warning ("%s", error->message);
    g_clear_error (&error);
  }
  if (a->metrics_listen != NULL) {
    if (vmce_metrics_export_listen (export, a->metrics_listen, &error))
      g_message ("metrics on %s, port %u: GET /metrics", a->metrics_listen,
                 vmce_metrics_export_get_port (export));
    else
      g_warning ("%s; vmced goes on without it", error->message);
  }
  return g_steal_pointer (&export);
}

/* What the process needs before the daemon and its threads are made */
static void
vmced_prepare_process (VmcedArgs *a)
{
  vmced_set_realtime (a->realtime_priority);
  vmce_hugepage_salvage_set_reserve ((guint64) a->salvage_reserve_mb << 20);
  vmced_raise_nofile ();
}

/* What the main loop's callbacks share: @a's config is taken */
static void
vmced_context_init (VmcedContext *ctx, VmcedArgs *a, GMainLoop *loop, VmceDaemon *daemon)
{
  ctx->loop = loop;
  ctx->daemon = daemon;
  ctx->exit_status = EXIT_SUCCESS;
  ctx->config_path = a->config_path;
  ctx->config = g_steal_pointer (&a->config);
  ctx->cli_policy = a->policy;
  ctx->cli_migration = a->migration;
  ctx->cli_hugepage = a->hugepage;
  vmce_daemon_set_config (daemon, ctx->config);
}

/* The daemon, until SIGTERM or a required attach fails */
static int
vmced_run (VmcedArgs *a, const sigset_t *mask)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceDaemon) daemon = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autoptr(VmceLibvirtWatch) libvirt_watch = NULL;
  VmceDaemonOptions options = {
    .socket_path = a->socket_path != NULL ? a->socket_path : VMCE_DEFAULT_SOCKET,
    .journal_path = a->journal_path != NULL ? a->journal_path : VMCE_DEFAULT_JOURNAL,
    .inject_gap_ms = (guint) a->inject_gap_ms,
    .migration = a->migration,
    .hugepage = a->hugepage,
  };
  VmcedContext ctx = { 0 };
  int sfd;

  vmced_prepare_process (a);
  daemon = vmce_daemon_new (&options, &error);
  if (daemon == NULL) {
    vmce_log_error ("%s", error->message);
    return EXIT_FAILURE;
  }
  vmce_commands_register (vmce_daemon_get_control (daemon), daemon);
  vmce_daemon_set_metrics_export (daemon, vmced_start_metrics (a, daemon));

  sfd = signalfd (-1, mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) {
    vmce_log_error ("signalfd: %s", g_strerror (errno));
    return EXIT_FAILURE;
  }
  loop = g_main_loop_new (NULL, FALSE);
  vmced_context_init (&ctx, a, loop, daemon);
  /* ptrace stops come first: a stopped QEMU thread (a vCPU kicked with
   * SIG_IPI, say) waits for us, monitor answers and clients do not */
  g_unix_fd_add_full (G_PRIORITY_HIGH, sfd, G_IO_IN, vmced_signal_cb, &ctx, NULL);

  g_message ("vmced %s listening on %s, journal %s", PACKAGE_VERSION, options.socket_path,
             options.journal_path);
  if (a->pid != 0) {
    ctx.attach_required = TRUE;
    vmce_daemon_attach_async (daemon, a->pid, a->qmp_path, a->name, a->agent_path, a->policy,
                              vmced_attach_cb, &ctx);
  }
  if (a->connect_uri != NULL) {
    libvirt_watch = vmce_libvirt_watch_new (daemon, a->connect_uri,
                                            (const gchar *const *) a->domains, a->policy,
                                            a->connect_from_config, &error);
    if (libvirt_watch == NULL) {
      vmce_log_error ("%s", error->message);
      vmce_daemon_shutdown (daemon);
      g_clear_pointer (&ctx.config, vmce_config_free);
      close (sfd);
      return EXIT_FAILURE;
    }
    vmce_libvirt_watch_set_config (libvirt_watch, ctx.config);
    vmce_daemon_set_libvirt_uri (daemon, a->connect_uri);
    ctx.libvirt_watch = libvirt_watch;
  }
  vmced_start_attach_watch (&ctx);
  vmced_notify ("READY=1");
  g_main_loop_run (loop);
  vmced_notify ("STOPPING=1");
  g_clear_pointer (&ctx.attach_watch, vmce_attach_watch_free);
  ctx.libvirt_watch = NULL;
  g_clear_pointer (&libvirt_watch, vmce_libvirt_watch_free);
  g_clear_pointer (&ctx.config, vmce_config_free);

  vmce_daemon_shutdown (daemon);
  close (sfd);
  return ctx.exit_status;
}

int
main (int argc, char **argv)
{
  g_auto(VmcedArgs) args = { .inject_gap_ms = G_MININT, .realtime_priority = G_MININT, .salvage_reserve_mb = G_MININT,
                             .policy = VMCE_POLICY_FORWARD, .migration = VMCE_MIGRATION_CARRY,
                             .hugepage = VMCE_HUGEPAGE_DEFAULT };
  g_autoptr(GError) error = NULL;
  sigset_t mask;

  setlocale (LC_ALL, "");
  /* before any thread exists, so that every thread inherits the mask and
   * SIGCHLD reaches only the signalfd; ptrace stops arrive as SIGCHLD */
  sigemptyset (&mask);
  sigaddset (&mask, SIGCHLD);
  sigaddset (&mask, SIGTERM);
  sigaddset (&mask, SIGINT);
  sigaddset (&mask, SIGHUP);
  sigprocmask (SIG_BLOCK, &mask, NULL);
  signal (SIGPIPE, SIG_IGN);
  vmce_log_writer_install ();

  if (!vmced_parse_command_line (&args, &argc, &argv, &error)) {
    vmce_log_error ("%s (try --help)", error->message);
    return EXIT_FAILURE;
  }
  vmce_log_set_verbose (vmced_verbose);
  if (args.version) {
    g_print ("vmced %s\n", PACKAGE_VERSION);
    return EXIT_SUCCESS;
  }
  if (!vmced_apply_config_file (&args, &error) || !vmced_check_args (&args, &error)) {
    vmce_log_error ("%s", error->message);
    return EXIT_FAILURE;
  }
  return vmced_run (&args, &mask);
}
