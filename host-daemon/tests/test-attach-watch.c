/*
 * [attach]'s probe and watch against sockets of this process: a monitor
 * that greets (at once, or in two writes, or only after a while accepting
 * no one, as a QEMU still starting), one held by another client, one that
 * never accepts, one that says something else, one that closes, a file, a
 * socket nobody listens on; the watch's first scan, a socket made
 * later in a directory it made, a name that does not match, and the watch
 * freed while a probe waits.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "attach-watch.h"
#include "error.h"

#define GREETING "{\"QMP\": {\"version\": {}, \"capabilities\": []}}\r\n"

/* SERVE_HELD accepts one client (the test's own) and then no more, as QEMU
 * while another client has its monitor; SERVE_NOTHING accepts none, as a
 * QEMU still starting */
typedef enum { SERVE_GREET, SERVE_GREET_SPLIT, SERVE_OTHER, SERVE_CLOSE, SERVE_HELD, SERVE_NOTHING } Serve;

typedef struct {
  int fd;
  Serve serve;
  guint source;
  GPtrArray *conns; /* fds accepted, kept open */
  int holder;       /* SERVE_HELD: the client it holds */
} Server;

static gboolean
second_half_cb (gpointer user_data)
{
  int fd = GPOINTER_TO_INT (user_data);
  const gchar *rest = GREETING + 10;

  g_assert_cmpint (write (fd, rest, strlen (rest)), ==, (gssize) strlen (rest));
  return G_SOURCE_REMOVE;
}

static gboolean
accept_cb (gint fd, GIOCondition cond, gpointer user_data)
{
  Server *s = user_data;
  int conn = accept4 (fd, NULL, NULL, SOCK_CLOEXEC);

  g_assert_cmpint (conn, >=, 0);
  if (s->serve == SERVE_GREET)
    g_assert_cmpint (write (conn, GREETING, strlen (GREETING)), ==, (gssize) strlen (GREETING));
  if (s->serve == SERVE_GREET_SPLIT) {
    g_assert_cmpint (write (conn, GREETING, 10), ==, 10);
    g_timeout_add (60, second_half_cb, GINT_TO_POINTER (conn));
  }
  if (s->serve == SERVE_OTHER)
    g_assert_cmpint (write (conn, "220 smtp ready\r\n", 16), ==, 16);
  if (s->serve == SERVE_CLOSE) {
    close (conn);
    return G_SOURCE_CONTINUE;
  }
  g_ptr_array_add (s->conns, GINT_TO_POINTER (conn));
  if (s->serve == SERVE_HELD) {
    s->source = 0;
    return G_SOURCE_REMOVE;
  }
  return G_SOURCE_CONTINUE;
}

static int
connect_to (const gchar *path)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_strlcpy (sa.sun_path, path, sizeof sa.sun_path);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &sa, sizeof sa), ==, 0);
  return fd;
}

/* A listening socket at @path, serving as @serve says */
static Server *
server_new (const gchar *path, Serve serve)
{
  Server *s = g_new0 (Server, 1);
  struct sockaddr_un sa = { .sun_family = AF_UNIX };

  g_strlcpy (sa.sun_path, path, sizeof sa.sun_path);
  s->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (bind (s->fd, (struct sockaddr *) &sa, sizeof sa), ==, 0);
  g_assert_cmpint (listen (s->fd, 1), ==, 0);
  s->serve = serve;
  s->conns = g_ptr_array_new ();
  if (serve != SERVE_NOTHING)
    s->source = g_unix_fd_add (s->fd, G_IO_IN, accept_cb, s);
  if (serve == SERVE_HELD) {
    s->holder = connect_to (path);
    while (s->conns->len == 0)
      g_main_context_iteration (NULL, TRUE);
  }
  return s;
}

static void
server_free (Server *s)
{
  for (guint i = 0; i < s->conns->len; i++)
    close (GPOINTER_TO_INT (g_ptr_array_index (s->conns, i)));
  g_ptr_array_unref (s->conns);
  g_clear_handle_id (&s->source, g_source_remove);
  close (s->fd);
  if (s->holder > 0)
    close (s->holder);
  g_free (s);
}

typedef struct {
  gboolean done;
  GSocket *socket;
  pid_t pid;
  GError *error;
} Probed;

static void
probed_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Probed *p = user_data;

  p->socket = vmce_attach_probe_finish (res, &p->pid, &p->error);
  p->done = TRUE;
}

static void
probe_with (const gchar *path, guint startup_ms, Probed *p)
{
  memset (p, 0, sizeof *p);
  vmce_attach_probe_async (path, 100, startup_ms, probed_cb, p);
  while (!p->done)
    g_main_context_iteration (NULL, TRUE);
}

static void
probe (const gchar *path, Probed *p)
{
  memset (p, 0, sizeof *p);
  vmce_attach_probe_async (path, 300, 300, probed_cb, p);
  while (!p->done)
    g_main_context_iteration (NULL, TRUE);
}

static void
test_probe_greeted (gconstpointer data)
{
  g_autofree gchar *dir = g_dir_make_tmp ("attach-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "qmp.sock", NULL);
  Server *s = server_new (path, GPOINTER_TO_INT (data));
  gchar buf[256] = { 0 };
  Probed p;

  probe (path, &p);
  g_assert_no_error (p.error);
  g_assert_nonnull (p.socket);
  g_assert_cmpint (p.pid, ==, getpid ());
  /* peeked, not read: the QMP client reads the greeting itself */
  g_assert_cmpint (recv (g_socket_get_fd (p.socket), buf, sizeof buf - 1, 0), ==, strlen (GREETING));
  g_assert_cmpstr (buf, ==, GREETING);
  g_object_unref (p.socket);
  server_free (s);
  g_unlink (path);
  g_rmdir (dir);
}

/* @serve: the server at the path; -1 a file, -2 a socket nobody listens
 * on, -3 nothing */
static void
probe_fails (const gchar *leaf, gint serve, VmceErrorCode code, const gchar *words)
{
  g_autofree gchar *dir = g_dir_make_tmp ("attach-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, leaf, NULL);
  Server *s = serve >= 0 ? server_new (path, serve) : NULL;
  gint64 start = g_get_monotonic_time ();
  Probed p;

  if (serve == -1)
    g_assert_true (g_file_set_contents (path, "not a socket\n", -1, NULL));
  if (serve == -2) { /* bound, closed, left behind: nothing listens */
    server_free (server_new (path, SERVE_NOTHING));
  }
  probe (path, &p);
  g_assert_null (p.socket);
  g_assert_error (p.error, VMCE_ERROR, (gint) code);
  g_assert_nonnull (strstr (p.error->message, path));
  if (strstr (p.error->message, words) == NULL)
    g_error ("'%s' does not say '%s'", p.error->message, words);
  /* one wait of the greeting's time at most */
  g_assert_cmpint (g_get_monotonic_time () - start, <, 2 * G_USEC_PER_SEC);
  g_clear_error (&p.error);
  if (s != NULL)
    server_free (s);
  g_unlink (path);
  g_rmdir (dir);
}

static void
test_probe_held (void)
{
  probe_fails ("held.sock", SERVE_HELD, VMCE_ERROR_BUSY, "held by another client");
  /* and one that accepts no one for longer than a QEMU may take to start */
  probe_fails ("hung.sock", SERVE_NOTHING, VMCE_ERROR_TIMEOUT, "accepted no connection");
}

static gboolean
start_serving_cb (gpointer user_data)
{
  Server *s = user_data;

  s->serve = SERVE_GREET;
  s->source = g_unix_fd_add (s->fd, G_IO_IN, accept_cb, s);
  return G_SOURCE_REMOVE;
}

/* a QEMU still building its machine accepts no one for a while: the probe,
 * first in its queue, waits past the greeting's time for it */
static void
test_probe_starting (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("attach-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "starting.sock", NULL);
  Server *s = server_new (path, SERVE_NOTHING);
  Probed p;

  g_timeout_add (400, start_serving_cb, s);
  probe_with (path, 5000, &p);
  g_assert_no_error (p.error);
  g_assert_nonnull (p.socket);
  g_object_unref (p.socket);
  server_free (s);
  g_unlink (path);
  g_rmdir (dir);
}

static void
test_probe_not_qmp (void)
{
  probe_fails ("smtp.sock", SERVE_OTHER, VMCE_ERROR_INVALID_PARAMETER, "not QEMU's monitor");
  probe_fails ("eof.sock", SERVE_CLOSE, VMCE_ERROR_INVALID_PARAMETER, "closed the connection");
  probe_fails ("file.sock", -1, VMCE_ERROR_INVALID_PARAMETER, "not a socket");
}

static void
test_probe_nothing_there (void)
{
  probe_fails ("stale.sock", -2, VMCE_ERROR_NOT_FOUND, "nothing listens");
  probe_fails ("missing.sock", -3, VMCE_ERROR_NOT_FOUND, "No such file");
}

typedef struct {
  GPtrArray *found; /* "path pid" or "path error" */
} Found;

static void
found_cb (const gchar *path, GSocket *socket, pid_t pid, const GError *error, gpointer user_data)
{
  Found *f = user_data;
  g_autofree gchar *base = g_path_get_basename (path);

  g_ptr_array_add (f->found, error != NULL ? g_strdup_printf ("%s error", base)
                                           : g_strdup_printf ("%s %s", base, pid == getpid () ? "pid" : "?"));
}

static void
wait_found (Found *f, guint n)
{
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  while (f->found->len < n && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (f->found->len, ==, n);
}

static void
test_watch (void)
{
  g_autofree gchar *top = g_dir_make_tmp ("attach-XXXXXX", NULL);
  g_autofree gchar *dir = g_build_filename (top, "qmp", NULL);
  g_autofree gchar *pattern = g_build_filename (dir, "*.sock", NULL);
  g_autofree gchar *none_dir = g_build_filename (top, "none", NULL);
  g_autofree gchar *none = g_build_filename (none_dir, "*.sock", NULL);
  g_autofree gchar *a = g_build_filename (dir, "a.sock", NULL);
  g_autofree gchar *b = g_build_filename (dir, "b.sock", NULL);
  g_autofree gchar *other = g_build_filename (dir, "b.txt", NULL);
  const gchar *patterns[] = { pattern, none, NULL };
  Found f = { g_ptr_array_new_with_free_func (g_free) };
  g_autoptr(GError) error = NULL;
  VmceAttachWatch *watch;
  Server *sa, *sb, *so;

  g_assert_cmpint (g_mkdir (dir, 0700), ==, 0);
  sa = server_new (a, SERVE_GREET);
  g_test_expect_message ("vmce-attach", G_LOG_LEVEL_MESSAGE, "*nothing matches */none/*.sock yet*");
  watch = vmce_attach_watch_new (patterns, 300, 300, found_cb, &f, &error);
  g_assert_no_error (error);
  g_test_assert_expected_messages ();
  /* the directory of a pattern that matched nothing is made, to be watched */
  g_assert_true (g_file_test (none_dir, G_FILE_TEST_IS_DIR));
  wait_found (&f, 1);
  g_assert_cmpstr (g_ptr_array_index (f.found, 0), ==, "a.sock pid");
  /* a socket made later is found; one whose name does not match is not */
  so = server_new (other, SERVE_GREET);
  sb = server_new (b, SERVE_GREET);
  wait_found (&f, 2);
  g_assert_cmpstr (g_ptr_array_index (f.found, 1), ==, "b.sock pid");
  vmce_attach_watch_free (watch);
  server_free (sa);
  server_free (sb);
  server_free (so);
  g_ptr_array_unref (f.found);
  g_unlink (a);
  g_unlink (b);
  g_unlink (other);
  g_rmdir (dir);
  g_rmdir (none_dir);
  g_rmdir (top);
}

/* freed while a probe waits for a greeting that never comes: the probe
 * ends quietly, telling no one */
static void
test_watch_freed_while_probing (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("attach-XXXXXX", NULL);
  g_autofree gchar *pattern = g_build_filename (dir, "*.sock", NULL);
  g_autofree gchar *held = g_build_filename (dir, "held.sock", NULL);
  const gchar *patterns[] = { pattern, NULL };
  Found f = { g_ptr_array_new_with_free_func (g_free) };
  Server *s = server_new (held, SERVE_NOTHING);
  VmceAttachWatch *watch = vmce_attach_watch_new (patterns, 5000, 5000, found_cb, &f, NULL);
  gint64 until = g_get_monotonic_time () + 100 * 1000;

  while (g_get_monotonic_time () < until)
    g_main_context_iteration (NULL, FALSE);
  vmce_attach_watch_free (watch);
  until = g_get_monotonic_time () + 100 * 1000;
  while (g_get_monotonic_time () < until)
    g_main_context_iteration (NULL, FALSE);
  g_assert_cmpuint (f.found->len, ==, 0);
  g_ptr_array_unref (f.found);
  server_free (s);
  g_unlink (held);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/attach-watch/probe/greeted", GINT_TO_POINTER (SERVE_GREET), test_probe_greeted);
  g_test_add_data_func ("/attach-watch/probe/greeted-in-two-writes", GINT_TO_POINTER (SERVE_GREET_SPLIT),
                        test_probe_greeted);
  g_test_add_func ("/attach-watch/probe/held", test_probe_held);
  g_test_add_func ("/attach-watch/probe/starting", test_probe_starting);
  g_test_add_func ("/attach-watch/probe/not-qmp", test_probe_not_qmp);
  g_test_add_func ("/attach-watch/probe/nothing-there", test_probe_nothing_there);
  g_test_add_func ("/attach-watch/watch", test_watch);
  g_test_add_func ("/attach-watch/watch/freed-while-probing", test_watch_freed_while_probing);
  return g_test_run ();
}
