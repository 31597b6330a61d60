/*
 * QMP sockets found by pattern and probed (see attach-watch.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-attach"

#include <errno.h>
#include <fnmatch.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <gio/gunixsocketaddress.h>
#include <glib-unix.h>
#include <json-glib/json-glib.h>

#include "attach-watch.h"
#include "error.h"

/* QEMU's greeting is one line of ~150 bytes */
#define VMCE_PROBE_PEEK 4096
/* a socket just created may not listen yet (bind, then listen): how often
 * to try it again until the greeting's time is up */
#define VMCE_PROBE_RETRY_MS 20

/* one more look for a greeting, when the connection QEMU accepted may be
 * this probe's own */
#define VMCE_PROBE_GRACE_MS 100
/* __SO_ACCEPTCON in /proc/net/unix's Flags: a listening socket */
#define VMCE_SO_ACCEPTCON 0x10000

typedef struct {
  gchar *path;
  guint greeting_ms;
  gint64 deadline_us;
  guint startup_ms;
  gint64 startup_deadline_us;
  gboolean grace;
  GSocket *socket;
  pid_t pid;
  GSource *wait; /* what the probe waits on: one at a time */
  GCancellable *cancellable;
} VmceProbe;

static void
vmce_probe_free (VmceProbe *p)
{
  if (p->wait != NULL) {
    g_source_destroy (p->wait);
    g_source_unref (p->wait);
  }
  g_clear_object (&p->socket);
  g_clear_object (&p->cancellable);
  g_free (p->path);
  g_free (p);
}

static void vmce_probe_connect (GTask *task);
static void vmce_probe_wait_greeting (GTask *task);

/* Ends the probe with @error, its connection closed at once: it must not
 * stay in QEMU's queue to take the monitor when the holder leaves */
static void
vmce_probe_fail (GTask *task, GError *error)
{
  VmceProbe *p = g_task_get_task_data (task);

  if (p->socket != NULL)
    g_socket_close (p->socket, NULL);
  g_task_return_error (task, error);
  g_object_unref (task);
}

/* @source is what the probe waits on now; its callback gets the task.
 * The watch's end (its cancellable) wakes it too. */
static void
vmce_probe_wait (GTask *task, GSource *source, GSourceFunc func)
{
  VmceProbe *p = g_task_get_task_data (task);

  if (p->wait != NULL) {
    g_source_destroy (p->wait);
    g_source_unref (p->wait);
  }
  if (p->cancellable != NULL) {
    g_autoptr(GSource) cancelled = g_cancellable_source_new (p->cancellable);
    g_source_set_dummy_callback (cancelled);
    g_source_add_child_source (source, cancelled);
  }
  p->wait = source;
  g_source_set_callback (source, func, task, NULL);
  g_source_attach (source, NULL);
}

static gboolean
vmce_probe_retry_cb (gpointer user_data)
{
  GTask *task = user_data;
  VmceProbe *p = g_task_get_task_data (task);
  GError *error = NULL;

  g_source_unref (g_steal_pointer (&p->wait));
  if (g_cancellable_set_error_if_cancelled (p->cancellable, &error))
    vmce_probe_fail (task, error);
  else if (p->socket == NULL)
    vmce_probe_connect (task);
  else
    vmce_probe_wait_greeting (task);
  return G_SOURCE_REMOVE;
}

/* Whether the peer's first line is QMP's greeting. FALSE with @error when
 * it is something else; FALSE with none while the line is not complete */
static gboolean
vmce_probe_check_greeting (VmceProbe *p, const gchar *buf, gssize n, GError **error)
{
  const gchar *nl = memchr (buf, '\n', (gsize) n);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree gchar *line = NULL;
  g_autofree gchar *start = NULL;
  JsonNode *root;

  if (nl == NULL) {
    if (n >= VMCE_PROBE_PEEK)
      g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                   "%s: not QEMU's monitor (%zd bytes and no line)", p->path, n);
    return FALSE;
  }
  if (json_parser_load_from_data (parser, buf, nl - buf, NULL) &&
      (root = json_parser_get_root (parser)) != NULL && JSON_NODE_HOLDS_OBJECT (root) &&
      json_object_has_member (json_node_get_object (root), "QMP"))
    return TRUE;
  line = g_strndup (buf, MIN (nl - buf, 40));
  start = g_strescape (g_strstrip (line), NULL);
  g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
               "%s: not QEMU's monitor (its first line is not QMP's greeting: \"%s\")", p->path, start);
  return FALSE;
}

static gboolean
vmce_probe_same_file (const gchar *a, const gchar *b)
{
  g_autofree gchar *base_a = g_path_get_basename (a);
  g_autofree gchar *base_b = g_path_get_basename (b);
  g_autofree gchar *dir_a = NULL;
  g_autofree gchar *dir_b = NULL;
  g_autofree gchar *real_a = NULL;
  g_autofree gchar *real_b = NULL;

  if (g_strcmp0 (base_a, base_b) != 0)
    return FALSE;
  /* /var/run is /run on Debian: the directories as the kernel sees them */
  dir_a = g_path_get_dirname (a);
  dir_b = g_path_get_dirname (b);
  real_a = realpath (dir_a, NULL);
  real_b = realpath (dir_b, NULL);
  return real_a != NULL && g_strcmp0 (real_a, real_b) == 0;
}

/* How many connections the server at @path has accepted and still holds
 * (/proc/net/unix: an accepted socket carries its listener's path), -1 if
 * that cannot be read. None means QEMU is still starting (its main loop,
 * which accepts, runs once the machine is built), so a connection queued
 * now is the first it will serve */
static gint
vmce_probe_accepted (const gchar *path)
{
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;
  gint n = 0;

  if (!g_file_get_contents ("/proc/net/unix", &text, NULL, NULL))
    return -1;
  lines = g_strsplit (text, "\n", -1);
  /* Num RefCount Protocol Flags Type St Inode Path */
  for (guint i = 1; lines[i] != NULL; i++) {
    g_auto(GStrv) f = g_strsplit (lines[i], " ", 8);

    if (g_strv_length (f) < 8 || f[7][0] != '/')
      continue;
    if ((g_ascii_strtoull (f[3], NULL, 16) & VMCE_SO_ACCEPTCON) == 0 && g_strcmp0 (f[5], "03") == 0 &&
        vmce_probe_same_file (f[7], path))
      n++;
  }
  return n;
}

/* The greeting's time is up. FALSE: wait on (QEMU has accepted no one yet,
 * or the one it accepted may be this probe); TRUE with @error: give up */
static gboolean
vmce_probe_give_up (VmceProbe *p, GError **error)
{
  gint64 now = g_get_monotonic_time ();
  gint accepted = vmce_probe_accepted (p->path);

  if (accepted == 0 && now < p->startup_deadline_us) {
    p->deadline_us = MIN (now + (gint64) p->greeting_ms * 1000, p->startup_deadline_us);
    return FALSE;
  }
  if (accepted > 0 && !p->grace) {
    p->grace = TRUE;
    p->deadline_us = now + VMCE_PROBE_GRACE_MS * 1000;
    return FALSE;
  }
  if (accepted == 0)
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_TIMEOUT,
                 "%s: no QMP greeting, and in %.1f s it accepted no connection: its main loop does not "
                 "run (a QEMU still starting, or hung)", p->path, p->startup_ms / 1000.0);
  else
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_BUSY,
                 "%s: no QMP greeting within %u ms: held by another client (QEMU serves one at a "
                 "time), or not QEMU's monitor; vmced let it go and tries again when it is created "
                 "anew or named by `vmcectl attach --qmp`", p->path, p->greeting_ms);
  return TRUE;
}

static gboolean
vmce_probe_readable_cb (gint fd, GIOCondition condition, gpointer user_data)
{
  GTask *task = user_data;
  VmceProbe *p = g_task_get_task_data (task);
  gchar buf[VMCE_PROBE_PEEK];
  GError *error = NULL;
  gssize n;

  g_source_unref (g_steal_pointer (&p->wait));
  if (g_cancellable_set_error_if_cancelled (p->cancellable, &error)) {
    vmce_probe_fail (task, error);
    return G_SOURCE_REMOVE;
  }
  /* woken by the deadline, not the socket (a GSocket's own source would
   * call a deadline readable, and mark the socket timed out for its next
   * user: hence a plain fd source) */
  if (condition == 0 && g_get_monotonic_time () >= p->deadline_us) {
    if (vmce_probe_give_up (p, &error))
      vmce_probe_fail (task, error);
    else
      vmce_probe_wait_greeting (task);
    return G_SOURCE_REMOVE;
  }
  n = recv (fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN)) {
    vmce_probe_fail (task, g_error_new (VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                                        "%s: not QEMU's monitor (it closed the connection without a "
                                        "greeting%s%s)", p->path, n < 0 ? ": " : "",
                                        n < 0 ? g_strerror (errno) : ""));
    return G_SOURCE_REMOVE;
  }
  if (n > 0 && vmce_probe_check_greeting (p, buf, n, &error)) {
    g_task_return_pointer (task, g_object_ref (p->socket), g_object_unref);
    g_object_unref (task);
    return G_SOURCE_REMOVE;
  }
  if (error != NULL) {
    vmce_probe_fail (task, error);
    return G_SOURCE_REMOVE;
  }
  /* half a line so far: the socket stays readable, so look again later */
  vmce_probe_wait (task, g_timeout_source_new (VMCE_PROBE_RETRY_MS), vmce_probe_retry_cb);
  return G_SOURCE_REMOVE;
}

static void
vmce_probe_wait_greeting (GTask *task)
{
  VmceProbe *p = g_task_get_task_data (task);
  GSource *source = g_unix_fd_source_new (g_socket_get_fd (p->socket), G_IO_IN | G_IO_HUP | G_IO_ERR);

  g_source_set_ready_time (source, p->deadline_us);
  vmce_probe_wait (task, source, G_SOURCE_FUNC (vmce_probe_readable_cb));
}

/* The connect's failure in the probe's words */
static GError *
vmce_probe_connect_error (VmceProbe *p, const GError *error)
{
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED))
    return g_error_new (VMCE_ERROR, VMCE_ERROR_NOT_FOUND,
                        "%s: nothing listens on it (a socket its QEMU left behind?)", p->path);
  /* EAGAIN: its backlog is full, of clients waiting for the holder to go */
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
    return g_error_new (VMCE_ERROR, VMCE_ERROR_BUSY,
                        "%s: held by another client, with others waiting in its queue", p->path);
  return g_error_new (VMCE_ERROR, VMCE_ERROR_GENERIC, "%s: cannot connect: %s", p->path,
                      error->message);
}

static void
vmce_probe_connect (GTask *task)
{
  VmceProbe *p = g_task_get_task_data (task);
  g_autoptr(GSocketAddress) addr = g_unix_socket_address_new (p->path);
  g_autoptr(GError) error = NULL;
  GCredentials *creds;
  struct stat st;

  if (lstat (p->path, &st) < 0) {
    int e = errno;
    vmce_probe_fail (task, g_error_new (VMCE_ERROR, VMCE_ERROR_NOT_FOUND, "%s: %s", p->path,
                                        g_strerror (e)));
    return;
  }
  if (!S_ISSOCK (st.st_mode)) {
    vmce_probe_fail (task, g_error_new (VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                                        "%s: not QEMU's monitor (not a socket)", p->path));
    return;
  }
  p->socket = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT,
                            &error);
  if (p->socket != NULL) {
    /* never block in connect(): a full backlog is an answer */
    g_socket_set_blocking (p->socket, FALSE);
    if (g_socket_connect (p->socket, addr, NULL, &error) &&
        (creds = g_socket_get_credentials (p->socket, &error)) != NULL) {
      p->pid = g_credentials_get_unix_pid (creds, NULL);
      g_object_unref (creds);
      vmce_probe_wait_greeting (task);
      return;
    }
  }
  g_clear_object (&p->socket);
  /* just created: QEMU binds, then listens */
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED) &&
      g_get_monotonic_time () < p->deadline_us) {
    vmce_probe_wait (task, g_timeout_source_new (VMCE_PROBE_RETRY_MS), vmce_probe_retry_cb);
    return;
  }
  vmce_probe_fail (task, vmce_probe_connect_error (p, error));
}

static void
vmce_attach_probe_start (const gchar *path,
                         guint greeting_ms,
                         guint startup_ms,
                         GCancellable *cancellable,
                         GAsyncReadyCallback callback,
                         gpointer user_data)
{
  GTask *task = g_task_new (NULL, cancellable, callback, user_data);
  VmceProbe *p = g_new0 (VmceProbe, 1);

  p->path = g_strdup (path);
  p->greeting_ms = greeting_ms;
  p->startup_ms = MAX (startup_ms, greeting_ms);
  p->deadline_us = g_get_monotonic_time () + (gint64) greeting_ms * 1000;
  p->startup_deadline_us = g_get_monotonic_time () + (gint64) p->startup_ms * 1000;
  p->cancellable = cancellable != NULL ? g_object_ref (cancellable) : NULL;
  g_task_set_task_data (task, p, (GDestroyNotify) vmce_probe_free);
  g_task_set_source_tag (task, vmce_attach_probe_async);
  vmce_probe_connect (task);
}

void
vmce_attach_probe_async (const gchar *path,
                         guint greeting_ms,
                         guint startup_ms,
                         GAsyncReadyCallback callback,
                         gpointer user_data)
{
  vmce_attach_probe_start (path, greeting_ms, startup_ms, NULL, callback, user_data);
}

GSocket *
vmce_attach_probe_finish (GAsyncResult *res, pid_t *pid, GError **error)
{
  VmceProbe *p = g_task_get_task_data (G_TASK (res));

  if (pid != NULL)
    *pid = p->pid;
  return g_task_propagate_pointer (G_TASK (res), error);
}

/* --- the watch ------------------------------------------------------------ */

typedef struct {
  gchar *dir;
  GPtrArray *globs; /* the last parts of its patterns */
  GFileMonitor *monitor;
  VmceAttachWatch *watch;
} VmceWatchDir;

struct _VmceAttachWatch {
  GPtrArray *dirs; /* VmceWatchDir */
  guint greeting_ms;
  guint startup_ms;
  VmceAttachFound found;
  gpointer user_data;
  /* the paths being probed: a socket made during the first scan is seen
   * by it and by the monitor, and a second probe would wait behind the
   * first's connection, "held" by vmced itself */
  GHashTable *probing;
  /* probes under way end with the watch */
  GCancellable *cancellable;
};

static void
vmce_watch_dir_free (VmceWatchDir *d)
{
  if (d->monitor != NULL) {
    g_signal_handlers_disconnect_by_data (d->monitor, d);
    g_file_monitor_cancel (d->monitor);
    g_object_unref (d->monitor);
  }
  g_ptr_array_unref (d->globs);
  g_free (d->dir);
  g_free (d);
}

static gboolean
vmce_watch_dir_matches (VmceWatchDir *d, const gchar *name)
{
  for (guint i = 0; i < d->globs->len; i++)
    if (fnmatch (g_ptr_array_index (d->globs, i), name, FNM_PERIOD) == 0)
      return TRUE;
  return FALSE;
}

typedef struct {
  VmceAttachWatch *watch;
  gchar *path;
} VmceWatchProbe;

static void
vmce_watch_probe_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceWatchProbe *wp = user_data;
  g_autoptr(GError) error = NULL;
  pid_t pid = 0;
  g_autoptr(GSocket) socket = vmce_attach_probe_finish (res, &pid, &error);

  /* (cancelled: the watch is gone) */
  if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
    g_hash_table_remove (wp->watch->probing, wp->path);
    wp->watch->found (wp->path, socket, pid, error, wp->watch->user_data);
  }
  g_free (wp->path);
  g_free (wp);
}

static void
vmce_watch_probe (VmceAttachWatch *self, const gchar *path)
{
  VmceWatchProbe *wp;

  if (!g_hash_table_add (self->probing, g_strdup (path)))
    return;
  wp = g_new0 (VmceWatchProbe, 1);
  wp->watch = self;
  wp->path = g_strdup (path);
  g_debug ("probing %s", path);
  vmce_attach_probe_start (path, self->greeting_ms, self->startup_ms, self->cancellable,
                           vmce_watch_probe_cb, wp);
}

static void
vmce_watch_changed_cb (GFileMonitor *monitor,
                       GFile *file,
                       GFile *other,
                       GFileMonitorEvent event,
                       gpointer user_data)
{
  VmceWatchDir *d = user_data;
  g_autofree gchar *name = g_file_get_basename (file);
  g_autofree gchar *path = NULL;

  if (event != G_FILE_MONITOR_EVENT_CREATED || name == NULL || !vmce_watch_dir_matches (d, name))
    return;
  /* named as the pattern names its directory, not as the monitor resolved it */
  path = g_build_filename (d->dir, name, NULL);
  vmce_watch_probe (d->watch, path);
}

static VmceWatchDir *
vmce_watch_dir_get (VmceAttachWatch *self, const gchar *dir)
{
  VmceWatchDir *d;

  for (guint i = 0; i < self->dirs->len; i++) {
    d = g_ptr_array_index (self->dirs, i);
    if (g_strcmp0 (d->dir, dir) == 0)
      return d;
  }
  d = g_new0 (VmceWatchDir, 1);
  d->dir = g_strdup (dir);
  d->globs = g_ptr_array_new_with_free_func (g_free);
  d->watch = self;
  g_ptr_array_add (self->dirs, d);
  return d;
}

/* Its directory watched (made if missing): FALSE, said in one line, if not */
static gboolean
vmce_watch_dir_start (VmceWatchDir *d, GCancellable *cancellable)
{
  g_autoptr(GFile) file = g_file_new_for_path (d->dir);
  g_autoptr(GError) error = NULL;

  if (g_mkdir_with_parents (d->dir, 0700) < 0) {
    g_warning ("[attach] cannot make %s to watch for sockets: %s", d->dir, g_strerror (errno));
    return FALSE;
  }
  d->monitor = g_file_monitor_directory (file, G_FILE_MONITOR_NONE, cancellable, &error);
  if (d->monitor == NULL) {
    g_warning ("[attach] cannot watch %s for new sockets: %s", d->dir, error->message);
    return FALSE;
  }
  g_signal_connect (d->monitor, "changed", G_CALLBACK (vmce_watch_changed_cb), d);
  return TRUE;
}

static gint
vmce_watch_name_cmp (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const gchar *const *) a, *(const gchar *const *) b);
}

/* What is there now: each match probed, a pattern that matches nothing said */
static void
vmce_watch_dir_scan (VmceAttachWatch *self, VmceWatchDir *d)
{
  g_autoptr(GDir) dir = g_dir_open (d->dir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const gchar *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    if (vmce_watch_dir_matches (d, name))
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, vmce_watch_name_cmp);
  for (guint i = 0; i < d->globs->len; i++) {
    const gchar *glob = g_ptr_array_index (d->globs, i);
    gboolean any = FALSE;

    for (guint j = 0; j < names->len && !any; j++)
      any = fnmatch (glob, g_ptr_array_index (names, j), FNM_PERIOD) == 0;
    if (!any)
      g_message ("[attach] nothing matches %s/%s yet; watching %s for it", d->dir, glob, d->dir);
  }
  for (guint i = 0; i < names->len; i++) {
    g_autofree gchar *path = g_build_filename (d->dir, g_ptr_array_index (names, i), NULL);
    vmce_watch_probe (self, path);
  }
}

VmceAttachWatch *
vmce_attach_watch_new (const gchar *const *patterns,
                       guint greeting_ms,
                       guint startup_ms,
                       VmceAttachFound found,
                       gpointer user_data,
                       GError **error)
{
  g_autoptr(VmceAttachWatch) self = g_new0 (VmceAttachWatch, 1);

  self->dirs = g_ptr_array_new_with_free_func ((GDestroyNotify) vmce_watch_dir_free);
  self->greeting_ms = greeting_ms;
  self->startup_ms = startup_ms;
  self->found = found;
  self->user_data = user_data;
  self->cancellable = g_cancellable_new ();
  self->probing = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; patterns != NULL && patterns[i] != NULL; i++) {
    g_autofree gchar *dir = g_path_get_dirname (patterns[i]);
    g_autofree gchar *glob = g_path_get_basename (patterns[i]);

    if (!g_path_is_absolute (patterns[i]) || strpbrk (dir, "*?[") != NULL) {
      g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                   "[attach] %s: an absolute path, wildcards only in its last part", patterns[i]);
      return NULL;
    }
    g_ptr_array_add (vmce_watch_dir_get (self, dir)->globs, g_steal_pointer (&glob));
  }
  /* watching first: a socket made during the scan is seen by one or both
   * (probed once) */
  for (guint i = 0; i < self->dirs->len; i++) {
    VmceWatchDir *d = g_ptr_array_index (self->dirs, i);
    if (vmce_watch_dir_start (d, self->cancellable))
      vmce_watch_dir_scan (self, d);
  }
  return g_steal_pointer (&self);
}

void
vmce_attach_watch_free (VmceAttachWatch *self)
{
  if (self == NULL)
    return;
  /* probes under way end now, telling no one */
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_ptr_array_unref (self->dirs);
  g_hash_table_unref (self->probing);
  g_free (self);
}
