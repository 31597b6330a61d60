/*
 * JSON helpers. json-glib has no unsigned integer type, and JSON numbers
 * above 2^53 lose precision in most readers, so 64-bit registers and
 * addresses travel as "0x..." strings everywhere in vmce.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

void vmce_json_builder_add_hex (JsonBuilder *builder, const gchar *member, guint64 value);
/* A member and its value in one call; a NULL string is null */
void vmce_json_builder_add_string (JsonBuilder *builder, const gchar *member, const gchar *value);
void vmce_json_builder_add_int (JsonBuilder *builder, const gchar *member, gint64 value);
void vmce_json_builder_add_bool (JsonBuilder *builder, const gchar *member, gboolean value);
gchar *vmce_hex (guint64 value);

/* Accepts "0x..." / decimal strings and non-negative integers. */
gboolean vmce_parse_u64 (const gchar *str, guint64 *value, GError **error);
gboolean vmce_json_object_get_u64 (JsonObject *obj,
                                   const gchar *member,
                                   guint64 *value,
                                   GError **error);
/* Like get_u64, but a missing member is not an error: @value is left alone */
gboolean vmce_json_object_get_u64_opt (JsonObject *obj,
                                       const gchar *member,
                                       guint64 *value,
                                       gboolean *present,
                                       GError **error);
const gchar *vmce_json_object_get_string_opt (JsonObject *obj, const gchar *member);

/* One line of JSON, no newline */
gchar *vmce_json_to_line (JsonNode *node);
/* Parse one JSON object; the error names @what ("monitor", "agent", ...) */
JsonNode *vmce_json_parse_object (const gchar *data, gssize len, const gchar *what, GError **error);
