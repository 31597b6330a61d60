/*
 * The event journal.
 *
 * Records are batched: while one write+fdatasync pair is in flight, new
 * records collect in memory, and the next batch goes out when the pair
 * completes. One chain at a time keeps lines in order (two independent
 * io_uring writes to an O_APPEND file may complete in any order) and a
 * burst of events costs one fdatasync, not one per event.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-journal"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <liburing.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "journal.h"
#include "json-util.h"

/* a failed write is tried again after this long */
#define VMCE_JOURNAL_RETRY_MS 1000

struct _VmceJournal {
  gchar *path;
  int fd;
  int event_fd;
  guint event_watch;
  guint retry_source;
  struct io_uring ring;
  gboolean ring_ready;

  GString *pending;    /* records not yet submitted */
  guint64 pending_seq; /* sequence number of the last record in @pending */
  GBytes *inflight;    /* the batch being written */
  gsize inflight_done; /* bytes of @inflight already written */
  guint64 inflight_seq;
  guint inflight_cqes; /* completions still expected for the chain */
  gboolean inflight_failed;

  guint64 n_appended;
  guint64 n_synced;
  gchar *last_error;
  GFunc error_func;
  gpointer error_data;
};

static void vmce_journal_submit (VmceJournal *self);

/* Degraded: vmced goes on forwarding, and keeps what it could not write
 * (memory is all it costs) until the disk takes it */
static void
vmce_journal_set_error (VmceJournal *self, const gchar *what, int err)
{
  g_autofree gchar *msg = g_strdup_printf ("%s %s: %s", what, self->path, g_strerror (err));

  /* log a changed error once, not every retry */
  if (g_strcmp0 (msg, self->last_error) != 0)
    g_warning ("journal degraded: %s; %" G_GUINT64_FORMAT " record(s) held, tried again "
               "every %u ms", msg, vmce_journal_get_n_held (self), VMCE_JOURNAL_RETRY_MS);
  g_free (self->last_error);
  self->last_error = g_steal_pointer (&msg);
  if (self->error_func != NULL)
    self->error_func (self, self->error_data);
}

static void
vmce_journal_clear_error (VmceJournal *self)
{
  if (self->last_error == NULL)
    return;
  g_message ("journal %s writes again: every record held is on disk", self->path);
  g_clear_pointer (&self->last_error, g_free);
}

static gboolean
vmce_journal_retry_cb (gpointer user_data)
{
  VmceJournal *self = user_data;

  self->retry_source = 0;
  vmce_journal_submit (self);
  return G_SOURCE_REMOVE;
}

static void
vmce_journal_complete (VmceJournal *self, struct io_uring_cqe *cqe)
{
  gboolean is_write = io_uring_cqe_get_data64 (cqe) == 1;

  self->inflight_cqes--;
  if (is_write) {
    if (cqe->res < 0) {
      vmce_journal_set_error (self, "cannot write", -cqe->res);
      self->inflight_failed = TRUE;
    } else {
      self->inflight_done += (gsize) cqe->res;
    }
  } else if (cqe->res < 0 && cqe->res != -ECANCELED) {
    vmce_journal_set_error (self, "cannot fdatasync", -cqe->res);
    self->inflight_failed = TRUE;
  }
  /* -ECANCELED: a short or failed write broke the link; the write's own
   * completion says which */
  if (self->inflight_cqes > 0)
    return;

  if (!self->inflight_failed && self->inflight_done >= g_bytes_get_size (self->inflight)) {
    self->n_synced = self->inflight_seq;
    g_clear_pointer (&self->inflight, g_bytes_unref);
    if (self->pending->len == 0)
      vmce_journal_clear_error (self);
    vmce_journal_submit (self);
    return;
  }
  if (self->inflight_failed) {
    self->inflight_failed = FALSE;
    if (self->retry_source == 0)
      self->retry_source = g_timeout_add (VMCE_JOURNAL_RETRY_MS, vmce_journal_retry_cb, self);
    return;
  }
  /* short write: send the rest */
  vmce_journal_submit (self);
}

static void
vmce_journal_reap (VmceJournal *self)
{
  struct io_uring_cqe *cqe = NULL;

  while (io_uring_peek_cqe (&self->ring, &cqe) == 0) {
    vmce_journal_complete (self, cqe);
    io_uring_cqe_seen (&self->ring, cqe);
  }
}

static gboolean
vmce_journal_event_cb (gint fd, GIOCondition condition, gpointer user_data)
{
  VmceJournal *self = user_data;
  eventfd_t value;

  (void) eventfd_read (fd, &value);
  vmce_journal_reap (self);
  return G_SOURCE_CONTINUE;
}

static void
vmce_journal_submit (VmceJournal *self)
{
  struct io_uring_sqe *sqe;
  const guint8 *data;
  gsize size;
  int rc;

  if (self->inflight_cqes > 0 || self->retry_source != 0)
    return;
  if (self->inflight == NULL) {
    if (self->pending->len == 0)
      return;
    self->inflight = g_bytes_new (self->pending->str, self->pending->len);
    self->inflight_done = 0;
    self->inflight_seq = self->pending_seq;
    g_string_truncate (self->pending, 0);
  }
  data = g_bytes_get_data (self->inflight, &size);

  sqe = io_uring_get_sqe (&self->ring);
  /* offset -1: the file position, which O_APPEND puts at the end */
  io_uring_prep_write (sqe, self->fd, data + self->inflight_done,
                       (unsigned) (size - self->inflight_done), (__u64) -1);
  io_uring_sqe_set_data64 (sqe, 1);
  sqe->flags |= IOSQE_IO_LINK;
  sqe = io_uring_get_sqe (&self->ring);
  io_uring_prep_fsync (sqe, self->fd, IORING_FSYNC_DATASYNC);
  io_uring_sqe_set_data64 (sqe, 2);

  rc = io_uring_submit (&self->ring);
  if (rc < 0) {
    vmce_journal_set_error (self, "cannot submit write for", -rc);
    self->retry_source = g_timeout_add (VMCE_JOURNAL_RETRY_MS, vmce_journal_retry_cb, self);
    return;
  }
  self->inflight_cqes = 2;
}

guint64
vmce_journal_append (VmceJournal *self, JsonNode *record)
{
  g_autofree gchar *line = vmce_json_to_line (record);

  g_string_append (self->pending, line);
  g_string_append_c (self->pending, '\n');
  self->pending_seq = ++self->n_appended;
  vmce_journal_submit (self);
  return self->pending_seq;
}

gboolean
vmce_journal_flush_sync (VmceJournal *self, GError **error)
{
  /* give a failing disk a few more chances before giving up at exit */
  for (guint attempt = 0; attempt < 3; attempt++) {
    g_clear_handle_id (&self->retry_source, g_source_remove);
    vmce_journal_submit (self);
    while (self->inflight_cqes > 0) {
      struct io_uring_cqe *cqe = NULL;
      int rc = io_uring_wait_cqe (&self->ring, &cqe);
      if (rc == -EINTR)
        continue;
      if (rc < 0) {
        g_set_error (error, G_IO_ERROR, g_io_error_from_errno (-rc),
                     "cannot wait for journal %s: %s", self->path, g_strerror (-rc));
        return FALSE;
      }
      vmce_journal_complete (self, cqe);
      io_uring_cqe_seen (&self->ring, cqe);
    }
    if (self->n_synced == self->n_appended)
      return TRUE;
    if (self->retry_source == 0 && self->inflight == NULL && self->pending->len == 0)
      break;
  }
  g_clear_handle_id (&self->retry_source, g_source_remove);
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
               "journal %s: %" G_GUINT64_FORMAT " record(s) could not be written: %s",
               self->path, self->n_appended - self->n_synced,
               self->last_error != NULL ? self->last_error : "unknown error");
  return FALSE;
}

/* A journal whose last record was cut short (vmced killed in the middle
 * of a write, a full disk) would glue the next record onto that fragment
 * and lose both: start the next one on a line of its own */
static gboolean
vmce_journal_end_line (VmceJournal *self, GError **error)
{
  int fd = open (self->path, O_RDONLY | O_CLOEXEC);
  char last = '\n';
  off_t size;

  if (fd < 0)
    return TRUE;
  size = lseek (fd, 0, SEEK_END);
  if (size > 0 && pread (fd, &last, 1, size - 1) != 1)
    last = '\n';
  close (fd);
  if (last == '\n')
    return TRUE;
  /* the replay (poison-index.c) has said so already, with the line */
  g_debug ("journal %s ends in the middle of a record: the next record starts on a new line",
           self->path);
  if (write (self->fd, "\n", 1) != 1) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "cannot write to journal %s: %s", self->path, g_strerror (errsv));
    return FALSE;
  }
  return TRUE;
}

VmceJournal *
vmce_journal_open (const gchar *path, GError **error)
{
  g_autoptr(VmceJournal) self = g_new0 (VmceJournal, 1);
  g_autofree gchar *dir = g_path_get_dirname (path);
  int rc;

  self->fd = -1;
  self->event_fd = -1;
  self->path = g_strdup (path);
  self->pending = g_string_new (NULL);

  if (g_mkdir_with_parents (dir, 0750) != 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "cannot create journal directory %s: %s", dir, g_strerror (errsv));
    return NULL;
  }
  self->fd = open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (self->fd < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "cannot open journal %s: %s", path, g_strerror (errsv));
    return NULL;
  }
  if (!vmce_journal_end_line (self, error))
    return NULL;
  rc = io_uring_queue_init (8, &self->ring, 0);
  if (rc < 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (-rc),
                 "cannot set up io_uring for the journal: %s", g_strerror (-rc));
    return NULL;
  }
  self->ring_ready = TRUE;
  self->event_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (self->event_fd < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "cannot create eventfd: %s", g_strerror (errsv));
    return NULL;
  }
  rc = io_uring_register_eventfd (&self->ring, self->event_fd);
  if (rc < 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (-rc),
                 "cannot register eventfd with io_uring: %s", g_strerror (-rc));
    return NULL;
  }
  self->event_watch = g_unix_fd_add (self->event_fd, G_IO_IN, vmce_journal_event_cb, self);
  return g_steal_pointer (&self);
}

void
vmce_journal_free (VmceJournal *self)
{
  if (self == NULL)
    return;
  g_clear_handle_id (&self->event_watch, g_source_remove);
  g_clear_handle_id (&self->retry_source, g_source_remove);
  if (self->ring_ready) {
    /* the kernel may still be writing from @inflight */
    while (self->inflight_cqes > 0) {
      struct io_uring_cqe *cqe = NULL;
      if (io_uring_wait_cqe (&self->ring, &cqe) < 0)
        break;
      self->inflight_cqes--;
      io_uring_cqe_seen (&self->ring, cqe);
    }
    io_uring_queue_exit (&self->ring);
  }
  if (self->event_fd >= 0)
    close (self->event_fd);
  if (self->fd >= 0)
    close (self->fd);
  if (self->n_synced != self->n_appended)
    g_warning ("journal %s: %" G_GUINT64_FORMAT " record(s) were not written",
               self->path, self->n_appended - self->n_synced);
  g_clear_pointer (&self->inflight, g_bytes_unref);
  g_string_free (self->pending, TRUE);
  g_free (self->last_error);
  g_free (self->path);
  g_free (self);
}

const gchar *
vmce_journal_get_path (VmceJournal *self)
{
  return self->path;
}

guint64
vmce_journal_get_n_appended (VmceJournal *self)
{
  return self->n_appended;
}

guint64
vmce_journal_get_n_synced (VmceJournal *self)
{
  return self->n_synced;
}

guint64
vmce_journal_get_n_held (VmceJournal *self)
{
  return self->n_appended - self->n_synced;
}

const gchar *
vmce_journal_get_last_error (VmceJournal *self)
{
  return self->last_error;
}

void
vmce_journal_set_error_func (VmceJournal *self, GFunc func, gpointer user_data)
{
  self->error_func = func;
  self->error_data = user_data;
}
